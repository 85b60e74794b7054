/**
 * Claim at accept (issue 32): a send due now, accepted by a process whose dispatcher has room, is
 * stored already claimed and handed to that dispatcher in memory: no claim statement. A full
 * hand-off falls back to the unclaimed insert, a scheduled send is untouched, a crash leaves the
 * claim to expire (another dispatcher sends the message exactly once), a stop gives the claims
 * back, and one account's burst does not hold back another's message.
 */
import type { MikroORM } from "@mikro-orm/sql";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Carrier, CarrierEvents, OutboundSms } from "../../src/delivery/carrier.js";
import { createDispatcher, type Dispatcher } from "../../src/delivery/dispatcher.js";
import { createHandOff } from "../../src/delivery/hand-off.js";
import { ManualClock } from "../../src/common/clock.js";
import type { ClaimedRow } from "../../src/messaging/message-store.js";
import { storeClaimed, type AcceptClaims, type Reservation } from "../../src/messaging/claim-at-accept.js";
import type { SendItem } from "../../src/messaging/send-steps.js";
import { dbKind } from "../support/db.js";
import { createTenant, createTestApp, sendOk, SUBMISSIONS_AT_ONCE, type Tenant, type TestApp, type TestEngineOptions } from "../support/harness.js";
import { statements } from "../support/statement-counter.js";

vi.mock("../../src/db/bound-sql.js", async (original) =>
  (await import("../support/statement-counter.js")).countingBoundSql(await original<typeof import("../../src/db/bound-sql.js")>()),
);

const T0 = new Date("2026-11-22T12:00:00Z");
const CLAIM_MS = 60_000;
const claimStatements = () => (statements.get("sb_claim_due") ?? 0) + (statements.get("sb_claim_fair") ?? 0);

/** A carrier that accepts everything and counts submissions per MessageSid; it never reports. */
class CountingCarrier implements Carrier {
  readonly name = "counting";
  readonly submits = new Map<string, number>();
  readonly order: OutboundSms[] = [];
  async submit(sms: OutboundSms): Promise<{ carrierRef: string }> {
    this.submits.set(sms.messageSid, (this.submits.get(sms.messageSid) ?? 0) + 1);
    this.order.push(sms);
    return { carrierRef: `ref-${sms.messageSid}` };
  }
  async start(_events: CarrierEvents): Promise<void> {}
  async stop(): Promise<void> {}
  count(sid: string): number {
    return this.submits.get(sid) ?? 0;
  }
}

let seq = 0;
const recipient = () => `+447911${String(++seq).padStart(6, "0")}`;

const send = (t: TestApp, tenant: Tenant, body: Record<string, unknown> = {}) => sendOk(t.app, tenant, { To: recipient(), ...body });

