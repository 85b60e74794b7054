/**
 * Receipts and replies as deliver_sm (issue 44, docs/smpp-server.md#receipts-and-replies), with
 * Perl's Net::SMPP as the customer: on a transceiver, on a receiver beside a transmitter, and
 * store-and-forward: produced while no bind is open, they reach the next bind on another process;
 * rows claimed by a process that died are delivered once the claim ends.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { admin, ADMIN_TOKEN, createTenant, createTestApp, drainDeliveries, simulatorInbound, type Tenant, type TestApp } from "../support/harness.js";
import { claimSmppOutbox } from "../../src/messaging/smpp-outbox-store.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { gsmHex, setSmppCredentials, startEsme, type TestEsme } from "./esme.js";
import { receivedRecord } from "../support/records.js";

let t: TestApp;
let port: number;
let a: Tenant;
const esmes: TestEsme[] = [];
const TO = "61412345678";

async function bound(app: TestApp["app"], mode: string, systemId = "acme"): Promise<TestEsme> {
  const e = await startEsme((app === t.app ? port : otherPort)!);
  esmes.push(e);
  e.send(`bind ${mode} ${systemId} pw1234`);
  expect((await e.next("bind_resp")).f.status).toBe("0");
  return e;
}

let other: TestApp | undefined;
let otherPort: number | undefined;

beforeAll(async () => {
  t = await createTestApp({ engine: true, config: { smppServer: { port: 0 }, host: "127.0.0.1" } });
  port = (await t.app.smppServer!.listen()).port!;
  a = await createTenant(t.app);
  await setSmppCredentials(t.app, a.accountSid, { SystemId: "acme", Password: "pw1234", PropertySid: a.propertySid, DeliverReplies: true, MaxBinds: 50 });
});

afterAll(async () => {
  for (const e of esmes) await e.stop();
  await other?.close();
  await t.close();
});

async function submitted(e: TestEsme, tag: string, extra = "rd=1"): Promise<string> {
  e.send(`submit ${tag} src=${a.ownedNumber.slice(1)} dst=${TO} ${extra} sm=${gsmHex(`receipt ${tag}`)}`);
  const resp = await e.next("submit_resp", (x) => x.f.tag === tag);
  expect(resp.f.status).toBe("0");
  return resp.f.id!;
}

async function outboxRows(): Promise<number> {
  const rows = await executeBound<{ n: string | number }>(t.db.orm.em.fork(), "select count(*) as n from smpp_outbox", []);
  return Number(rows[0]!.n);
}

/** What the database holds: statements the REST API has no view for. */
function query<R extends object>(sql: string, params: unknown[]): Promise<R[]> {
  return executeBound<R>(t.db.orm.em.fork(), sql, params);
}

