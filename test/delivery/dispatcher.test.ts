/**
 * The dispatcher (issue "Delivery engine"): exact schedule boundaries on a manual clock, the
 * simulator's delivery reports and documented failing numbers, temporary-error backoff and the
 * retry window, cancel against dispatch, a restart on the same database (with a crashed claim),
 * and exactly-once submission with three dispatchers racing over one queue.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MikroORM } from "@mikro-orm/sql";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Carrier, CarrierEvents, OutboundSms } from "../../src/delivery/carrier.js";
import { SIMULATOR_TEST_NUMBERS } from "../../src/carriers/simulator.js";
import { ManualClock } from "../../src/common/clock.js";
import { createOrm, migrateUp } from "../../src/db/orm.js";
import { entities } from "../../src/entities.js";
import { createDispatcher, type Dispatcher } from "../../src/delivery/dispatcher.js";
import { dbKind, type TestOrm } from "../support/db.js";
import { createTenant, createTestApp, SUBMISSIONS_AT_ONCE, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const FOURTEEN_DAYS_S = 14 * 86_400;
const HOUR = 3_600_000;

/** A carrier that accepts everything and counts submissions per MessageSid; it never reports. */
class CountingCarrier implements Carrier {
  readonly name = "counting";
  readonly submits = new Map<string, number>();
  readonly log: OutboundSms[] = [];
  events?: CarrierEvents;
  /** While set, submit waits for it (to hold a message between claim and submission). */
  gate?: Promise<void>;
  /** Yield to the event loop inside submit so concurrent dispatchers interleave. */
  yieldEachSubmit = false;

  async submit(sms: OutboundSms): Promise<{ carrierRef: string }> {
    this.submits.set(sms.messageSid, (this.submits.get(sms.messageSid) ?? 0) + 1);
    this.log.push(sms);
    if (this.gate) await this.gate;
    if (this.yieldEachSubmit) await new Promise<void>((r) => setImmediate(r));
    return { carrierRef: `ref-${sms.messageSid}-${this.submits.get(sms.messageSid)}` };
  }
  async start(events: CarrierEvents): Promise<void> {
    this.events = events;
  }
  async stop(): Promise<void> {
    this.events = undefined;
  }
  count(sid: string): number {
    return this.submits.get(sid) ?? 0;
  }
}

/** A carrier whose submit never returns: a dispatcher that claimed a message and then died. */
class HangingCarrier implements Carrier {
  readonly name = "hanging";
  readonly calls: string[] = [];
  private called!: () => void;
  readonly firstCall = new Promise<void>((r) => (this.called = r));
  submit(sms: OutboundSms): Promise<{ carrierRef: string }> {
    this.calls.push(sms.messageSid);
    this.called();
    return new Promise(() => undefined);
  }
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
}

const secs = (d: Date) => Math.floor(d.getTime() / 1000);

let ukSeq = 0;
/** A fresh UK mobile number. */
const ukRecipient = () => `+447911${String(++ukSeq).padStart(6, "0")}`;

async function send(t: TestApp, tenant: Tenant, body: Record<string, unknown>): Promise<string> {
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: tenant.auth },
    payload: { From: tenant.ownedNumber, To: ukRecipient(), Text: "hello", ...body },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().MessageSid;
}

async function record(t: TestApp, tenant: Tenant, sid: string): Promise<any> {
  const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function row(orm: MikroORM, sid: string): Promise<any> {
  const rows = await orm.em.fork().execute<any[]>("select * from messages where sid = ?", [sid]);
  return rows[0];
}

/** Ticks until a round claims nothing; returns how many were claimed in all. */
async function drain(d: Dispatcher): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await d.tick();
    if (n === 0) return total;
    total += n;
  }
}

/** A database that can be closed and opened again (a restart), and several ORMs on it. */
interface ReopenableDb {
  open(poolMax?: number): Promise<MikroORM>;
  dispose(): Promise<void>;
}