/** A batch of n sends in one request (they are stored together). */
async function sendBatch(t: TestApp, tenant: Tenant, n: number, body: Record<string, unknown> = {}): Promise<string[]> {
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/BatchMessages`,
    headers: { authorization: tenant.auth },
    payload: { Messages: Array.from({ length: n }, () => ({ From: tenant.ownedNumber, To: recipient(), Text: "hello", ...body })) },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().Messages.map((m: { MessageSid: string }) => m.MessageSid);
}

async function rowOf(orm: MikroORM, sid: string): Promise<{ status: string; claimed_until: Date | string | null; attempts: number }> {
  const rows = await orm.em.fork().execute<any[]>("select status, claimed_until, attempts from messages where sid = ?", [sid]);
  return rows[0];
}

const ms = (d: Date | string | null) => (d === null ? null : new Date(d).getTime());

describe(`claim at accept (${dbKind()})`, () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  async function app(carrier: Carrier, engine: TestEngineOptions = {}): Promise<{ t: TestApp; tenant: Tenant }> {
    t = await createTestApp({
      now: T0,
      carrier,
      engine: {
        claimAtAccept: true,
        ...engine,
        dispatcher: { claimMs: CLAIM_MS, databasePollMs: 3_600_000, ...SUBMISSIONS_AT_ONCE.dispatcher, ...engine.dispatcher },
      },
    });
    return { t, tenant: await createTenant(t.app) };
  }

  it("stores a due send claimed (Processing, claimed_until = now + claimMs, one attempt) and submits it without a claim statement", async () => {
    const carrier = new CountingCarrier();
    const { t, tenant } = await app(carrier);
    const sid = await send(t, tenant);
    const stored = await rowOf(t.db.orm, sid);
    expect(stored.status).toBe("Processing");
    expect(ms(stored.claimed_until)).toBe(T0.getTime() + CLAIM_MS);
    expect(Number(stored.attempts)).toBe(1);

    statements.clear();
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    expect(carrier.count(sid)).toBe(1);
    expect(claimStatements()).toBe(0);
    expect(statements.get("sb_record_submissions")).toBe(1);
    const after = await rowOf(t.db.orm, sid);
    expect(after.status).toBe("Submitted");
    expect(after.claimed_until).toBeNull();
    expect(Number(after.attempts)).toBe(1);
  });

  it("stores what does not fit in the hand-off (one round) unclaimed; every message goes out once", async () => {
    const carrier = new CountingCarrier();
    const { t, tenant } = await app(carrier, { dispatcher: { batchSize: 10 } });
    const sids = await sendBatch(t, tenant, 15);
    const rows = await Promise.all(sids.map((s) => rowOf(t.db.orm, s)));
    expect(rows.filter((r) => r.claimed_until !== null && Number(r.attempts) === 1)).toHaveLength(10);
    expect(rows.filter((r) => r.claimed_until === null && Number(r.attempts) === 0 && r.status === "Processing")).toHaveLength(5);

    statements.clear();
    // The unclaimed ones were announced (queued): the round takes half from the hand-off and
    // gives the database the other half; the next round the rest of the hand-off.
    expect(await t.engine!.dispatcher.tick()).toBe(10);
    expect(claimStatements()).toBe(1);
    expect(await t.engine!.dispatcher.tick()).toBe(5);
    for (const s of sids) expect(carrier.count(s)).toBe(1);
    // Once the database round came back short, sends are stored claimed again.
    expect(await t.engine!.dispatcher.tick()).toBe(0);
    const again = await send(t, tenant);
    expect(Number((await rowOf(t.db.orm, again)).attempts)).toBe(1);
  });

  it("leaves a scheduled send unclaimed until its time, and a refused one out of the hand-off", async () => {
    const carrier = new CountingCarrier();
    const { t, tenant } = await app(carrier, { dispatcher: { databasePollMs: 0 } });
    const scheduled = await send(t, tenant, { Schedule: Math.floor(T0.getTime() / 1000) + 60 });
    expect(await rowOf(t.db.orm, scheduled)).toMatchObject({ status: "Scheduled", claimed_until: null });
    expect(Number((await rowOf(t.db.orm, scheduled)).attempts)).toBe(0);
    // A refused item of a batch is not stored, so never handed over; its neighbour is.
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/BatchMessages`,
      headers: { authorization: tenant.auth },
      payload: {
        Messages: [
          { From: tenant.ownedNumber, To: recipient(), Text: "ok" },
          { From: "+447700900999", To: recipient(), Text: "not our sender" },
        ],
      },
    });
    expect(res.statusCode).toBe(200);
    const [good, bad] = res.json().Messages;
    expect(bad.ResponseStatus.ErrorCode).toBe("SenderNotOwned");
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    expect(carrier.count(good.MessageSid)).toBe(1);
    expect(carrier.order).toHaveLength(1);
    t.clock.advance(60_000);
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    expect(carrier.count(scheduled)).toBe(1);
  });

  it("after a crash (the hand-off never taken), another dispatcher sends each message once, after the claim expired", async () => {
    const carrier = new CountingCarrier();
    const { t, tenant } = await app(carrier);
    const sids = await sendBatch(t, tenant, 3);
    // The accepting process "died": its dispatcher never runs. Another one, on the same database.
    const other = new CountingCarrier();
    const survivor: Dispatcher = createDispatcher({ orm: t.db.orm, clock: t.clock, carrier: other, claimMs: CLAIM_MS });
    expect(await survivor.tick()).toBe(0);
    t.clock.advance(CLAIM_MS - 1);
    expect(await survivor.tick()).toBe(0);
    t.clock.advance(2);
    expect(await survivor.tick()).toBe(3);
    for (const s of sids) expect(other.count(s)).toBe(1);
    expect((await rowOf(t.db.orm, sids[0])).status).toBe("Submitted");
    expect(Number((await rowOf(t.db.orm, sids[0])).attempts)).toBe(2);
    // Had the first process only stalled, its round would now drop the expired claims, not send them again.
    expect(await t.engine!.dispatcher.tick()).toBe(0);
    expect(carrier.order).toHaveLength(0);
  });

  it("a stop gives the hand-off's claims back in one statement: the next dispatcher sends them at once", async () => {
    const carrier = new CountingCarrier();
    const { t, tenant } = await app(carrier);
    const sids = await sendBatch(t, tenant, 4);
    statements.clear();
    await t.engine!.stop();
    expect(statements.get("update messages m")).toBe(1);
    for (const s of sids) {
      const r = await rowOf(t.db.orm, s);
      expect(r).toMatchObject({ status: "Processing", claimed_until: null });
      expect(Number(r.attempts)).toBe(0);
    }
    // A send after the stop is stored unclaimed, as in a process without a dispatcher.
    const late = await send(t, tenant);
    expect((await rowOf(t.db.orm, late)).claimed_until).toBeNull();
    const next = new CountingCarrier();
    const restarted = createDispatcher({ orm: t.db.orm, clock: t.clock, carrier: next, claimMs: CLAIM_MS });
    expect(await restarted.tick()).toBe(5);
    for (const s of [...sids, late]) expect(next.count(s)).toBe(1);
    expect(carrier.order).toHaveLength(0);
  });

  it("one account's burst does not hold back another's message beyond a round", async () => {
    const carrier = new CountingCarrier();
    const { t, tenant: a } = await app(carrier, { dispatcher: { batchSize: 10 } });
    const b = await createTenant(t.app);
    // A fills the hand-off (10) and queues 30 more in the database; then B sends one.
    await sendBatch(t, a, 40);
    const bSid = await send(t, b);
    expect((await rowOf(t.db.orm, bSid)).claimed_until).toBeNull();
    let rounds = 0;
    while (carrier.count(bSid) === 0 && rounds < 10) {
      await t.engine!.dispatcher.tick();
      rounds++;
    }
    // Round 1: half from the hand-off (A's), half from the database in due order (A's, unless B's
    // ties first); round 2: the database shared by account.
    expect(rounds).toBeLessThanOrEqual(2);
    expect(carrier.order.findIndex((s) => s.messageSid === bSid)).toBeLessThan(30);
  });
});

