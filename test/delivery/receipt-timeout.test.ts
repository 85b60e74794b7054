/**
 * Issue 27 (9): no message stays Submitted for ever without anyone noticing. A restarted simulator
 * reports the messages a stopped one still owed a report for, and a message whose report has not
 * come RECEIPT_TIMEOUT_HOURS after its submission gets ErrorCode ReceiptTimeout (still Submitted).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Carrier, CarrierEvents } from "../../src/delivery/carrier.js";
import { createSimulatorCarrier, SIMULATOR_TEST_NUMBERS } from "../../src/carriers/simulator.js";
import { ManualClock } from "../../src/common/clock.js";
import { createReceiptSweep, SWEEP_NAME } from "../../src/delivery/receipt-timeout.js";
import { advanceSweepPosition, readSweepPosition } from "../../src/delivery/sweep-position-store.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { createTenant, createTestApp, sendOk, SUBMISSIONS_AT_ONCE, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const HOUR = 3_600_000;

let seq = 0;
const recipient = () => `+447911${String(800_000 + ++seq)}`;

const send = (t: TestApp, tenant: Tenant, to = recipient()) => sendOk(t.app, tenant, { To: to, Text: `to ${to}` });

async function record(t: TestApp, tenant: Tenant, sid: string): Promise<Record<string, unknown>> {
  const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

describe(`a restarted simulator reports what the stopped one owed (${dbKind()})`, () => {
  let db: TestOrm;
  const clock = new ManualClock(T0);
  beforeAll(async () => {
    db = await createTestOrm();
  });
  afterAll(() => db?.close());

  it(
    "messages Submitted when the engine stopped with their reports pending reach Delivered (or Failed Unreachable) after a new one starts",
    { timeout: 30_000 },
    async () => {
      // The first process: its simulator would report after a minute, but it stops first.
      const first = await createTestApp({ db, clock, engine: true, carrier: createSimulatorCarrier({ clock, reportDelayMs: 60_000 }) });
      const tenant = await createTenant(first.app);
      const to = [recipient(), recipient(), SIMULATOR_TEST_NUMBERS.unreachable];
      const sids = [await send(first, tenant, to[0]), await send(first, tenant, to[1]), await send(first, tenant, to[2])];
      while ((await first.engine!.dispatcher.tick()) > 0);
      // Held for their reports until the engine stops, which writes them (SUBMISSION_HOLD_MS).
      for (const sid of sids) expect(await record(first, tenant, sid)).toMatchObject({ Status: "Processing", ErrorCode: "" });
      await first.engine!.stop();
      for (const sid of sids) expect(await record(first, tenant, sid)).toMatchObject({ Status: "Submitted", ErrorCode: "" });
      await first.close();

      // The second process, on the same database, a moment later.
      clock.advance(1000);
      const sim = createSimulatorCarrier({ clock, reportDelayMs: 0 });
      const second = await createTestApp({ db, clock, engine: true, carrier: sim });
      try {
        for (const sid of sids.slice(0, 2)) {
          await expect.poll(async () => (await record(second, tenant, sid)).Status, { timeout: 10_000 }).toBe("Delivered");
        }
        await expect.poll(async () => (await record(second, tenant, sids[2])).Status, { timeout: 10_000 }).toBe("Failed");
        expect(await record(second, tenant, sids[2])).toMatchObject({ ErrorCode: "Unreachable" });
        expect(sim.handsetMessages(to[0]).map((m) => m.messageSid)).toEqual([sids[0]]);
        expect(sim.handsetMessages(to[1]).map((m) => m.messageSid)).toEqual([sids[1]]);
      } finally {
        await second.close();
      }
    },
  );
});

/** A carrier that accepts everything and reports only when the test says so. */
class QuietCarrier implements Carrier {
  readonly name = "quiet";
  events?: CarrierEvents;
  async submit(sms: { messageSid: string }) {
    return { carrierRef: `ref-${sms.messageSid}` };
  }
  async start(events: CarrierEvents) {
    this.events = events;
  }
  async stop() {
    this.events = undefined;
  }
}

