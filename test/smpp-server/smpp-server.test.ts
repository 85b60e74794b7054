/**
 * The SMPP server end to end (issue 44, docs/smpp-server.md) with a client we did not write: Perl's
 * Net::SMPP as the customer (test/smpp-server/esme.pl). Every submit_sm is a message stored by
 * the one send pipeline, read back through the REST API.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { gsmHex, setSmppCredentials, startEsme, type TestEsme, ucs2Hex } from "./esme.js";

let t: TestApp;
let port: number;
let a: Tenant;
const esmes: TestEsme[] = [];
const TO = "61412345678";

async function esme(): Promise<TestEsme> {
  const e = await startEsme(port);
  esmes.push(e);
  return e;
}

async function bound(mode = "transceiver", systemId = "acme"): Promise<TestEsme> {
  const e = await esme();
  e.send(`bind ${mode} ${systemId} pw1234`);
  expect((await e.next("bind_resp")).f).toStrictEqual({ status: "0", system_id: "Switchboard" });
  return e;
}

async function message(sid: string): Promise<Record<string, unknown>> {
  const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: a.auth } });
  expect(res.statusCode).toBe(200);
  return res.json();
}

beforeAll(async () => {
  t = await createTestApp({ engine: true, config: { smppServer: { port: 0 }, host: "127.0.0.1" } });
  port = (await t.app.smppServer!.listen()).port!;
  a = await createTenant(t.app);
  await setSmppCredentials(t.app, a.accountSid, { SystemId: "acme", Password: "pw1234", PropertySid: a.propertySid, MaxBinds: 100 });
});

afterAll(async () => {
  for (const e of esmes) await e.stop();
  await t.close();
});

describe("binds", () => {
  it("a wrong password is ESME_RINVPASWD, an unknown system_id the same; the connection stays for another try", async () => {
    const e = await esme();
    e.send("bind transceiver acme wrong");
    expect((await e.next("bind_resp")).f.status).toBe(String(0x0e));
    e.send("bind transceiver nobody pw1234");
    expect((await e.next("bind_resp")).f.status).toBe(String(0x0e));
    e.send("bind transceiver acme pw1234");
    expect((await e.next("bind_resp")).f.status).toBe("0");
    e.send("unbind");
    expect((await e.next("unbind_resp")).f.status).toBe("0");
  });

  it("a submit_sm before any bind is ESME_RINVBNDSTS; enquire_link is answered in any state; an unknown command gets generic_nack", async () => {
    const e = await esme();
    e.send(`submit early dst=${TO} sm=${gsmHex("hi")}`);
    expect((await e.next("submit_resp")).f.status).toBe(String(0x04));
    e.send("enquire");
    expect((await e.next("enquire_resp")).f.status).toBe("0");
    // command_id 0x00000099, sequence 7: ESME_RINVCMDID, and the connection goes on.
    e.send("raw 000000100000009900000000" + "00000007");
    expect((await e.next("generic_nack")).f).toStrictEqual({ status: String(0x03), seq: "7" });
    e.send("enquire");
    expect((await e.next("enquire_resp")).f.status).toBe("0");
  });

  it("beyond MaxBinds (3) a bind is ESME_RBINDFAIL, and ListSmppBinds shows the open ones", async () => {
    const c = await createTenant(t.app);
    await setSmppCredentials(t.app, c.accountSid, { SystemId: "three", Password: "pw1234", PropertySid: c.propertySid, MaxBinds: 3 });
    const open = [await bound("transceiver", "three"), await bound("transmitter", "three"), await bound("receiver", "three")];
    const extra = await esme();
    extra.send("bind transceiver three pw1234");
    expect((await extra.next("bind_resp")).f.status).toBe(String(0x0d));
    const list = await t.app.inject({
      method: "GET",
      url: `/admin/v1/SmppBinds?AccountSid=${c.accountSid}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(
      list
        .json()
        .Binds.map((b: { Mode: string }) => b.Mode)
        .sort(),
    ).toStrictEqual(["Receiver", "Transceiver", "Transmitter"]);
    for (const e of open) {
      e.send("unbind");
      await e.next("unbind_resp");
    }
  });
});

describe("submit_sm through the send pipeline", () => {
  it("GSM 7: the message is stored with its text, From the account's number, To the E.164 destination", async () => {
    const e = await bound();
    e.send(`submit g1 src=${a.ownedNumber.slice(1)} dst=${TO} sm=${gsmHex("Hello from SMPP")}`);
    const resp = await e.next("submit_resp", (x) => x.f.tag === "g1");
    expect(resp.f.status).toBe("0");
    expect(resp.f.id).toMatch(/^MG[0-9A-Z]{30}$/);
    const m = await message(resp.f.id!);
    expect(m).toMatchObject({ MessageSid: resp.f.id, From: a.ownedNumber, To: `+${TO}`, Text: "Hello from SMPP", Encoding: "GSM7", NumSegments: 1 });
  });

  it("UCS-2 with an emoji (a surrogate pair), and Latin-1", async () => {
    const e = await bound();
    e.send(`submit u1 src=${a.ownedNumber.slice(1)} dst=${TO} dc=8 sm=${ucs2Hex("Grüße 😀")}`);
    const u = await e.next("submit_resp", (x) => x.f.tag === "u1");
    expect(u.f.status).toBe("0");
    expect(await message(u.f.id!)).toMatchObject({ Text: "Grüße 😀", Encoding: "UCS2" });
    e.send(`submit l1 src=${a.ownedNumber.slice(1)} dst=${TO} dc=3 sm=${Buffer.from("café", "latin1").toString("hex")}`);
    const l = await e.next("submit_resp", (x) => x.f.tag === "l1");
    expect(await message(l.f.id!)).toMatchObject({ Text: "café" });
  });

  it("a 400-character text as message_payload, and as UDH parts joined into one message (each part answered with its MessageSid)", async () => {
    const e = await bound();
    const text = "0123456789".repeat(40);
    e.send(`submit p1 src=${a.ownedNumber.slice(1)} dst=${TO} payload=${gsmHex(text)}`);
    const p = await e.next("submit_resp", (x) => x.f.tag === "p1");
    expect(p.f.status).toBe("0");
    expect(await message(p.f.id!)).toMatchObject({ Text: text, NumSegments: 3 });
    const parts = [text.slice(0, 153), text.slice(153, 306), text.slice(306)];
    parts.forEach((part, i) => {
      const udh = `050003a703${(i + 1).toString(16).padStart(2, "0")}`;
      e.send(`submit u${i} esm=64 src=${a.ownedNumber.slice(1)} dst=${TO} sm=${udh}${gsmHex(part)}`);
    });
    const answers = await Promise.all(parts.map((_, i) => e.next("submit_resp", (x) => x.f.tag === `u${i}`)));
    expect(answers.map((x) => x.f.status)).toStrictEqual(["0", "0", "0"]);
    expect(new Set(answers.map((x) => x.f.id)).size).toBe(1);
    expect(await message(answers[0]!.f.id!)).toMatchObject({ Text: text, NumSegments: 3 });
    // The same with sar_* TLVs, and the parts out of order.
    e.send(`submit s2 src=${a.ownedNumber.slice(1)} dst=${TO} sm=${gsmHex(parts[1]!)} sar=77,3,2`);
    e.send(`submit s3 src=${a.ownedNumber.slice(1)} dst=${TO} sm=${gsmHex(parts[2]!)} sar=77,3,3`);
    e.send(`submit s1 src=${a.ownedNumber.slice(1)} dst=${TO} sm=${gsmHex(parts[0]!)} sar=77,3,1`);
    const sar = await Promise.all(["s1", "s2", "s3"].map((tag) => e.next("submit_resp", (x) => x.f.tag === tag)));
    expect(new Set(sar.map((x) => x.f.id)).size).toBe(1);
    expect(await message(sar[0]!.f.id!)).toMatchObject({ Text: text });
  });

  it("an alphanumeric sender (TON 5) and an empty source_addr (a leased sender, as REST without From)", async () => {
    await admin(t.app, "/admin/v1/Numbers", { Number: "+61400000999" });
    const e = await bound();
    e.send(`submit a1 ton=5 src=ACME dst=447911123456 sm=${gsmHex("alpha")}`);
    const alpha = await e.next("submit_resp", (x) => x.f.tag === "a1");
    expect(alpha.f.status).toBe("0");
    expect(await message(alpha.f.id!)).toMatchObject({ From: "ACME", To: "+447911123456" });
    // To Australia an alphanumeric sender must be registered (SENDER_ID_REGISTRATION): SenderIdNotRegistered, ESME_RINVSRCADR.
    e.send(`submit a0 ton=5 src=ACME dst=${TO} sm=${gsmHex("alpha")}`);
    expect((await e.next("submit_resp", (x) => x.f.tag === "a0")).f.status).toBe(String(0x0a));
    e.send(`submit a2 ton=0 src= dst=${TO} sm=${gsmHex("leased")}`);
    const leased = await e.next("submit_resp", (x) => x.f.tag === "a2");
    expect(leased.f.status).toBe("0");
    expect(await message(leased.f.id!)).toMatchObject({ From: "+61400000999" });
  });

  it("refusals carry their SMPP status: a bad destination ESME_RINVDSTADR, a sender not the account's ESME_RINVSRCADR, a bad data_coding ESME_RINVDCS", async () => {
    const e = await bound();
    e.send(`submit b1 src=${a.ownedNumber.slice(1)} dst=12 sm=${gsmHex("x")}`);
    expect((await e.next("submit_resp", (x) => x.f.tag === "b1")).f).toMatchObject({ status: String(0x0b), id: "" });
    e.send(`submit b2 src=61499999999 dst=${TO} sm=${gsmHex("x")}`);
    expect((await e.next("submit_resp", (x) => x.f.tag === "b2")).f.status).toBe(String(0x0a));
    e.send(`submit b3 src=${a.ownedNumber.slice(1)} dst=${TO} dc=4 sm=00`);
    expect((await e.next("submit_resp", (x) => x.f.tag === "b3")).f.status).toBe(String(0x104));
    e.send(`submit b4 src=${a.ownedNumber.slice(1)} dst=${TO} sched=garbage sm=${gsmHex("x")}`);
    expect((await e.next("submit_resp", (x) => x.f.tag === "b4")).f.status).toBe(String(0x61));
  });

  it("a receiver bind may not submit (ESME_RINVBNDSTS)", async () => {
    const e = await bound("receiver");
    e.send(`submit r1 src=${a.ownedNumber.slice(1)} dst=${TO} sm=${gsmHex("x")}`);
    expect((await e.next("submit_resp", (x) => x.f.tag === "r1")).f.status).toBe(String(0x04));
  });
});

describe("query_sm and cancel_sm", () => {
  it("a message scheduled with a relative time is Scheduled (ENROUTE), cancel_sm cancels it (DELETED); a second cancel is ESME_RCANCELFAIL", async () => {
    const e = await bound();
    // One hour from now, relative.
    e.send(`submit c1 src=${a.ownedNumber.slice(1)} dst=${TO} sched=000000010000000R sm=${gsmHex("later")}`);
    const sent = await e.next("submit_resp", (x) => x.f.tag === "c1");
    expect(sent.f.status).toBe("0");
    const m = await message(sent.f.id!);
    expect(m).toMatchObject({ Status: "Scheduled", Schedule: Math.floor(t.clock.now().getTime() / 1000) + 3600 });
    e.send(`query q1 ${sent.f.id}`);
    expect((await e.next("query_resp", (x) => x.f.tag === "q1")).f).toStrictEqual({ tag: "q1", status: "0", id: sent.f.id, state: "1", final: "" });
    e.send(`cancel k1 ${sent.f.id}`);
    expect((await e.next("cancel_resp", (x) => x.f.tag === "k1")).f.status).toBe("0");
    expect(await message(sent.f.id!)).toMatchObject({ Status: "Canceled" });
    e.send(`query q2 ${sent.f.id}`);
    expect((await e.next("query_resp", (x) => x.f.tag === "q2")).f.state).toBe("4");
    e.send(`cancel k2 ${sent.f.id}`);
    expect((await e.next("cancel_resp", (x) => x.f.tag === "k2")).f.status).toBe(String(0x11));
  });

  it("another account's message, or no message, is ESME_RINVMSGID", async () => {
    const b = await createTenant(t.app);
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${b.propertySid}/Messages`,
      headers: { authorization: b.auth },
      payload: { From: b.ownedNumber, To: `+${TO}`, Text: "theirs" },
    });
    const theirs = res.json().MessageSid as string;
    const e = await bound();
    e.send(`query q3 ${theirs}`);
    expect((await e.next("query_resp", (x) => x.f.tag === "q3")).f.status).toBe(String(0x0c));
    e.send(`cancel k3 ${theirs}`);
    expect((await e.next("cancel_resp", (x) => x.f.tag === "k3")).f.status).toBe(String(0x0c));
    e.send("query q4 nonsense");
    expect((await e.next("query_resp", (x) => x.f.tag === "q4")).f.status).toBe(String(0x0c));
  });
});

describe("metrics", () => {
  it("/metrics shows the account's open binds by mode and its submit_sm answered, accepted and refused", async () => {
    const e = await bound();
    e.send(`submit m1 src=${a.ownedNumber.slice(1)} dst=${TO} sm=${gsmHex("counted")}`);
    expect((await e.next("submit_resp", (x) => x.f.tag === "m1")).f.status).toBe("0");
    const res = await t.app.inject({ method: "GET", url: "/metrics" });
    expect(res.statusCode).toBe(200);
    const line = (name: string, labels: string) => res.body.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
    expect(line("switchboard_smpp_binds", `account="${a.accountSid}",mode="Transceiver"`)).toMatch(/ [1-9]\d*$/);
    expect(line("switchboard_smpp_submits", `account="${a.accountSid}",outcome="accepted"`)).toMatch(/ [1-9]\d*$/);
    expect(line("switchboard_smpp_submits", `account="${a.accountSid}",outcome="refused"`)).toMatch(/ \d+$/);
  });
});
