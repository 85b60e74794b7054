/**
 * Refunds of what never reaches a carrier (docs/billing.md#the-charge-on-the-send), end to end
 * through the app, the dispatcher (ticked by hand on a manual clock) and the carrier router with a
 * real route table: canceled, NoRoute (no route takes the destination), QueueTimeout, SmsNotEnabled
 * after a disable, a STOP after the dispatcher took the message (waiting for a carrier's retry, or
 * during the submission the carrier then refused for now), a carrier's refusal at submission and
 * the retry window over. Each: the message's final status and
 * ErrorCode, exactly one Refund of exactly its price with its Sid, the balance back to the
 * micro-unit and equal to its ledger; a second attempt (the dispatcher again, a cancel after the
 * failure, the final state applied again) refunds nothing more. And a cancel racing the
 * dispatcher's claim of the same message refunds it once, whichever wins.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { balanceOf, ledgerSum } from "../../src/billing/balance-store.js";
import { createSimulatorCarrier } from "../../src/carriers/simulator.js";
import { ManualClock } from "../../src/common/clock.js";
import { formatMoney } from "../../src/common/money.js";
import { executeBound } from "../../src/db/bound-sql.js";
import type { OutboundSms } from "../../src/delivery/carrier.js";
import { createCarrierRouter, type CarrierRouter } from "../../src/delivery/carrier-router.js";
import { failUnsubmitted } from "../../src/delivery/receipts.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, submissionsWritten, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
/** An Australian landline: priced 0.07 by the card, and no route takes it (the routes below are +614 and +1500555 only). */
const NO_ROUTE_TO = "+61298765432";
/** The simulator's numbers (docs/carriers.md): refused at submission, and CarrierUnavailable at every submission. */
const REJECTED = "+15005550002";
const UNAVAILABLE = "+15005550003";

let seq = 0;
const mobile = () => `+614123${String(++seq).padStart(5, "0")}`;