describe(`the receipt-timeout sweep (${dbKind()})`, () => {
  let t: TestApp;
  let carrier: QuietCarrier;
  let tenant: Tenant;
  beforeAll(async () => {
    carrier = new QuietCarrier();
    t = await createTestApp({ now: T0, engine: SUBMISSIONS_AT_ONCE, carrier });
    tenant = await createTenant(t.app);
  });
  afterAll(() => t?.close());

  it("marks exactly the messages submitted RECEIPT_TIMEOUT_HOURS (72) ago or more, keeps them Submitted, and leaves Delivered ones alone", async () => {
    const d = t.engine!.dispatcher;
    const sweep = t.engine!.receiptSweep;
    t.clock.set(T0);
    const early = await send(t, tenant);
    const delivered = await send(t, tenant);
    expect(await d.tick()).toBe(2);
    await carrier.events!.deliveryReport({ messageSid: delivered, status: "Delivered", errorCode: "", at: t.clock.now() });
    t.clock.set(T0.getTime() + 1000);
    const later = await send(t, tenant);
    expect(await d.tick()).toBe(1);

    // One second before 72 hours: nothing.
    t.clock.set(T0.getTime() + 72 * HOUR - 1000);
    await sweep.tick();
    expect(await record(t, tenant, early)).toMatchObject({ Status: "Submitted", ErrorCode: "" });

    // At exactly 72 hours: the first one only.
    t.clock.set(T0.getTime() + 72 * HOUR);
    await sweep.tick();
    expect(await record(t, tenant, early)).toMatchObject({ Status: "Submitted", ErrorCode: "ReceiptTimeout", Delivered: 0 });
    expect(await record(t, tenant, later)).toMatchObject({ Status: "Submitted", ErrorCode: "" });
    expect(await record(t, tenant, delivered)).toMatchObject({ Status: "Delivered", ErrorCode: "" });

    // A second later, the other one; the delivered one is still left alone.
    t.clock.set(T0.getTime() + 72 * HOUR + 1000);
    await sweep.tick();
    expect(await record(t, tenant, later)).toMatchObject({ Status: "Submitted", ErrorCode: "ReceiptTimeout" });
    expect(await record(t, tenant, delivered)).toMatchObject({ Status: "Delivered", ErrorCode: "" });

    // Operators find them with the existing list filter (Status=Submitted) and their ErrorCode.
    const list = await t.app.inject({
      method: "GET",
      url: `/v2/Properties/${tenant.propertySid}/Messages?Status=Submitted`,
      headers: { authorization: tenant.auth },
    });
    expect(list.statusCode, list.body).toBe(200);
    expect(new Map(list.json().Messages.map((m: { MessageSid: string; ErrorCode: string }) => [m.MessageSid, m.ErrorCode]))).toEqual(
      new Map([
        [early, "ReceiptTimeout"],
        [later, "ReceiptTimeout"],
      ]),
    );

    // A report that does come later still counts.
    await carrier.events!.deliveryReport({ messageSid: early, status: "Delivered", errorCode: "", at: t.clock.now() });
    expect(await record(t, tenant, early)).toMatchObject({ Status: "Delivered", ErrorCode: "" });
  });

  it("a new process resumes where the sweep stopped (sweep_positions), not from the start of the index; the position never moves back", async () => {
    // Later than the test above, whose messages the sweep has passed.
    const base = T0.getTime() + 100 * HOUR;
    const sids: string[] = [];
    for (let i = 0; i < 3; i++) {
      t.clock.set(base + i * 1000);
      sids.push(await send(t, tenant));
      expect(await t.engine!.dispatcher.tick()).toBe(1);
    }
    t.clock.set(base + 73 * HOUR);
    const sweep = () => createReceiptSweep({ orm: t.db.orm, clock: t.clock, timeoutMs: 72 * HOUR, batch: 2 });
    const first = sweep();
    // A full batch of two: there may be more, the loop would run again at once.
    expect(await first.tick()).toBe(2);
    expect((await readSweepPosition(t.db.orm.em.fork(), SWEEP_NAME))?.sid).toBe(sids[1]);
    for (const sid of sids.slice(0, 2)) expect(await record(t, tenant, sid)).toMatchObject({ ErrorCode: "ReceiptTimeout" });

    // The first message's mark taken away: a sweep that walked from the start again would put it back.
    await executeBound(t.db.orm.em.fork(), "update messages set error_code = '' where sid = ?", [sids[0]]);
    const restarted = sweep();
    expect(await restarted.tick()).toBe(0);
    expect(await record(t, tenant, sids[2])).toMatchObject({ Status: "Submitted", ErrorCode: "ReceiptTimeout" });
    expect(await record(t, tenant, sids[0])).toMatchObject({ ErrorCode: "" });
    const end = await readSweepPosition(t.db.orm.em.fork(), SWEEP_NAME);
    expect(end?.sid).toBe(sids[2]);

    // A process that handled an earlier batch does not move it back.
    await advanceSweepPosition(t.db.orm.em.fork(), SWEEP_NAME, { submitted_at: new Date(T0), sid: sids[0] });
    expect(await readSweepPosition(t.db.orm.em.fork(), SWEEP_NAME)).toEqual(end);
  });
});