/** A GET of the REST API as the tenant, expecting 200. */
async function restGet(who: Tenant, url: string): Promise<any> {
  const res = await t.app.inject({ method: "GET", url, headers: { authorization: who.auth } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const secondsOf = (d: Date) => Math.floor(d.getTime() / 1000);

describe("receipts", () => {
  it("on a transceiver: deliver_sm with esm_class 0x04, the customary text, receipted_message_id and message_state; deleted once answered", async () => {
    const e = await bound(t.app, "transceiver");
    const sid = await submitted(e, "r1");
    await drainDeliveries(t);
    const d = await e.next("deliver", (x) => x.f.rmi === sid);
    expect(d.f).toMatchObject({ esm: "4", dc: "0", src: TO, dst: a.ownedNumber.slice(1), rmi: sid, state: "2" });
    const text = Buffer.from(d.f.sm!, "hex").toString("latin1");
    expect(text).toMatch(new RegExp(`^id:${sid} sub:001 dlvrd:001 submit date:\\d{10} done date:\\d{10} stat:DELIVRD err:000 text:receipt r1$`));
    await expect.poll(outboxRows).toBe(0);
    e.send("unbind");
    await e.next("unbind_resp");
  });

  it("the receipt's row is stored in the message's transaction: when it cannot be written, the submit_sm is refused and no message is stored", async () => {
    const em = t.db.orm.em.fork();
    await em.execute(
      `create function sb_test_refuse_receipt() returns trigger language plpgsql as $$ begin raise exception 'receipt refused by the test'; end $$`,
    );
    await em.execute(`create trigger sb_test_refuse_receipt before insert on smpp_outbox for each row execute function sb_test_refuse_receipt()`);
    try {
      const e = await bound(t.app, "transceiver");
      e.send(`submit x1 src=${a.ownedNumber.slice(1)} dst=${TO} rd=1 sm=${gsmHex("no receipt, no message")}`);
      expect((await e.next("submit_resp", (x) => x.f.tag === "x1")).f.status).toBe(String(0x08));
      const stored = await executeBound<{ n: string | number }>(em, "select count(*) as n from messages where text = ?", ["no receipt, no message"]);
      expect(Number(stored[0]!.n)).toBe(0);
      e.send("unbind");
      await e.next("unbind_resp");
    } finally {
      await em.execute(`drop trigger sb_test_refuse_receipt on smpp_outbox`);
      await em.execute(`drop function sb_test_refuse_receipt()`);
    }
  });

  it("registered_delivery 0 asks for none; a transmitter's receipt goes to the receiver bind beside it", async () => {
    const tx = await bound(t.app, "transmitter");
    const rx = await bound(t.app, "receiver");
    const none = await submitted(tx, "r0", "rd=0");
    const sid = await submitted(tx, "r2");
    await drainDeliveries(t);
    const d = await rx.next("deliver", (x) => x.f.rmi === sid);
    expect(d.f.state).toBe("2");
    expect(rx.events.some((x) => x.kind === "deliver" && x.f.rmi === none)).toBe(false);
    expect(tx.events.some((x) => x.kind === "deliver")).toBe(false);
    for (const e of [tx, rx]) {
      e.send("unbind");
      await e.next("unbind_resp");
    }
  });

  it("a receipt the client refuses (deliver_sm_resp with an error) comes again", async () => {
    const e = await bound(t.app, "transceiver");
    e.send("deliverstatus 8");
    const sid = await submitted(e, "r3");
    await drainDeliveries(t);
    await e.next("deliver", (x) => x.f.rmi === sid);
    await e.next("deliver", (x) => x.f.rmi === sid, 10_000);
    e.send("unbind");
    await e.next("unbind_resp");
  });
});

describe("store-and-forward", () => {
  it("receipts produced while unbound reach the next bind, on another process; rows a dead process claimed come once its claim ends", async () => {
    const e = await bound(t.app, "transmitter");
    const first = await submitted(e, "s1");
    const second = await submitted(e, "s2");
    e.send("unbind");
    await e.next("unbind_resp");
    await drainDeliveries(t);
    expect(await outboxRows()).toBe(2);
    // A process that claimed both and died (its claim stays until it ends).
    const claimed = await claimSmppOutbox(t.db.orm.em.fork(), [a.accountSid], t.clock.now(), 10);
    expect(claimed.map((c) => c.messageSid).sort()).toStrictEqual([first, second].sort());
    // Another process on the same database: its own SMPP server.
    other = await createTestApp({ db: t.db, clock: t.clock, config: { smppServer: { port: 0 }, host: "127.0.0.1" } });
    otherPort = (await other.app.smppServer!.listen()).port!;
    const rx = await bound(other.app, "receiver");
    // Still claimed: nothing yet.
    await new Promise((r) => setTimeout(r, 1500));
    expect(rx.events.filter((x) => x.kind === "deliver")).toStrictEqual([]);
    t.clock.advance(31_000);
    const got = await Promise.all([first, second].map((sid) => rx.next("deliver", (x) => x.f.rmi === sid)));
    expect(got.map((g) => g.f.state)).toStrictEqual(["2", "2"]);
    await expect.poll(outboxRows).toBe(0);
    rx.send("unbind");
    await rx.next("unbind_resp");
  });
});

describe("replies", () => {
  it("a reply to a leased number arrives as an ordinary deliver_sm when the account chose SMPP for replies", async () => {
    const pool = "+61400000777";
    const res = await t.app.inject({
      method: "POST",
      url: "/admin/v1/Numbers",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { Number: pool },
    });
    expect(res.statusCode).toBe(200);
    const e = await bound(t.app, "transceiver");
    e.send(`submit l1 ton=0 src= dst=${TO} sm=${gsmHex("reply to me")}`);
    expect((await e.next("submit_resp", (x) => x.f.tag === "l1")).f.status).toBe("0");
    await drainDeliveries(t);
    await simulatorInbound(t.app, `+${TO}`, pool, "Yes please 👍");
    const d = await e.next("deliver", (x) => x.f.esm === "0");
    expect(d.f).toMatchObject({ src: TO, ston: "1", dst: pool.slice(1), dc: "8", rmi: "", state: "" });
    const le = Buffer.from(d.f.sm!, "hex");
    le.swap16();
    expect(le.toString("utf16le")).toBe("Yes please 👍");
    await expect.poll(outboxRows).toBe(0);
    e.send("unbind");
    await e.next("unbind_resp");
  });

  describe("to the account's owned number", () => {
    // An account whose SMPP credentials name its second property: what they receive is stored there,
    // not in its first (oldest) one.
    let b: Tenant;
    let smppProperty: string;
    const handset = "+61412345679";

    beforeAll(async () => {
      b = await createTenant(t.app);
      smppProperty = (await admin(t.app, `/admin/v1/Accounts/${b.accountSid}/Properties`, { Name: "SMPP", SmsEnabled: true })).PropertySid;
      await setSmppCredentials(t.app, b.accountSid, { SystemId: "bravo", Password: "pw1234", PropertySid: smppProperty, DeliverReplies: true });
    });

    /** The Received message as GET /v2/Messages/{MessageSid} answers it. */
    const receivedRecordOf = (sid: string, from: string, text: string, encoding: string, at: number) =>
      receivedRecord({ sid, accountSid: b.accountSid, propertySid: smppProperty, from, to: b.ownedNumber, text, encoding, at });

    it("arrives as an ordinary deliver_sm and is a Received message of the credentials' property, not unmatched", async () => {
      const e = await bound(t.app, "transceiver", "bravo");
      const at = secondsOf(t.clock.now());
      const text = "Is the table for two still free at 8?";
      const inbound = await simulatorInbound(t.app, handset, b.ownedNumber, text);
      expect(inbound).toStrictEqual({ MessageSid: expect.stringMatching(/^MG[0-9A-Z]{30}$/), InReplyTo: "" });
      const d = await e.next("deliver", (x) => x.f.esm === "0");
      expect(d.f).toStrictEqual({
        seq: d.f.seq,
        esm: "0",
        dc: "0",
        src: handset.slice(1),
        ston: "1",
        dst: b.ownedNumber.slice(1),
        sm: d.f.sm,
        rmi: "",
        state: "",
      });
      expect(Buffer.from(d.f.sm!, "hex").toString("latin1")).toBe(text);
      await expect.poll(outboxRows).toBe(0);

      expect(await restGet(b, `/v2/Messages/${inbound.MessageSid}`)).toStrictEqual(receivedRecordOf(inbound.MessageSid, handset, text, "GSM7", at));
      expect((await restGet(b, `/v2/Properties/${smppProperty}/Messages?Direction=Receive`)).Messages.map((m: any) => m.MessageSid)).toStrictEqual([
        inbound.MessageSid,
      ]);
      expect(await restGet(b, `/v2/Properties/${b.propertySid}/Messages`)).toStrictEqual({ Messages: [], TotalCount: 0 });
      const stored = await query("select lease_sid, in_reply_to from messages where sid = ?", [inbound.MessageSid]);
      expect(stored).toStrictEqual([{ lease_sid: null, in_reply_to: null }]);
      expect(await query("select sender from unmatched_inbound where recipient = ?", [b.ownedNumber])).toStrictEqual([]);
      e.send("unbind");
      await e.next("unbind_resp");
    });

    it("with no bind open it waits in smpp_outbox and arrives when a receiver binds", async () => {
      const text = "Still open? ☕";
      const inbound = await simulatorInbound(t.app, handset, b.ownedNumber, text);
      const waiting = () => query("select account_sid, message_sid, kind from smpp_outbox", []);
      expect(await waiting()).toStrictEqual([{ account_sid: b.accountSid, message_sid: inbound.MessageSid, kind: "Reply" }]);
      // The forwarder looks every second: no bind, so it stays.
      await new Promise((r) => setTimeout(r, 1500));
      expect(await waiting()).toHaveLength(1);
      const rx = await bound(t.app, "receiver", "bravo");
      const d = await rx.next("deliver", (x) => x.f.esm === "0");
      expect(d.f).toMatchObject({ esm: "0", dc: "8", src: handset.slice(1), ston: "1", dst: b.ownedNumber.slice(1), rmi: "", state: "" });
      const be = Buffer.from(d.f.sm!, "hex");
      be.swap16();
      expect(be.toString("utf16le")).toBe(text);
      await expect.poll(outboxRows).toBe(0);
      rx.send("unbind");
      await rx.next("unbind_resp");
    });

    it("a STOP opts the handset out and is answered from the credentials' property in reply to the stored STOP", async () => {
      const stopper = "+61412345680";
      const e = await bound(t.app, "transceiver", "bravo");
      const at = secondsOf(t.clock.now());
      const inbound = await simulatorInbound(t.app, stopper, b.ownedNumber, "STOP");
      expect(inbound.InReplyTo).toBe("");
      const d = await e.next("deliver", (x) => x.f.esm === "0");
      expect(d.f).toMatchObject({ src: stopper.slice(1), dst: b.ownedNumber.slice(1), dc: "0" });
      expect(Buffer.from(d.f.sm!, "hex").toString("latin1")).toBe("STOP");
      await expect.poll(outboxRows).toBe(0);
      expect(await restGet(b, `/v2/Messages/${inbound.MessageSid}`)).toStrictEqual(receivedRecordOf(inbound.MessageSid, stopper, "STOP", "GSM7", at));
      expect(await restGet(b, `/v2/Accounts/${b.accountSid}/OptOuts`)).toStrictEqual({
        OptOuts: [{ Number: stopper, Source: "Keyword", Created: at }],
        TotalCount: 1,
      });
      await drainDeliveries(t);
      const answers = await query<{ sid: string }>(
        "select sid, account_sid, property_sid, direction, status, sender, recipient, text, in_reply_to from messages where in_reply_to = ?",
        [inbound.MessageSid],
      );
      expect(answers).toStrictEqual([
        {
          sid: expect.stringMatching(/^MG[0-9A-Z]{30}$/),
          account_sid: b.accountSid,
          property_sid: smppProperty,
          direction: "Transmit",
          status: "Delivered",
          sender: b.ownedNumber,
          recipient: stopper,
          text: "You have been unsubscribed from Tenant and will get no more messages from it. Reply START to subscribe again.",
          in_reply_to: inbound.MessageSid,
        },
      ]);
      expect(await restGet(b, `/v2/Messages/${answers[0]!.sid}`)).toMatchObject({ PropertySid: smppProperty, Direction: "Transmit", To: stopper });
      expect(await query("select sender from unmatched_inbound where recipient = ?", [b.ownedNumber])).toStrictEqual([]);
      e.send("unbind");
      await e.next("unbind_resp");
    });

    it("an account without DeliverReplies: kept in unmatched_inbound as before, no message and no outbox row", async () => {
      const c = await createTenant(t.app);
      await setSmppCredentials(t.app, c.accountSid, { SystemId: "charlie", Password: "pw1234", PropertySid: c.propertySid, DeliverReplies: false });
      const inbound = await simulatorInbound(t.app, handset, c.ownedNumber, "Hello there");
      expect(inbound).toStrictEqual({ MessageSid: "", InReplyTo: "" });
      expect(await query("select sender, recipient, text, reason from unmatched_inbound where recipient = ?", [c.ownedNumber])).toStrictEqual([
        { sender: handset, recipient: c.ownedNumber, text: "Hello there", reason: "NoLease" },
      ]);
      expect(await query("select sid from messages where account_sid = ?", [c.accountSid])).toStrictEqual([]);
      expect(await query("select id from smpp_outbox where account_sid = ?", [c.accountSid])).toStrictEqual([]);
    });
  });
});