describe("the hand-off (unit)", () => {
  const row = (sid: string, account: string): ClaimedRow => ({
    sid,
    account_sid: account,
    sender: "+447700900001",
    recipient: "+447700900002",
    text: "x",
    delivery_receipt: false,
    attempts: 1,
    send_at: T0,
    scheduled_at: null,
    created_at: T0,
    sms_enabled: true,
    allowed_countries: null,
  });

  it("takes round-robin across accounts, oldest first within one, and stays bounded by its room", () => {
    const clock = new ManualClock(T0);
    let woken = 0;
    const h = createHandOff({ clock, claimMs: CLAIM_MS, room: () => 10, onRows: () => woken++ });
    const r1 = h.reserve(8);
    expect(r1.count).toBe(8);
    expect(h.reserve(5).count).toBe(2);
    expect(h.reserve(1).count).toBe(0);
    h.settle(
      r1,
      Array.from({ length: 8 }, (_, i) => row(`A${i}`, "AC_A")),
    );
    h.settle({ count: 2, until: r1.until }, [row("B0", "AC_B"), row("B1", "AC_B")]);
    expect(woken).toBe(2);
    expect(h.take(4, 0).map((r) => r.sid)).toEqual(["A0", "B0", "A1", "B1"]);
    expect(h.take(3, 0).map((r) => r.sid)).toEqual(["A2", "A3", "A4"]);
    expect(h.size()).toBe(3);
    // Room is given back as messages are taken.
    expect(h.reserve(10).count).toBe(7);
  });

  it("gives back a reservation whose statement failed or stored fewer; drops claims too close to their end", async () => {
    const clock = new ManualClock(T0);
    const h = createHandOff({ clock, claimMs: CLAIM_MS, room: () => 5 });
    const r = h.reserve(5);
    h.settle(r, [row("A0", "AC_A")]);
    expect(h.reserve(5).count).toBe(4);
    clock.advance(CLAIM_MS / 2 + 1);
    expect(h.take(5, CLAIM_MS / 2)).toEqual([]);
    const closing = h.close();
    let closed = false;
    void closing.then(() => (closed = true));
    await new Promise((r) => setImmediate(r));
    // Waits for the reservation still open (a statement in flight), then empties.
    expect(closed).toBe(false);
    h.settle({ count: 4, until: clock.now() }, [row("A1", "AC_A")]);
    expect((await closing).map((l) => l.sid)).toEqual(["A1"]);
    expect(h.reserve(1).count).toBe(0);
  });

  it("storeClaimed: only sends due now are reserved; a failed statement gives its reservation back", async () => {
    const calls: { reserved: number; settled: number; rows: number }[] = [];
    const claims: AcceptClaims = {
      reserve: (want) => {
        calls.push({ reserved: want, settled: -1, rows: 0 });
        return { count: want, until: new Date(T0.getTime() + CLAIM_MS) };
      },
      settle: (r: Reservation, rows) => {
        calls[calls.length - 1].settled = r.count;
        calls[calls.length - 1].rows = rows.length;
      },
    };
    const item = (scheduled: boolean): SendItem =>
      ({ checked: { send: { scheduled } }, account: { sid: "AC" }, propertySid: "PR", leased: false, now: T0, sid: "MG" }) as unknown as SendItem;
    const items = [item(false), item(true), item(false)];
    await expect(storeClaimed(claims, items, () => Promise.reject(new Error("database down")))).rejects.toThrow("database down");
    expect(calls).toEqual([{ reserved: 2, settled: 2, rows: 0 }]);
    expect(items.map((i) => i.claimedUntil !== undefined)).toEqual([true, false, true]);
    const out = await storeClaimed(claims, items, async (its) =>
      its.map((i) => ({ ok: true as const, value: { claimed: i.claimedUntil ? ({} as ClaimedRow) : undefined } })),
    );
    expect(out).toHaveLength(3);
    expect(calls[1]).toEqual({ reserved: 2, settled: 2, rows: 2 });
  });
});
