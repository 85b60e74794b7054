/**
 * Submissions held for their report (SUBMISSION_HOLD_MS, src/delivery/held-submissions.ts; issue
 * 46): the carrier's report that comes within the hold writes the final state and the submission
 * (Submitted time, Carrier, carrier reference, the operator's Cost) in one update of the message's
 * row; without a report the submission is written alone when the hold ends, and a later report
 * keeps it; a delivery-receipt webhook's message goes the same way through the webhook's
 * transaction; a clean stop writes what is held. A carrier that reports when the test says so, on
 * the manual clock, sends stored claimed at accept as `npm start` stores them; the message row's
 * updates counted by a trigger.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Carrier, CarrierEvents, OutboundSms } from "../../src/delivery/carrier.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp, type TestEngineOptions } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const secs = (d: Date) => Math.floor(d.getTime() / 1000);

/** Accepts everything as carrier "held-test" (a carriers row with a CostCard) and reports when told. */
class ToldCarrier implements Carrier {
  readonly name = "held-test";
  events?: CarrierEvents;
  readonly submitted: OutboundSms[] = [];
  async submit(sms: OutboundSms) {
    this.submitted.push(sms);
    return { carrierRef: `ref-${sms.messageSid}`, carrier: "held-test" };
  }
  async start(events: CarrierEvents) {
    this.events = events;
  }
  async stop() {
    this.events = undefined;
  }
  report(messageSid: string, status: "Delivered" | "Failed", at: Date): Promise<void> {
    return this.events!.deliveryReport({ messageSid, status, errorCode: status === "Failed" ? "Unreachable" : "", at });
  }
}

