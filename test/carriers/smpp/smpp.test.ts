/**
 * The SMPP carrier end to end against an SMSC not built on the library it uses: Perl's Net::SMPP
 * (test/carriers/smpp/smsc.pl), over TCP and through stunnel4 for smpps://. The delivery engine runs its
 * loops on the real clock; webhooks go to a real HTTP receiver.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../../src/common/clock.js";
import { createSmppCarrier, type SmppCarrier } from "../../../src/carriers/smpp/smpp-carrier.js";
import { ADMIN_TOKEN, type Tenant } from "../../support/harness.js";
import { createTestOrm, type TestOrm } from "../../support/db.js";
import { freePort } from "../../support/kannel.js";
import { selfSignedCert } from "../../support/tls.js";
import { acceptedSubmits, type SmscEvent, startSmsc, type TestSmsc } from "./smsc.js";
import { gsmHex, SMPP_DEFAULTS, type SmppWorld, startSmppWorld, waitFor } from "./world.js";

describe("CARRIER=smpp against Net::SMPP", { timeout: 90_000 }, () => {
  let smsc: TestSmsc;
  let db: TestOrm;
  let world: SmppWorld;
  let carrier: SmppCarrier;
  let app: FastifyInstance;
  let tenant: Tenant;
  let pool: string[];
  let hookBase: string;
  let hooks: SmppWorld["hooks"];

  beforeAll(async () => {
    smsc = await startSmsc();
    db = await createTestOrm();
    world = await startSmppWorld(db.orm, smsc, { moReassemblyMs: 1500, housekeepingMs: 300, submitDeadlineMs: 20_000 });
    ({ carrier, app, tenant, pool, hookBase, hooks } = world);
  }, 180_000);

  afterAll(async () => {
    await world?.close();
    await smsc?.stop();
    await db?.close();
  });

  const send = (payload: Record<string, unknown>) => world.send(payload);
  const record = (sid: string) => world.record(sid);

  const recordIn = (sid: string, status: string) => waitFor(`${sid} ${status}`, async () => ((await record(sid)).Status === status ? record(sid) : undefined));

  function submitsTo(to: string): SmscEvent[] {
    return acceptedSubmits(smsc.events).filter((e) => e.f.destination_addr === to.slice(1));
  }

  it("binds as a transceiver with the system_type; the operator API and the metrics show the link Bound", async () => {
    await smsc.waitFor("a bind", (ev) => ev.some((e) => e.kind === "bind" && e.f.ok === "1"));
    expect(smsc.events.find((e) => e.kind === "bind")!.f).toMatchObject({ system_id: "switchboard", system_type: "sbtest", ok: "1" });
    await waitFor("Bound", () => carrier.status().link === "Bound");
    const res = await app.inject({ method: "GET", url: "/admin/v1/Carrier", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ Carrier: "smpp", Link: "Bound", Window: 10, Tps: 50 });
    const metrics = await app.inject({ method: "GET", url: "/metrics" });
    expect(metrics.body).toContain('switchboard_carrier_link{carrier="smpp",state="Bound"} 1');
    expect(metrics.body).toContain('switchboard_carrier_link{carrier="smpp",state="Down"} 0');
  });

  it("submits GSM-7 from an E164 sender (TON/NPI 1/1, data_coding 0, registered_delivery 1); a TLV receipt makes it Delivered", async () => {
    const to = "+447700900101";
    const sid = await send({ From: tenant.ownedNumber, To: to, Text: "Hello from SMPP 1" });
    await smsc.waitFor("the submit", () => submitsTo(to).length === 1);
    const s = submitsTo(to)[0]!.f;
    expect(s).toMatchObject({
      source_addr_ton: "1",
      source_addr_npi: "1",
      source_addr: tenant.ownedNumber.slice(1),
      dest_addr_ton: "1",
      dest_addr_npi: "1",
      esm_class: "0",
      data_coding: "0",
      registered_delivery: "1",
      sm: gsmHex("Hello from SMPP 1"),
    });
    await recordIn(sid, "Submitted");
    smsc.send(`deliver esm_class=4 source_addr=${to.slice(1)} destination_addr=${tenant.ownedNumber.slice(1)} tlv_rmi=${s.id} tlv_state=2`);
    const rec = await recordIn(sid, "Delivered");
    expect(rec).toMatchObject({ ErrorCode: "", CarrierError: "" });
  });

  it("submits UCS-2 from an alphanumeric sender (5/0, data_coding 8); a receipt without TLVs (text only) makes it Failed/CarrierFailed", async () => {
    const to = "+447700900102";
    const text = "Привет ☃ 2";
    const sid = await send({ From: "Shop", To: to, Text: text });
    await smsc.waitFor("the submit", () => submitsTo(to).length === 1);
    const s = submitsTo(to)[0]!.f;
    expect(s).toMatchObject({
      source_addr_ton: "5",
      source_addr_npi: "0",
      source_addr: "Shop",
      data_coding: "8",
      esm_class: "0",
      sm: Buffer.from(text, "utf16le").swap16().toString("hex"),
    });
    await recordIn(sid, "Submitted");
    const receipt = `id:${s.id} sub:001 dlvrd:000 submit date:2611241200 done date:2611241201 stat:UNDELIV err:034 text:`;
    smsc.send(`deliver esm_class=4 source_addr=${to.slice(1)} destination_addr=Shop sm=${Buffer.from(receipt).toString("hex")}`);
    const rec = await recordIn(sid, "Failed");
    expect(rec).toMatchObject({ ErrorCode: "CarrierFailed", CarrierError: "stat:UNDELIV err:034" });
  });

  it("splits a three-segment text with a concatenation UDH (esm_class 0x40); Delivered only when every segment's receipt is in, one in decimal after hex ids", async () => {
    const to = "+447700900103";
    const text = `${"abcdefghij".repeat(31)}TAIL-3`; // 316 GSM-7 characters: 153 + 153 + 10
    const sid = await send({ From: tenant.ownedNumber, To: to, Text: text });
    expect((await record(sid)).NumSegments).toBe(3);
    await smsc.waitFor("three submits", () => submitsTo(to).length === 3);
    const parts = submitsTo(to).map((e) => Buffer.from(e.f.sm!, "hex"));
    const udhs = parts.map((p) => p.subarray(0, 6).toString("hex")).sort();
    const ref = udhs[0]!.slice(6, 8);
    expect(udhs).toEqual([`050003${ref}0301`, `050003${ref}0302`, `050003${ref}0303`]);
    for (const e of submitsTo(to)) expect(e.f).toMatchObject({ esm_class: "64", data_coding: "0", registered_delivery: "1" });
    const ordered = parts.sort((a, b) => a[5]! - b[5]!);
    expect(ordered.map((p) => p.subarray(6).toString("latin1")).join("")).toBe(text);
    await recordIn(sid, "Submitted");
    const ids = submitsTo(to).map((e) => e.f.id!);
    expect(ids.every((id) => /^[0-9A-F]+$/.test(id))).toBe(true);
    const dr = (id: string) =>
      `deliver esm_class=4 source_addr=${to.slice(1)} destination_addr=x sm=${Buffer.from(`id:${id} sub:001 dlvrd:001 submit date:2611241200 done date:2611241201 stat:DELIVRD err:000 text:`).toString("hex")}`;
    smsc.send(dr(ids[0]!));
    // The second receipt names its id in decimal, as many SMSCs do after a hex submit_sm_resp.
    smsc.send(dr(BigInt(`0x${ids[1]}`).toString()));
    await smsc.waitFor("two answered receipts", (ev) => ev.filter((e) => e.kind === "deliver_resp" && e.f.status === "0").length >= 2);
    await new Promise((r) => setTimeout(r, 300));
    expect((await record(sid)).Status).toBe("Submitted");
    smsc.send(dr(`00${ids[2]}`)); // leading zeros
    await recordIn(sid, "Delivered");
  });

  it("reads a text in the receipt format sent without the receipt esm_class as a receipt, not an MO", async () => {
    const to = "+447700900110";
    const sid = await send({ From: tenant.ownedNumber, To: to, Text: "Plain receipt 10" });
    await smsc.waitFor("the submit", () => submitsTo(to).length === 1);
    await recordIn(sid, "Submitted");
    const receipt = `id:${submitsTo(to)[0]!.f.id} sub:001 dlvrd:001 submit date:2611241200 done date:2611241201 stat:DELIVRD err:000 text:`;
    smsc.send(`deliver esm_class=0 source_addr=${to.slice(1)} destination_addr=${tenant.ownedNumber.slice(1)} sm=${Buffer.from(receipt).toString("hex")}`);
    await recordIn(sid, "Delivered");
  });

  it("fails a two-segment message as soon as one segment's receipt is a failure", async () => {
    const to = "+447700900109";
    const sid = await send({ From: tenant.ownedNumber, To: to, Text: `${"x".repeat(160)}Y` });
    await smsc.waitFor("two submits", () => submitsTo(to).length === 2);
    await recordIn(sid, "Submitted");
    const second = submitsTo(to).find((e) => e.f.sm!.slice(10, 12) === "02")!;
    smsc.send(`deliver esm_class=4 source_addr=${to.slice(1)} destination_addr=x tlv_rmi=${second.f.id} tlv_state=5`);
    const rec = await recordIn(sid, "Failed");
    expect(rec).toMatchObject({ ErrorCode: "CarrierFailed", CarrierError: "stat:UNDELIV" });
  });

  it("keeps a receipt that arrives before the submission is recorded and applies it when it lands", async () => {
    const to = "+447700900104";
    smsc.send("early 1");
    const sid = await send({ From: tenant.ownedNumber, To: to, Text: "Early receipt 4" });
    await smsc.waitFor("the early receipt answered", () =>
      smsc.events.some((e) => e.kind === "submit" && e.f.destination_addr === to.slice(1) && e.f.answer === "after-receipt"),
    );
    await recordIn(sid, "Delivered");
  });

  it("marks a message the SMSC refuses Failed with CarrierRejected and the SMSC's status as CarrierError", async () => {
    const to = "+447700900105";
    smsc.send("reject 1 11");
    const sid = await send({ From: tenant.ownedNumber, To: to, Text: "Rejected 5" });
    const rec = await recordIn(sid, "Failed");
    expect(rec).toMatchObject({ ErrorCode: "CarrierRejected", CarrierError: "0x0000000B ESME_RINVDSTADR" });
  });

  it("slows down and retries when the SMSC answers ESME_RTHROTTLED", async () => {
    const to = "+447700900106";
    smsc.send("throttle 3");
    const sid = await send({ From: tenant.ownedNumber, To: to, Text: "Throttled 6" });
    await recordIn(sid, "Submitted");
    const tries = smsc.events.filter((e) => e.kind === "submit" && e.f.destination_addr === to.slice(1));
    expect(tries.map((e) => e.f.answer)).toEqual(["throttled", "throttled", "throttled", "ok"]);
  });

  it("delivers an MO reply (international TON, no +) to the lease's webhook, and reassembles a concatenated MO", async () => {
    const recipient = "+447700900107";
    const sid = await send({ From: "", To: recipient, Text: "Reply to me 7", WebhookUri: `${hookBase}/responses` });
    const out = await record(sid);
    expect(pool).toContain(out.From);
    await recordIn(sid, "Submitted");
    smsc.send(`deliver esm_class=0 source_addr_ton=1 source_addr=${recipient.slice(1)} destination_addr=${out.From.slice(1)} sm=${gsmHex("Yes please")}`);
    const hook = await waitFor("the Response webhook", () => hooks.find((h) => h.path === "/responses" && h.body.Text === "Yes please"));
    expect(hook.body).toMatchObject({ Type: "Response", InReplyTo: sid, From: recipient, To: out.From });

    const udh = (n: number) => `05000377020${n}`;
    smsc.send(
      `deliver esm_class=64 source_addr_ton=1 source_addr=${recipient.slice(1)} destination_addr=${out.From.slice(1)} sm=${udh(2)}${gsmHex(" second half")}`,
    );
    smsc.send(
      `deliver esm_class=64 source_addr_ton=1 source_addr=${recipient.slice(1)} destination_addr=${out.From.slice(1)} sm=${udh(1)}${gsmHex("First half,")}`,
    );
    await waitFor("the reassembled reply", () => hooks.find((h) => h.body.Text === "First half, second half"));

    // Only part 1 of 2: after SMPP_MO_REASSEMBLY_SECONDS (1.5 s here) what arrived is delivered.
    smsc.send(
      `deliver esm_class=64 source_addr_ton=1 source_addr=${recipient.slice(1)} destination_addr=${out.From.slice(1)} sm=050003780201${gsmHex("Lonely part")}`,
    );
    await waitFor("the incomplete reply after the reassembly time", () => hooks.find((h) => h.body.Text === "Lonely part"), 15_000);
  });

  // docs/api.md#opt-out-stop-start-help: keywords come through SMPP as through any carrier.
  it("a STOP as an MO opts the handset out and is answered once by a submit_sm from the pool number; a near miss is only a reply", async () => {
    const recipient = "+447700900118";
    const sid = await send({ From: "", To: recipient, Text: "Reply to me 18", WebhookUri: `${hookBase}/keywords` });
    const out = await record(sid);
    await recordIn(sid, "Submitted");
    const mo = (text: string) =>
      smsc.send(`deliver esm_class=0 source_addr_ton=1 source_addr=${recipient.slice(1)} destination_addr=${out.From.slice(1)} sm=${gsmHex(text)}`);
    const optOuts = async () =>
      (await app.inject({ method: "GET", url: `/v2/Accounts/${tenant.accountSid}/OptOuts`, headers: { authorization: tenant.auth } })).json().OptOuts;
    const answers = () => submitsTo(recipient).filter((e) => e.f.source_addr === out.From.slice(1));

    mo("STOP please");
    await waitFor("the near miss's Response webhook", () => hooks.find((h) => h.path === "/keywords" && h.body.Text === "STOP please"));
    expect(await optOuts()).toEqual([]);

    mo(" Unsubscribe ");
    const hook = await waitFor("the STOP's Response webhook", () => hooks.find((h) => h.path === "/keywords" && h.body.OptOutType === "Stop"));
    expect(hook.body).toMatchObject({ Type: "Response", Text: " Unsubscribe ", From: recipient, To: out.From });
    expect(await optOuts()).toEqual([{ Number: recipient, Source: "Keyword", Created: expect.any(Number) }]);
    // The original message and the answer: one submit_sm each.
    await waitFor("the answer's submit_sm", () => answers().length === 2);
    await new Promise((r) => setTimeout(r, 300));
    expect(answers()).toHaveLength(2);
  });

  it("resubmits once, on the next bind, a submit_sm whose response never came because the link was lost", async () => {
    const to = "+447700900108";
    smsc.send("silent 1");
    const sid = await send({ From: tenant.ownedNumber, To: to, Text: "Unanswered 8" });
    await smsc.waitFor(
      "the unanswered submit",
      () => submitsTo(to).length === 0 && smsc.events.some((e) => e.kind === "submit" && e.f.destination_addr === to.slice(1) && e.f.answer === "none"),
    );
    smsc.send("drop");
    const rec = await recordIn(sid, "Submitted");
    const tries = smsc.events.filter((e) => e.kind === "submit" && e.f.destination_addr === to.slice(1));
    expect(tries.map((e) => e.f.answer)).toEqual(["none", "ok"]);
    expect(tries[0]!.f.sm).toBe(tries[1]!.f.sm);
    expect(rec.Status).toBe("Submitted");
  });

  it("submits every accepted message when the SMSC is killed and restarted mid-run; /readyz stays 200 while the link is down", async () => {
    const before = acceptedSubmits(smsc.events).length;
    const tos = Array.from({ length: 100 }, (_, i) => `+4477009002${String(i).padStart(2, "0")}`);
    const sids: string[] = [];
    for (const to of tos) sids.push(await send({ From: tenant.ownedNumber, To: to, Text: `Restart ${to}` }));
    await smsc.waitFor("some submits", () => acceptedSubmits(smsc.events).length >= before + 5);
    await smsc.kill();
    await waitFor("the link down", () => carrier.status().link !== "Bound");
    // /readyz is "database reachable": an SMSC outage must not take API instances out of a balancer.
    const ready = await app.inject({ method: "GET", url: "/readyz" });
    expect(ready.statusCode, ready.body).toBe(200);
    const op = await app.inject({ method: "GET", url: "/admin/v1/Carrier", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(op.json().Link).not.toBe("Bound");
    expect((await app.inject({ method: "GET", url: "/metrics" })).body).toContain('switchboard_carrier_link{carrier="smpp",state="Bound"} 0');
    await new Promise((r) => setTimeout(r, 500));
    const killedAt = smsc.events.length;
    await smsc.restart();
    await waitFor("the link bound again", () => carrier.status().link === "Bound").catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(carrier.status())} ${JSON.stringify(smsc.events.slice(killedAt))}`);
    });
    for (const sid of sids) await recordIn(sid, "Submitted");
    const seen = new Set(acceptedSubmits(smsc.events).map((e) => `+${e.f.destination_addr}`));
    for (const to of tos) expect(seen.has(to), to).toBe(true);
    expect(carrier.status().link).toBe("Bound");
  }, 90_000);
});

describe("SMPP binds: bad credentials and smpps:// through stunnel4", { timeout: 60_000 }, () => {
  it("logs each refused bind with the SMSC's status and never the password", async () => {
    const smsc = await startSmsc({ password: "right-one" });
    const lines: string[] = [];
    const log = pino({ level: "info" }, { write: (l: string) => lines.push(l) });
    const carrier = createSmppCarrier({
      ...SMPP_DEFAULTS,
      password: "wrong-pass-xyz",
      host: "127.0.0.1",
      port: smsc.port,
      tls: false,
      clock: systemClock,
      log,
      reconnectMinMs: 100,
      reconnectMaxMs: 200,
    });
    await carrier.start({ deliveryReport: async () => undefined, inbound: async () => ({ messageSid: "", inReplyTo: "" }) });
    try {
      await smsc.waitFor("two refused binds", (ev) => ev.filter((e) => e.kind === "bind" && e.f.ok === "0").length >= 2);
      await waitFor("two log lines", () => lines.filter((l) => l.includes("refused the bind")).length >= 2);
      const refused = lines.filter((l) => l.includes("refused the bind")).map((l) => JSON.parse(l));
      expect(refused[0]).toMatchObject({ status: "0x0000000E ESME_RINVPASWD", systemId: "switchboard" });
      expect(lines.join("\n")).not.toContain("wrong-pass-xyz");
      expect(carrier.status().link).not.toBe("Bound");
      expect(carrier.status().lastError).toContain("ESME_RINVPASWD");
    } finally {
      await carrier.stop();
      await smsc.stop();
    }
  });

  it("binds and submits over smpps:// with stunnel4 in front of the SMSC", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-stunnel-"));
    const smsc = await startSmsc();
    let stunnel: ChildProcess | undefined;
    try {
      selfSignedCert(dir);
      const port = await freePort();
      writeFileSync(
        join(dir, "stunnel.conf"),
        `foreground = yes\npid =\n[smpp]\naccept = 127.0.0.1:${port}\nconnect = 127.0.0.1:${smsc.port}\ncert = ${join(dir, "cert.pem")}\nkey = ${join(dir, "key.pem")}\n`,
      );
      stunnel = spawn("stunnel4", [join(dir, "stunnel.conf")], { stdio: "ignore" });
      const carrier = createSmppCarrier({
        ...SMPP_DEFAULTS,
        host: "localhost",
        port,
        tls: true,
        tlsCaFile: join(dir, "cert.pem"),
        clock: systemClock,
        reconnectMinMs: 200,
        reconnectMaxMs: 500,
      });
      await carrier.start({ deliveryReport: async () => undefined, inbound: async () => ({ messageSid: "", inReplyTo: "" }) });
      try {
        await waitFor("Bound over TLS", () => carrier.status().link === "Bound");
        const res = await carrier.submit({ messageSid: "MGTLS", from: "+447700900999", to: "+447700900998", text: "Over TLS", deliveryReceipt: true });
        await smsc.waitFor("the submit", (ev) => ev.some((e) => e.kind === "submit" && e.f.destination_addr === "447700900998"));
        expect(res.segmentIds).toEqual([acceptedSubmits(smsc.events)[0]!.f.id]);
      } finally {
        await carrier.stop();
      }
    } finally {
      stunnel?.kill();
      await smsc.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