describe(`refunds of what never reaches a carrier (${dbKind()})`, () => {
  let db: TestOrm;
  let t: TestApp;
  let router: CarrierRouter;
  const clock = new ManualClock(T0);
  const op = { authorization: `Bearer ${ADMIN_TOKEN}` };
  let duringSubmit: ((sms: OutboundSms) => Promise<void>) | undefined;

  beforeAll(async () => {
    db = await createTestOrm();
    const sim = () => createSimulatorCarrier({ clock, reportDelayMs: 0 });
    router = createCarrierRouter({ orm: db.orm, fallback: sim(), build: async () => sim(), pollMs: 60_000 });
    // The router, with a moment inside each submission (while the dispatcher holds the message) for a test's own step.
    const hooked = new Proxy(router, {
      get: (target, name) =>
        name === "submit" ? async (sms: OutboundSms) => (await duringSubmit?.(sms), target.submit(sms)) : Reflect.get(target, name, target),
    });
    t = await createTestApp({ db, clock, carrier: hooked, engine: true, config: { sendRateLimit: 0 } });
    const card = await t.app.inject({
      method: "PUT",
      url: "/admin/v1/RateCards/retail",
      headers: op,
      payload: {
        Rates: [
          { Prefix: "+614", PricePerSegment: "0.0525" },
          { Prefix: "+61", PricePerSegment: "0.07" },
          { Prefix: "+1500555", PricePerSegment: "0.012345" },
        ],
      },
    });
    expect(card.statusCode, card.body).toBe(200);
    const carrier = await admin(t.app, "/admin/v1/Carriers", { Name: "sandbox", Kind: "simulator", Url: "simulator://" });
    const routes = await t.app.inject({
      method: "PUT",
      url: "/admin/v1/Routes",
      headers: op,
      payload: {
        Routes: [
          { Prefix: "+614", Carriers: [carrier.CarrierSid], Strategy: "Failover" },
          { Prefix: "+1500555", Carriers: [carrier.CarrierSid], Strategy: "Failover" },
        ],
      },
    });
    expect(routes.statusCode, routes.body).toBe(200);
    await router.refresh();
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  const em = () => db.orm.em.fork();
  const secs = () => Math.floor(clock.now().getTime() / 1000);

  /** A Prepaid tenant on card "retail" with a balance of 1.00. */
  async function prepaid(): Promise<Tenant> {
    const tn = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { RateCard: "retail", BillingMode: "Prepaid" });
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}/BalanceEntries`, { Type: "TopUp", Amount: "1.00", Reference: "test" });
    return tn;
  }
  async function send(tn: Tenant, payload: Record<string, unknown>): Promise<string> {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tn.propertySid}/Messages`,
      headers: { authorization: tn.auth },
      payload: { From: tn.ownedNumber, Text: "hello", ...payload },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().MessageSid;
  }
  const record = async (tn: Tenant, sid: string) =>
    (await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tn.auth } })).json();
  const cancel = (tn: Tenant, sid: string) => t.app.inject({ method: "DELETE", url: `/v2/Messages/${sid}`, headers: { authorization: tn.auth } });
  /** The dispatcher's rounds until one claims nothing. */
  async function dispatch(): Promise<void> {
    while ((await t.engine!.dispatcher.tick()) > 0);
    await submissionsWritten(t);
  }
  /** The balance, which is always the sum of its ledger. */
  async function balance(tn: Tenant): Promise<string> {
    const b = await balanceOf(em(), tn.accountSid);
    expect(await ledgerSum(em(), tn.accountSid)).toBe(b);
    return formatMoney(b);
  }
  /** The account's Refund entries: [MessageSid, Amount], oldest first. */
  async function refunds(tn: Tenant): Promise<[string, string][]> {
    const rows = await executeBound<{ message_sid: string; amount: string }>(
      em(),
      "select message_sid, amount::text as amount from balance_entries where account_sid = ? and type = 'Refund' order by id",
      [tn.accountSid],
    );
    return rows.map((r) => [r.message_sid, formatMoney(BigInt(r.amount))]);
  }
  /** The final state applied again, as a late or repeated failure would be: changes nothing, refunds nothing. */
  async function failAgain(sid: string, errorCode: string): Promise<void> {
    const changed = await em().transactional((tx) =>
      failUnsubmitted(tx, [{ messageSid: sid, status: "Failed", errorCode, at: clock.now(), now: clock.now() }]),
    );
    expect(changed).toEqual([false]);
  }
  /** A cancel after the failure is refused and gives nothing back. */
  async function cancelRefused(tn: Tenant, sid: string): Promise<void> {
    const res = await cancel(tn, sid);
    expect([res.statusCode, res.json().ResponseStatus.ErrorCode]).toEqual([400, "MessageNotCancelable"]);
  }

  it("canceled: Canceled, one Refund of its price; a second cancel is refused and refunds nothing", async () => {
    const tn = await prepaid();
    const sid = await send(tn, { To: mobile(), Schedule: secs() + 600, Text: "x".repeat(161) });
    expect(await balance(tn)).toBe("0.895");
    const res = await cancel(tn, sid);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ MessageSid: sid, Status: "Canceled", Price: "0.105" });
    expect(await balance(tn)).toBe("1.00");
    await cancelRefused(tn, sid);
    await dispatch();
    expect(await refunds(tn)).toEqual([[sid, "0.105"]]);
    expect(await balance(tn)).toBe("1.00");
  });

  it("NoRoute: a priced message no route takes fails NoRoute at dispatch and is refunded once; the dispatcher again, a cancel, the failure again: nothing more", async () => {
    const tn = await prepaid();
    const sid = await send(tn, { To: NO_ROUTE_TO });
    expect(await balance(tn)).toBe("0.93");
    await dispatch();
    expect(await record(tn, sid)).toMatchObject({ Status: "Failed", ErrorCode: "NoRoute", Price: "0.07", Submitted: 0 });
    expect(await refunds(tn)).toEqual([[sid, "0.07"]]);
    expect(await balance(tn)).toBe("1.00");
    await dispatch();
    await cancelRefused(tn, sid);
    await failAgain(sid, "NoRoute");
    expect(await refunds(tn)).toEqual([[sid, "0.07"]]);
    expect(await balance(tn)).toBe("1.00");
  });

  it("QueueTimeout: the messages of a paced account still queued past their ValidityPeriod are refunded once each; the one sent is not", async () => {
    const tn = await prepaid();
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { MessagesPerSecond: 1 });
    const sids = [await send(tn, { To: mobile(), ValidityPeriod: 2 }), await send(tn, { To: mobile(), ValidityPeriod: 2 })];
    sids.push(await send(tn, { To: NO_ROUTE_TO, ValidityPeriod: 2 }));
    expect(await balance(tn)).toBe("0.825");
    // One segment a second: one goes out now, the other two wait past their two seconds.
    await dispatch();
    clock.advance(3000);
    await dispatch();
    const records = await Promise.all(sids.map((sid) => record(tn, sid)));
    const timedOut = records.filter((r) => r.ErrorCode === "QueueTimeout");
    expect(timedOut).toHaveLength(2);
    expect(timedOut.every((r) => r.Status === "Failed" && r.Submitted === 0)).toBe(true);
    // The one that went first (the claim's choice among equals) is refunded only if it failed NoRoute.
    const first = records.find((r) => r.ErrorCode !== "QueueTimeout")!;
    const expected = timedOut.map((r) => [r.MessageSid, r.Price] as [string, string]);
    if (first.ErrorCode === "NoRoute") expected.push([first.MessageSid, "0.07"]);
    else expect(first.Status).toMatch(/^(Submitted|Delivered)$/);
    expect((await refunds(tn)).sort()).toEqual(expected.sort());
    expect(await balance(tn)).toBe(first.ErrorCode === "NoRoute" ? "1.00" : "0.9475");
    clock.advance(3000);
    await dispatch();
    for (const r of timedOut) {
      await cancelRefused(tn, r.MessageSid);
      await failAgain(r.MessageSid, "QueueTimeout");
    }
    expect((await refunds(tn)).sort()).toEqual(expected.sort());
  });

  it("SmsNotEnabled: the queued messages of an account disabled before they came due fail at dispatch and are refunded once each", async () => {
    const tn = await prepaid();
    const schedule = secs() + 4;
    const sids = [await send(tn, { To: mobile(), Schedule: schedule }), await send(tn, { To: NO_ROUTE_TO, Schedule: schedule })];
    expect(await balance(tn)).toBe("0.8775");
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { SmsEnabled: false });
    clock.advance(4000);
    await dispatch();
    for (const sid of sids) expect(await record(tn, sid)).toMatchObject({ Status: "Failed", ErrorCode: "SmsNotEnabled", Submitted: 0 });
    expect(await refunds(tn)).toEqual([
      [sids[0], "0.0525"],
      [sids[1], "0.07"],
    ]);
    expect(await balance(tn)).toBe("1.00");
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { SmsEnabled: true });
    await dispatch();
    for (const sid of sids) {
      await cancelRefused(tn, sid);
      await failAgain(sid, "SmsNotEnabled");
    }
    expect(await refunds(tn)).toHaveLength(2);
    expect(await balance(tn)).toBe("1.00");
  });

  it("a STOP after the dispatcher took the message (waiting for a carrier's retry): RecipientOptedOut, refunded once, never submitted again", async () => {
    const tn = await prepaid();
    const sid = await send(tn, { To: UNAVAILABLE });
    await dispatch();
    // The carrier refused it for now: Processing, due again in a second, still charged.
    expect(await record(tn, sid)).toMatchObject({ Status: "Processing", ErrorCode: "CarrierUnavailable" });
    expect(await balance(tn)).toBe("0.987655");
    const stop = await t.app.inject({
      method: "POST",
      url: `/v2/Accounts/${tn.accountSid}/OptOuts`,
      headers: { authorization: tn.auth },
      payload: { Number: UNAVAILABLE },
    });
    expect(stop.statusCode, stop.body).toBe(200);
    expect(await record(tn, sid)).toMatchObject({ Status: "Failed", ErrorCode: "RecipientOptedOut" });
    expect(await refunds(tn)).toEqual([[sid, "0.012345"]]);
    expect(await balance(tn)).toBe("1.00");
    // Its retry time passes: no dispatcher takes it, nothing more is refunded.
    clock.advance(5000);
    await dispatch();
    expect(await record(tn, sid)).toMatchObject({ Status: "Failed", ErrorCode: "RecipientOptedOut", Submitted: 0 });
    await cancelRefused(tn, sid);
    await failAgain(sid, "RecipientOptedOut");
    expect(await refunds(tn)).toEqual([[sid, "0.012345"]]);
    expect(await balance(tn)).toBe("1.00");
  });

  it("a STOP while the dispatcher holds the message, then the carrier refuses it for now: RecipientOptedOut at dispatch, refunded once, not retried", async () => {
    const tn = await prepaid();
    const sid = await send(tn, { To: UNAVAILABLE });
    // The STOP comes during the submission: the message is claimed, so the STOP passes it by.
    duringSubmit = async (sms) => {
      duringSubmit = undefined;
      const stop = await t.app.inject({
        method: "POST",
        url: `/v2/Accounts/${tn.accountSid}/OptOuts`,
        headers: { authorization: tn.auth },
        payload: { Number: sms.to },
      });
      expect(stop.statusCode, stop.body).toBe(200);
      expect(await record(tn, sid)).toMatchObject({ Status: "Processing" });
      expect(await refunds(tn)).toEqual([]);
    };
    await dispatch();
    expect(duringSubmit).toBeUndefined();
    expect(await record(tn, sid)).toMatchObject({ Status: "Failed", ErrorCode: "RecipientOptedOut", Submitted: 0 });
    expect(await refunds(tn)).toEqual([[sid, "0.012345"]]);
    expect(await balance(tn)).toBe("1.00");
    clock.advance(5000);
    await dispatch();
    expect(await record(tn, sid)).toMatchObject({ Status: "Failed", ErrorCode: "RecipientOptedOut", Submitted: 0 });
    await failAgain(sid, "RecipientOptedOut");
    expect(await refunds(tn)).toEqual([[sid, "0.012345"]]);
  });

  it("a carrier's refusal at submission, and the retry window over: refunded once each", async () => {
    const tn = await prepaid();
    const rejected = await send(tn, { To: REJECTED });
    const unavailable = await send(tn, { To: UNAVAILABLE });
    await dispatch();
    expect(await record(tn, rejected)).toMatchObject({ Status: "Failed", ErrorCode: "CarrierRejected" });
    expect(await refunds(tn)).toEqual([[rejected, "0.012345"]]);
    // Retried (1 s doubling to 5 min) until an hour after it was first due.
    for (let i = 0; i < 40 && (await record(tn, unavailable)).Status !== "Failed"; i++) {
      clock.advance(300_000);
      await dispatch();
    }
    expect(await record(tn, unavailable)).toMatchObject({ Status: "Failed", ErrorCode: "CarrierUnavailable", Submitted: 0 });
    expect(await refunds(tn)).toEqual([
      [rejected, "0.012345"],
      [unavailable, "0.012345"],
    ]);
    expect(await balance(tn)).toBe("1.00");
    clock.advance(300_000);
    await dispatch();
    expect(await refunds(tn)).toHaveLength(2);
  });

  it("a cancel racing the dispatcher's claim of the same priced message: refunded exactly once, whichever wins", async () => {
    const tn = await prepaid();
    const rounds = dbKind() === "postgres" ? 8 : 3;
    const outcomes: string[] = [];
    for (let i = 0; i < rounds; i++) {
      // Due in a second; NoRoute at dispatch, so both ways end refunded.
      const sid = await send(tn, { To: NO_ROUTE_TO, Schedule: secs() + 1 });
      clock.advance(1000);
      // Every other round the dispatcher starts a few ms after the cancel, so that each wins some rounds.
      const [canceled] = await Promise.all([cancel(tn, sid), new Promise((r) => setTimeout(r, i % 2 === 0 ? 0 : 2 * i)).then(dispatch)]);
      await dispatch();
      const rec = await record(tn, sid);
      if (canceled.statusCode === 200) expect(rec.Status).toBe("Canceled");
      else expect([canceled.json().ResponseStatus.ErrorCode, rec.Status, rec.ErrorCode]).toEqual(["MessageNotCancelable", "Failed", "NoRoute"]);
      outcomes.push(rec.Status);
      const mine = (await refunds(tn)).filter(([s]) => s === sid);
      expect(mine).toEqual([[sid, "0.07"]]);
      expect(await balance(tn)).toBe("1.00");
    }
    expect(outcomes).toHaveLength(rounds);
  });
});
