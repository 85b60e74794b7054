/**
 * Issue 41, defects 3 and 10 (docs/api.md#opt-out-stop-start-help): the answer to a STOP, START or
 * HELP is a send of the account's. It passes the destination permissions, the premium check, the
 * daily quota and the request rate as any send does, goes only to an E164 number, and is given at
 * most once per account, handset, keyword kind and UTC day; a refused answer is kept as a Failed
 * message with its ErrorCode, and the keyword itself (the opt-out) is acted on whatever becomes of
 * its answer. Keywords are matched after one normalisation (NFKC, format characters removed, case
 * folded). Every keyword comes in through the simulator's inbound injection; the workers are
 * driven by hand.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimulatorCarrier } from "../../src/carriers/simulator.js";
import { dbKind } from "../support/db.js";
import {
  ADMIN_TOKEN,
  admin,
  createTenant,
  createTestApp,
  type Tenant,
  type TestApp,
  simulatorInbound,
  drainDeliveries,
  handsetTexts,
} from "../support/harness.js";

let t: TestApp;

let seq = 0;
/** A fresh Australian mobile. */
const auHandset = () => `+6141${String(process.pid % 1000).padStart(3, "0")}${String(++seq).padStart(4, "0")}`;

beforeAll(async () => {
  // The deployment's destination permissions as a default deployment has them: premium numbers refused.
  t = await createTestApp({ engine: { destinations: { defaultAllowedCountries: [], blockedPrefixes: [], allowPremium: false } } });
});

afterAll(async () => {
  await t?.close();
});

/** Submits every due message and waits for the simulator's reports (it delivers to the handset then). */
async function drain(): Promise<void> {
  await drainDeliveries(t);
}

/** What the simulated network delivered to the handset from `from`, texts in order. */
const delivered = (number: string, from: string) => handsetTexts(t.app, number, from);

/** The account's outbound messages (the answers), oldest first. */
async function answers(tenant: Tenant): Promise<{ recipient: string; status: string; error_code: string }[]> {
  return t.db.orm.em
    .fork()
    .execute("select recipient, status, error_code from messages where account_sid = ? and direction = 'Transmit' order by recipient, created_at", [
      tenant.accountSid,
    ]);
}

const segmentsToday = async (tenant: Tenant): Promise<number> => {
  const res = await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${tenant.accountSid}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().SegmentsToday;
};

const optedOut = async (tenant: Tenant): Promise<string[]> => {
  const res = await t.app.inject({ method: "GET", url: `/v2/Accounts/${tenant.accountSid}/OptOuts`, headers: { authorization: tenant.auth } });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().OptOuts as { Number: string }[]).map((o) => o.Number);
};

const HELP_ANSWER = "Tenant: reply STOP to unsubscribe from these messages, START to subscribe again.";
const STOP_ANSWER = "You have been unsubscribed from Tenant and will get no more messages from it. Reply START to subscribe again.";