async function reopenableDb(): Promise<ReopenableDb> {
  if (dbKind() === "postgres") {
    const server = process.env.DATABASE_URL!;
    const name = `sb_test_${process.pid}_${randomBytes(6).toString("hex")}`;
    const u = new URL(server);
    u.pathname = `/${name}`;
    const url = u.toString();
    return {
      async open(poolMax = 4) {
        const orm = await createOrm({ entities, databaseUrl: url, poolMax });
        await migrateUp(orm);
        return orm;
      },
      async dispose() {
        const adminOrm = await createOrm({ entities, databaseUrl: server, poolMax: 2 });
        try {
          await adminOrm.em.fork().execute(`drop database if exists "${name}" with (force)`);
        } finally {
          await adminOrm.close(true);
        }
      },
    };
  }
  const dir = await mkdtemp(join(tmpdir(), "switchboard-restart-"));
  return {
    async open() {
      const orm = await createOrm({ entities, databaseUrl: dir });
      await migrateUp(orm);
      return orm;
    },
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}

/** A TestOrm the harness will not close (the test owns it). */
const borrowed = (orm: MikroORM): TestOrm => ({ orm, close: async () => undefined });

describe("scheduling on the manual clock (counting carrier)", () => {
  let t: TestApp;
  let tenant: Tenant;
  let carrier: CountingCarrier;

  beforeAll(async () => {
    carrier = new CountingCarrier();
    t = await createTestApp({ now: T0, carrier, engine: SUBMISSIONS_AT_ONCE });
    tenant = await createTenant(t.app);
  });
  afterAll(() => t?.close());

  it("submits a message scheduled exactly 14 days ahead at its second, not one second earlier", async () => {
    t.clock.set(T0);
    const schedule = secs(T0) + FOURTEEN_DAYS_S;
    const sid = await send(t, tenant, { Schedule: schedule });
    expect((await record(t, tenant, sid)).Status).toBe("Scheduled");

    const d = t.engine!.dispatcher;
    expect(await d.tick()).toBe(0);
    t.clock.set((schedule - 1) * 1000);
    expect(await d.tick()).toBe(0);
    t.clock.set(schedule * 1000 - 1);
    expect(await d.tick()).toBe(0);
    expect(carrier.count(sid)).toBe(0);
    let r = await record(t, tenant, sid);
    expect(r.Status).toBe("Scheduled");
    expect(r.Submitted).toBe(0);

    t.clock.set(schedule * 1000);
    expect(await d.tick()).toBe(1);
    expect(carrier.count(sid)).toBe(1);
    r = await record(t, tenant, sid);
    expect(r).toMatchObject({ Status: "Submitted", Schedule: schedule, Submitted: schedule, Delivered: 0, ErrorCode: "" });
    expect((await row(t.db.orm, sid)).carrier_ref).toBe(`ref-${sid}-1`);

    // Nothing is submitted twice, however often the dispatcher looks.
    t.clock.advance(HOUR);
    expect(await d.tick()).toBe(0);
    expect(carrier.count(sid)).toBe(1);
  });

  it("submits a message scheduled 30 minutes in the past on the first tick", async () => {
    t.clock.set(T0.getTime() + 20 * 86_400_000);
    const now = secs(t.clock.now());
    const sid = await send(t, tenant, { Schedule: now - 1800 });
    const before = await record(t, tenant, sid);
    expect(before).toMatchObject({ Status: "Processing", Schedule: now - 1800, Submitted: 0 });
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    expect(carrier.count(sid)).toBe(1);
    expect(await record(t, tenant, sid)).toMatchObject({ Status: "Submitted", Submitted: now });
  });

  it("never submits a message canceled before its time", async () => {
    t.clock.set(T0.getTime() + 40 * 86_400_000);
    const schedule = secs(t.clock.now()) + 3600;
    const sid = await send(t, tenant, { Schedule: schedule });
    const del = await t.app.inject({ method: "DELETE", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
    expect(del.statusCode, del.body).toBe(200);
    expect(del.json().Status).toBe("Canceled");

    t.clock.set((schedule + 1) * 1000);
    expect(await t.engine!.dispatcher.tick()).toBe(0);
    t.clock.advance(2 * HOUR);
    expect(await t.engine!.dispatcher.tick()).toBe(0);
    expect(carrier.count(sid)).toBe(0);
    expect(await record(t, tenant, sid)).toMatchObject({ Status: "Canceled", Submitted: 0 });
  });

  it("refuses to cancel a message the dispatcher has claimed, even before the carrier answered", async () => {
    t.clock.set(T0.getTime() + 60 * 86_400_000);
    const schedule = secs(t.clock.now()) + 3600;
    const held = await send(t, tenant, { Schedule: schedule });
    const done = await send(t, tenant, { Schedule: schedule + 60 });

    // Claimed, carrier call in flight: Processing, not cancelable.
    let open!: () => void;
    carrier.gate = new Promise<void>((r) => (open = r));
    t.clock.set(schedule * 1000);
    const ticking = t.engine!.dispatcher.tick();
    await vi.waitFor(() => expect(carrier.count(held)).toBe(1));
    const midway = await t.app.inject({ method: "DELETE", url: `/v2/Messages/${held}`, headers: { authorization: tenant.auth } });
    expect(midway.statusCode, midway.body).toBe(400);
    expect(midway.json().ResponseStatus.ErrorCode).toBe("MessageNotCancelable");
    carrier.gate = undefined;
    open();
    expect(await ticking).toBe(1);
    expect((await record(t, tenant, held)).Status).toBe("Submitted");

    // Tick done: Submitted, not cancelable either.
    t.clock.set((schedule + 60) * 1000);
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    const after = await t.app.inject({ method: "DELETE", url: `/v2/Messages/${done}`, headers: { authorization: tenant.auth } });
    expect(after.statusCode, after.body).toBe(400);
    expect(after.json().ResponseStatus.ErrorCode).toBe("MessageNotCancelable");
    expect(await record(t, tenant, done)).toMatchObject({ Status: "Submitted", Submitted: schedule + 60 });
    expect(carrier.count(held)).toBe(1);
    expect(carrier.count(done)).toBe(1);
  });
});

describe("the simulator carrier", () => {
  let t: TestApp;
  let tenant: Tenant;

  beforeAll(async () => {
    t = await createTestApp({ now: T0, engine: true }); // simulator reporting after 0 ms
    tenant = await createTenant(t.app);
  });
  afterAll(() => t?.close());

  it("reports delivery: Submitted, then Delivered with its Delivered time", async () => {
    t.clock.set(T0);
    const sids = [await send(t, tenant, {}), await send(t, tenant, {}), await send(t, tenant, {})];
    expect(await t.engine!.dispatcher.tick()).toBe(3);
    for (const sid of sids) {
      await vi.waitFor(async () => expect((await record(t, tenant, sid)).Status).toBe("Delivered"), { timeout: 5000, interval: 10 });
      const r = await record(t, tenant, sid);
      // Submitted is set even though the report may beat the dispatcher's own update.
      expect(r).toMatchObject({ Status: "Delivered", Submitted: secs(T0), Delivered: secs(T0), ErrorCode: "" });
      expect((await row(t.db.orm, sid)).carrier_ref).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it("unreachable number: accepted, then Failed with ErrorCode Unreachable", async () => {
    t.clock.set(T0);
    const sid = await send(t, tenant, { To: SIMULATOR_TEST_NUMBERS.unreachable });
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    await vi.waitFor(async () => expect((await record(t, tenant, sid)).Status).toBe("Failed"), { timeout: 5000, interval: 10 });
    expect(await record(t, tenant, sid)).toMatchObject({ Status: "Failed", ErrorCode: "Unreachable", Submitted: secs(T0), Delivered: 0 });
  });

  it("rejected number: Failed with CarrierRejected on the first submission, never retried", async () => {
    t.clock.set(T0);
    const sid = await send(t, tenant, { To: SIMULATOR_TEST_NUMBERS.rejected });
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    expect(await record(t, tenant, sid)).toMatchObject({ Status: "Failed", ErrorCode: "CarrierRejected", Submitted: 0, Delivered: 0 });
    t.clock.advance(2 * HOUR);
    expect(await t.engine!.dispatcher.tick()).toBe(0);
    expect((await row(t.db.orm, sid)).attempts).toBe(1);
  });

  it("unavailable number: retried on the backoff schedule, Failed with CarrierUnavailable once the hour has passed", async () => {
    /** Retry n waits 1 s doubling, capped at 5 minutes (the documented schedule). */
    const DOCUMENTED_BACKOFF_MS = (n: number) => Math.min(300_000, 1000 * 2 ** (n - 1));
    const start = T0.getTime() + 3 * 86_400_000;
    t.clock.set(start);
    const sid = await send(t, tenant, { To: SIMULATOR_TEST_NUMBERS.unavailable });
    const d = t.engine!.dispatcher;
    const attemptsAt: number[] = [];
    for (let i = 0; i < 100; i++) {
      const before = await row(t.db.orm, sid);
      const due = new Date(before.send_at).getTime();
      // Not a millisecond early.
      t.clock.set(due - 1);
      expect(await d.tick()).toBe(0);
      t.clock.set(due);
      expect(await d.tick()).toBe(1);
      attemptsAt.push(due);
      const after = await row(t.db.orm, sid);
      expect(after.attempts).toBe(attemptsAt.length);
      if (after.status === "Failed") break;
      // Temporary: still Processing, send_at moved forward by the backoff, the error remembered.
      expect(after.status).toBe("Processing");
      expect(after.error_code).toBe("CarrierUnavailable");
      expect(due - start).toBeLessThan(HOUR);
      expect(new Date(after.send_at).getTime()).toBe(due + DOCUMENTED_BACKOFF_MS(attemptsAt.length));
      expect((await record(t, tenant, sid)).Status).toBe("Processing");
    }
    const last = attemptsAt[attemptsAt.length - 1];
    expect(last - start).toBeGreaterThanOrEqual(HOUR);
    expect(attemptsAt[attemptsAt.length - 2] - start).toBeLessThan(HOUR);
    // 1, 2, 4 … 256 s, then every 5 minutes until the hour is up: the documented numbers as
    // literals (docs/api.md, delivery), not the code's own carrierBackoffMs.
    const gaps = attemptsAt.slice(1).map((a, i) => a - attemptsAt[i]);
    const FIVE_MINUTES_MS = 300_000;
    expect(gaps.slice(0, 9)).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000, 64_000, 128_000, 256_000]);
    expect(gaps.slice(9)).toEqual(Array.from({ length: gaps.length - 9 }, () => FIVE_MINUTES_MS));
    expect(gaps.length).toBeGreaterThan(10);
    expect(await record(t, tenant, sid)).toMatchObject({ Status: "Failed", ErrorCode: "CarrierUnavailable", Submitted: 0, Delivered: 0 });
    t.clock.advance(24 * HOUR);
    expect(await d.tick()).toBe(0);
  });
});

describe("restart on the same database", () => {
  it("submits each of 50 scheduled messages exactly once across a restart and a crashed claim", { timeout: 90_000 }, async () => {
    const db = await reopenableDb();
    const clock = new ManualClock(T0);
    const carrier = new CountingCarrier();
    const sids: string[] = [];
    const schedules: number[] = [];
    let orm1: MikroORM | undefined;
    let orm2: MikroORM | undefined;
    try {
      orm1 = await db.open();
      const t1 = await createTestApp({ db: borrowed(orm1), clock, carrier, engine: SUBMISSIONS_AT_ONCE });
      const tenant = await createTenant(t1.app);
      const base = secs(T0);
      for (let i = 0; i < 50; i++) {
        // From one minute to just under 14 days ahead, not in order of creation.
        const schedule = base + 60 + ((i * 17) % 50) * 24_000 + i;
        schedules.push(schedule);
        sids.push(await send(t1, tenant, { Schedule: schedule }));
      }
      // Before the restart: the earliest 20 come due; a dispatcher claims one of them and dies.
      const sorted = [...schedules].sort((a, b) => a - b);
      clock.set(sorted[19] * 1000);
      const crashed = new HangingCarrier();
      void createDispatcher({ orm: orm1, clock, carrier: crashed, batchSize: 1 }).tick();
      await crashed.firstCall;
      const crashedSid = crashed.calls[0];
      expect(sids).toContain(crashedSid);
      expect(await drain(t1.engine!.dispatcher)).toBe(19);
      expect((await row(orm1, crashedSid)).status).toBe("Processing");
      expect(carrier.count(crashedSid)).toBe(0);
      await t1.close();
      await orm1.close(true);
      orm1 = undefined;

      // After the restart: a new app and engine on the same database.
      orm2 = await db.open();
      const t2 = await createTestApp({ db: borrowed(orm2), clock, carrier, engine: SUBMISSIONS_AT_ONCE });
      // The crashed claim holds for its minute; the rest of the due ones were all submitted.
      expect(await drain(t2.engine!.dispatcher)).toBe(0);
      clock.set((sorted[49] + 1) * 1000);
      expect(await drain(t2.engine!.dispatcher)).toBe(30 + 1);
      for (const [i, sid] of sids.entries()) {
        expect(carrier.count(sid), sid).toBe(1);
        const r = await record(t2, tenant, sid);
        expect(["Submitted", "Delivered"]).toContain(r.Status);
        expect(r.Submitted).toBeGreaterThanOrEqual(schedules[i]);
      }
      expect(carrier.submits.size).toBe(50);
      expect(carrier.log.length).toBe(50);
      expect(crashed.calls).toEqual([crashedSid]);
      await t2.close();
    } finally {
      await orm1?.close(true);
      await orm2?.close(true);
      await db.dispose();
    }
  });
});

describe("a claim that expired without the carrier's answer (carrier that confirms by report)", () => {
  /** A counting carrier that, like Kannel, confirms the submissions it holds with a report. */
  class ConfirmingCarrier extends CountingCarrier {
    readonly confirmWaitMs = 30_000;
  }
  /** A dispatcher that died inside submit, for a carrier that confirms. */
  class ConfirmingHangingCarrier extends HangingCarrier {
    readonly confirmWaitMs = 30_000;
  }

  it("holds the message for the carrier's report: confirmed ones are never submitted again, the rest once after a whole wait", async () => {
    const carrier = new ConfirmingCarrier();
    const t = await createTestApp({ now: T0, carrier, engine: true });
    try {
      const tenant = await createTenant(t.app);
      const accepted = await send(t, tenant, {});
      const lost = await send(t, tenant, {});
      // A dispatcher claims both and dies inside submit: the carrier took one (its answer was lost), not the other.
      const crashed = new ConfirmingHangingCarrier();
      void createDispatcher({ orm: t.db.orm, clock: t.clock, carrier: crashed, batchSize: 2 }).tick();
      await crashed.firstCall;
      await vi.waitFor(() => expect(crashed.calls.length).toBe(2));

      // The next process's dispatcher finds the expired claims and holds them; it dies during the wait.
      const expiry = T0.getTime() + 60_001;
      const dying = createDispatcher({ orm: t.db.orm, clock: t.clock, carrier, sweepMs: 0 });
      expect(await drain(dying)).toBe(0); // the claims still run
      t.clock.set(expiry);
      expect(await drain(dying)).toBe(0); // expired: held for the carrier's report, not submitted
      for (const sid of [accepted, lost]) {
        const r = await row(t.db.orm, sid);
        expect(r.status).toBe("Processing");
        expect(new Date(r.claimed_until).getTime()).toBe(expiry + 30_000);
      }

      // A dispatcher that did not see the whole wait does not submit: it waits afresh.
      const d = createDispatcher({ orm: t.db.orm, clock: t.clock, carrier, sweepMs: 0 });
      t.clock.set(expiry + 30_001);
      expect(await drain(d)).toBe(0);
      expect(carrier.count(lost)).toBe(0);

      // The carrier's report (Kannel retries its dlr-url until the service hears it) settles one.
      await t.engine!.events.deliveryReport({ messageSid: accepted, status: "Submitted", errorCode: "", at: t.clock.now(), carrierRef: accepted });
      expect(await record(t, tenant, accepted)).toMatchObject({ Status: "Submitted", Submitted: secs(t.clock.now()) });

      t.clock.set(expiry + 30_001 + 29_999);
      expect(await drain(d)).toBe(0);
      t.clock.set(expiry + 30_001 + 30_000);
      expect(await drain(d)).toBe(1);
      expect(carrier.count(accepted)).toBe(0);
      expect(carrier.count(lost)).toBe(1);
      expect(await record(t, tenant, lost)).toMatchObject({ Status: "Submitted" });
      expect((await row(t.db.orm, accepted)).carrier_ref).toBe(accepted);
      // The dead holder's memory of its hold submits nothing: the message is no longer held.
      expect(await drain(dying)).toBe(0);
      t.clock.set(T0.getTime() + 3_600_000);
      expect(await drain(d)).toBe(0);
      expect(carrier.count(lost)).toBe(1);
    } finally {
      await t.close();
    }
  });
});

describe("three dispatchers, one queue", () => {
  it("submits 2,000 due messages exactly once", { timeout: 90_000 }, async () => {
    const N = 2000;
    const postgres = dbKind() === "postgres";
    const db = postgres ? await reopenableDb() : undefined;
    const orms: MikroORM[] = [];
    let t: TestApp | undefined;
    try {
      if (db) for (let i = 0; i < 3; i++) orms.push(await db.open(8));
      t = db ? await createTestApp({ db: borrowed(orms[0]), now: T0 }) : await createTestApp({ now: T0 });
      if (!db) orms.push(t.db.orm, t.db.orm, t.db.orm);
      const tenant = await createTenant(t.app);
      // Raw inserts, as the send path stores them: half sent at once (Processing), half Scheduled and now due.
      await orms[0].em.fork().execute(
        `insert into messages (sid, account_sid, property_sid, direction, status, sender_kind, sender, recipient, text, encoding,
                               num_segments, delivery_receipt, scheduled_at, send_at, created_at)
         select 'MG' || lpad(i::text, 30, '0'), ?, ?, 'Transmit', case when i % 2 = 0 then 'Processing' else 'Scheduled' end, 'E164', ?,
                '+447911' || lpad(i::text, 6, '0'), 'bulk ' || i, 'GSM7', 1, true,
                case when i % 2 = 0 then null else ?::timestamptz - (i || ' seconds')::interval end,
                ?::timestamptz - (i || ' seconds')::interval, ?::timestamptz - interval '1 day'
           from generate_series(1, ?) as i`,
        [tenant.accountSid, tenant.propertySid, tenant.ownedNumber, T0, T0, T0, N],
      );
      const clock = new ManualClock(T0);
      const carrier = new CountingCarrier();
      carrier.yieldEachSubmit = true;
      const dispatchers = orms.map((orm) => createDispatcher({ orm, clock, carrier, batchSize: 50 }));

      const started = performance.now();
      const claimed = await Promise.all(dispatchers.map((d) => drain(d)));
      const elapsed = performance.now() - started;
      console.log(
        `[${dbKind()}] ${N} messages, 3 dispatchers (${postgres ? "3 ORMs" : "one shared ORM"}): ${elapsed.toFixed(0)} ms; claimed ${claimed.join(" / ")}`,
      );

      expect(claimed.reduce((a, b) => a + b, 0)).toBe(N);
      expect(carrier.submits.size).toBe(N);
      expect(carrier.log.length).toBe(N);
      expect([...carrier.submits.values()].every((n) => n === 1)).toBe(true);
      if (postgres) expect(claimed.filter((n) => n > 0).length).toBeGreaterThan(1);
      const counts = await orms[0].em
        .fork()
        .execute<{ status: string; n: string | number; refs: string | number }[]>(
          "select status, count(*) as n, count(carrier_ref) as refs from messages where direction = 'Transmit' group by status",
        );
      expect(counts.map((c) => ({ status: c.status, n: Number(c.n), refs: Number(c.refs) }))).toEqual([{ status: "Submitted", n: N, refs: N }]);
      expect(await Promise.all(dispatchers.map((d) => d.tick()))).toEqual([0, 0, 0]);
    } finally {
      await t?.close();
      if (db) {
        for (const orm of orms) await orm.close(true);
        await db.dispose();
      }
    }
  });
});