describe(`submissions held for their report (${dbKind()})`, () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  async function app(submissionHoldMs: number, engine: TestEngineOptions = {}): Promise<{ t: TestApp; tenant: Tenant; carrier: ToldCarrier }> {
    const carrier = new ToldCarrier();
    t = await createTestApp({
      now: T0,
      carrier,
      engine: { claimAtAccept: true, ...engine, dispatcher: { submissionHoldMs, ...engine.dispatcher } },
      config: { sendRateLimit: 0 },
    });
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const card = await t.app.inject({
      method: "PUT",
      url: "/admin/v1/RateCards/held-cost",
      headers: admin,
      payload: { Rates: [{ Prefix: "+44", PricePerSegment: "0.0125" }] },
    });
    expect(card.statusCode, card.body).toBe(200);
    const added = await t.app.inject({
      method: "POST",
      url: "/admin/v1/Carriers",
      headers: admin,
      payload: { Name: "held-test", Kind: "simulator", Url: "simulator://", CostCard: "held-cost" },
    });
    expect(added.statusCode, added.body).toBe(200);
    const em = t.db.orm.em.fork();
    await em.execute(`create table test_message_updates (sid text primary key, n int not null)`);
    await em.execute(`create function test_count_message_updates() returns trigger language plpgsql as $fn$
      begin
        insert into test_message_updates values (new.sid, 1) on conflict (sid) do update set n = test_message_updates.n + 1;
        return null;
      end $fn$`);
    await em.execute(`create trigger test_count_message_updates after update on messages for each row execute function test_count_message_updates()`);
    return { t, tenant: await createTenant(t.app), carrier };
  }

  async function send(tenant: Tenant, extra: object = {}): Promise<string> {
    const res = await t!.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: tenant.ownedNumber, To: "+447700900123", Text: "held", ...extra },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().MessageSid;
  }

  async function record(tenant: Tenant, sid: string): Promise<Record<string, unknown>> {
    return (await t!.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).json();
  }

  /** The row's submission columns and how many times it was updated. */
  async function row(sid: string) {
    const [r] = await t!.db.orm.em.fork().execute<{ carrier_ref: string | null; cost: string | null; claimed: boolean; updates: number }[]>(
      `select m.carrier_ref, m.cost::text as cost, m.claimed_until is not null as claimed, coalesce(u.n, 0)::int as updates
         from messages m left join test_message_updates u on u.sid = m.sid where m.sid = ?`,
      [sid],
    );
    return r;
  }

  it("a report within the hold writes the final state and the submission in one update: Submitted, Carrier, reference, Cost", async () => {
    const { t, tenant, carrier } = await app(60_000);
    const delivered = await send(tenant);
    const failed = await send(tenant);
    const submittedAt = t.clock.now();
    while ((await t.engine!.dispatcher.tick()) > 0);
    expect(carrier.submitted.map((s) => s.messageSid).sort()).toEqual([delivered, failed].sort());
    // Held: nothing written yet, the message still Processing under its claim.
    expect(t.engine!.dispatcher.held.size()).toBe(2);
    expect(await record(tenant, delivered)).toMatchObject({ Status: "Processing", Submitted: 0, Carrier: "" });
    expect(await row(delivered)).toEqual({ carrier_ref: null, cost: null, claimed: true, updates: 0 });

    t.clock.advance(3000);
    const reportedAt = t.clock.now();
    await carrier.report(delivered, "Delivered", reportedAt);
    await carrier.report(failed, "Failed", reportedAt);
    expect(await record(tenant, delivered)).toMatchObject({
      Status: "Delivered",
      Submitted: secs(submittedAt),
      Delivered: secs(reportedAt),
      Carrier: "held-test",
      ErrorCode: "",
    });
    expect(await record(tenant, failed)).toMatchObject({
      Status: "Failed",
      Submitted: secs(submittedAt),
      Delivered: 0,
      Carrier: "held-test",
      ErrorCode: "Unreachable",
    });
    // 0.0125 per segment, in micro-units; one update of each row, the claim ended.
    expect(await row(delivered)).toEqual({ carrier_ref: `ref-${delivered}`, cost: "12500", claimed: false, updates: 1 });
    expect(await row(failed)).toEqual({ carrier_ref: `ref-${failed}`, cost: "12500", claimed: false, updates: 1 });
    expect(t.engine!.dispatcher.held.size()).toBe(0);
  });

  it("without a report the submission is written alone when the hold ends; a later report keeps it", async () => {
    const { t, tenant, carrier } = await app(50);
    const sid = await send(tenant);
    const submittedAt = t.clock.now();
    while ((await t.engine!.dispatcher.tick()) > 0);
    await expect.poll(async () => (await record(tenant, sid)).Status, { timeout: 5000 }).toBe("Submitted");
    expect(await record(tenant, sid)).toMatchObject({ Submitted: secs(submittedAt), Carrier: "held-test" });
    expect(await row(sid)).toEqual({ carrier_ref: `ref-${sid}`, cost: "12500", claimed: false, updates: 1 });
    expect(t.engine!.dispatcher.held.size()).toBe(0);

    t.clock.advance(5000);
    await carrier.report(sid, "Delivered", t.clock.now());
    expect(await record(tenant, sid)).toMatchObject({
      Status: "Delivered",
      Submitted: secs(submittedAt),
      Delivered: secs(t.clock.now()),
      Carrier: "held-test",
    });
    expect(await row(sid)).toEqual({ carrier_ref: `ref-${sid}`, cost: "12500", claimed: false, updates: 2 });
  });

  it("a message whose delivery receipt webhook is queued with its final state gets its submission in the same update", async () => {
    const { t, tenant, carrier } = await app(60_000);
    const sid = await send(tenant, { DeliveryReceipt: true, DeliveryReceiptWebhookUri: "https://receipts.example.com/dr" });
    const submittedAt = t.clock.now();
    while ((await t.engine!.dispatcher.tick()) > 0);
    t.clock.advance(1000);
    await carrier.report(sid, "Delivered", t.clock.now());
    expect(await record(tenant, sid)).toMatchObject({ Status: "Delivered", Submitted: secs(submittedAt), Carrier: "held-test" });
    expect(await row(sid)).toEqual({ carrier_ref: `ref-${sid}`, cost: "12500", claimed: false, updates: 1 });
    const queued = await t.db.orm.em.fork().execute(`select count(*)::int as n from webhook_deliveries where message_sid = ?`, [sid]);
    expect(queued).toEqual([{ n: 1 }]);
  });

  it("a clean stop writes the held submissions before the carrier stops", async () => {
    const { t, tenant } = await app(60_000);
    const sid = await send(tenant);
    const submittedAt = t.clock.now();
    while ((await t.engine!.dispatcher.tick()) > 0);
    expect(await record(tenant, sid)).toMatchObject({ Status: "Processing" });
    await t.engine!.stop();
    expect(await record(tenant, sid)).toMatchObject({ Status: "Submitted", Submitted: secs(submittedAt), Carrier: "held-test" });
    expect(await row(sid)).toEqual({ carrier_ref: `ref-${sid}`, cost: "12500", claimed: false, updates: 1 });
  });

  it("while the database holds a backlog (a claim came back full) the round's submissions are written at once; after it, held again", async () => {
    // Stored unclaimed, claimed from the database two per round.
    const { t, tenant } = await app(60_000, { claimAtAccept: false, dispatcher: { batchSize: 2 } });
    const sids = [await send(tenant), await send(tenant), await send(tenant)];
    expect(await t.engine!.dispatcher.tick()).toBe(2);
    expect(t.engine!.dispatcher.held.size()).toBe(0);
    const first = await Promise.all(sids.map(async (sid) => (await record(tenant, sid)).Status));
    expect(first.filter((s) => s === "Submitted")).toHaveLength(2);
    // The last one: the claim is not full, no backlog, so it waits for its report.
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    expect(t.engine!.dispatcher.held.size()).toBe(1);
    const last = sids[first.findIndex((s) => s !== "Submitted")];
    expect(await record(tenant, last)).toMatchObject({ Status: "Processing", Submitted: 0 });
  });

  it("SUBMISSION_HOLD_MS=0: each round's submissions are written at once (three writes per delivered message)", async () => {
    const { t, tenant, carrier } = await app(0);
    const sid = await send(tenant);
    while ((await t.engine!.dispatcher.tick()) > 0);
    expect(await record(tenant, sid)).toMatchObject({ Status: "Submitted", Carrier: "held-test" });
    await carrier.report(sid, "Delivered", t.clock.now());
    expect(await row(sid)).toEqual({ carrier_ref: `ref-${sid}`, cost: "12500", claimed: false, updates: 2 });
  });
});