describe(`keyword answers are sends of the account (${dbKind()})`, () => {
  it("answers obey AllowedCountries and the premium check: 29 HELP/INFO from GB, NG and premium numbers answer nothing and cost nothing", async () => {
    const tenant = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { AllowedCountries: ["AU"], DailySegmentQuota: 3 });
    const senders = ["+447911123456", "+2348031234567", "+19002001234", "+449098790000"];
    for (let i = 0; i < 29; i++) await simulatorInbound(t.app, senders[i % senders.length], tenant.ownedNumber, i % 2 === 0 ? "HELP" : "INFO");
    await drain();
    for (const sender of senders) expect(await delivered(sender, tenant.ownedNumber), sender).toEqual([]);
    expect(await segmentsToday(tenant)).toBe(0);
    // Each answer tried is kept Failed with the permission's ErrorCode; one per sender and kind per day (the cap: HELP and INFO are one kind).
    const tried = await answers(tenant);
    expect(tried.length).toBe(senders.length);
    for (const a of tried) expect(a).toMatchObject({ status: "Failed", error_code: "DestinationNotAllowed" });
    expect(new Set(tried.map((a) => a.recipient))).toEqual(new Set(senders));
    // Without AllowedCountries, the premium-rate numbers are still refused (ALLOW_PREMIUM_DESTINATIONS is off).
    const open = await createTenant(t.app);
    for (const sender of senders) await simulatorInbound(t.app, sender, open.ownedNumber, "HELP");
    await drain();
    expect(await delivered("+19002001234", open.ownedNumber)).toEqual([]);
    expect(await delivered("+449098790000", open.ownedNumber)).toEqual([]);
    expect(await delivered("+2348031234567", open.ownedNumber)).toEqual([HELP_ANSWER]);
    expect((await answers(open)).map((a) => [a.recipient, a.error_code])).toEqual([
      ["+19002001234", "DestinationNotAllowed"],
      ["+2348031234567", ""],
      ["+447911123456", ""],
      ["+449098790000", "DestinationNotAllowed"],
    ]);
  });

  it("answers count against the daily quota; one past it is refused (QuotaExceeded) while its STOP is still recorded", async () => {
    const tenant = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { AllowedCountries: ["AU"], DailySegmentQuota: 3 });
    const phones = [auHandset(), auHandset(), auHandset(), auHandset()];
    for (const phone of phones.slice(0, 3)) await simulatorInbound(t.app, phone, tenant.ownedNumber, "HELP");
    await simulatorInbound(t.app, phones[3], tenant.ownedNumber, "STOP");
    await drain();
    for (const phone of phones.slice(0, 3)) expect(await delivered(phone, tenant.ownedNumber)).toEqual([HELP_ANSWER]);
    expect(await delivered(phones[3], tenant.ownedNumber)).toEqual([]);
    expect(await optedOut(tenant)).toEqual([phones[3]]);
    expect(await segmentsToday(tenant)).toBe(3);
    expect((await answers(tenant)).at(-1)).toEqual({ recipient: phones[3], status: "Failed", error_code: "QuotaExceeded" });
  });

  it("answers pass the request rate: a second answer in the same second is refused (RateLimited)", async () => {
    const tenant = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { SendRatePerSecond: 1, SendRateBurst: 1 });
    const [a, b] = [auHandset(), auHandset()];
    await simulatorInbound(t.app, a, tenant.ownedNumber, "HELP");
    await simulatorInbound(t.app, b, tenant.ownedNumber, "HELP");
    await drain();
    expect(await delivered(a, tenant.ownedNumber)).toEqual([HELP_ANSWER]);
    expect(await delivered(b, tenant.ownedNumber)).toEqual([]);
    expect((await answers(tenant)).map((m) => m.error_code)).toEqual(["", "RateLimited"]);
  });

  it("one answer per handset, kind and UTC day: repeated HELPs and STOPs are acted on, answered once, and again the next day", async () => {
    const tenant = await createTenant(t.app);
    const phone = auHandset();
    // Each handed to the carrier before the next comes (a STOP fails what is still queued to its sender).
    for (const text of ["HELP", "info", "Help", "INFO", "help", "STOP", "stop", "STOP"]) {
      await simulatorInbound(t.app, phone, tenant.ownedNumber, text);
      await drain();
    }
    expect(await delivered(phone, tenant.ownedNumber)).toEqual([HELP_ANSWER, STOP_ANSWER]);
    expect(await optedOut(tenant)).toEqual([phone]);
    // Two at once (two processes would do the same): one answer.
    const other = auHandset();
    await Promise.all([simulatorInbound(t.app, other, tenant.ownedNumber, "HELP"), simulatorInbound(t.app, other, tenant.ownedNumber, "HELP")]);
    await drain();
    expect(await delivered(other, tenant.ownedNumber)).toEqual([HELP_ANSWER]);
    // The next UTC day, the handset is answered again.
    t.clock.advance(86_400_000);
    await simulatorInbound(t.app, phone, tenant.ownedNumber, "HELP");
    await drain();
    expect(await delivered(phone, tenant.ownedNumber)).toEqual([HELP_ANSWER, STOP_ANSWER, HELP_ANSWER]);
  });

  it("a STOP repeated before the first one's confirmation goes out spares that confirmation: the handset gets exactly one", async () => {
    const tenant = await createTenant(t.app);
    const phone = auHandset();
    await simulatorInbound(t.app, phone, tenant.ownedNumber, "HELP");
    for (let i = 0; i < 3; i++) await simulatorInbound(t.app, phone, tenant.ownedNumber, "STOP");
    await drain();
    // The answers are what the handset asked for: its opt-out fails neither (both due at the same instant: in either order).
    expect((await delivered(phone, tenant.ownedNumber)).sort()).toEqual([HELP_ANSWER, STOP_ANSWER].sort());
    expect(await optedOut(tenant)).toEqual([phone]);
    expect((await answers(tenant)).map((a) => a.status)).toEqual(["Delivered", "Delivered"]);
  });

  it("a STOP from an alphanumeric sender is never answered: no message is addressed to it", async () => {
    const tenant = await createTenant(t.app);
    const sender = "<b_id=xss41>";
    await (t.carrier as SimulatorCarrier).injectInbound({ from: sender, to: tenant.ownedNumber, text: "STOP" });
    await drain();
    const [{ n }] = await t.db.orm.em.fork().execute<{ n: number | string }[]>("select count(*) as n from messages where recipient = ?", [sender]);
    expect(Number(n)).toBe(0);
    expect(await answers(tenant)).toEqual([]);
    // What is no number is no handset: its STOP changes no list either (issue 41, defect 2's rule).
    expect(await optedOut(tenant)).toEqual([]);
  });
});

describe(`keyword look-alikes: one normalisation (${dbKind()})`, () => {
  it("full-width, zero-width and soft-hyphen STOPs are honoured as the long-s, dotless-i and no-break-space ones are", async () => {
    const tenant = await createTenant(t.app);
    const texts = [
      "ＳＴＯＰ",
      "\u200BSTOP",
      "STOP\u200B",
      "S\u00ADTOP",
      "\uFEFFStop",
      "ſtop",
      "quıt",
      "STOP\u00A0",
      "Ｓｔｏｐ\u3000",
      "\u2060unsubscribe\u200D",
    ];
    const phones: string[] = [];
    for (const text of texts) {
      const phone = auHandset();
      phones.push(phone);
      await simulatorInbound(t.app, phone, tenant.ownedNumber, text);
    }
    await drain();
    for (const [i, phone] of phones.entries()) expect(await delivered(phone, tenant.ownedNumber), JSON.stringify(texts[i])).toEqual([STOP_ANSWER]);
    expect(new Set(await optedOut(tenant))).toEqual(new Set(phones));
  });
});
