/**
 * Issue 41's forwards and keyword answers run the send pipeline after the inbound SMS's
 * transaction (delivery/inbound.ts sendAfterCommit). They are written to service_send_outbox in
 * that transaction, so a process that stops between the commit and the send loses neither: another
 * process's sweep (delivery/service-send-sweep.ts) stores them once the grace period has passed on
 * the clock, exactly once, also when it races the process that received the SMS.
 *
 * The stop is simulated by running the inbound SMS's transaction (receiveInbound) and never its
 * after-commit sends; the restarted process is a second delivery engine on the same database.
 */
import { pino, type Logger } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind } from "../support/db.js";
import { addPoolNumbers, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { createDeliveryEngine, type DeliveryEngine } from "../../src/delivery/engine.js";
import { receiveInbound, sendAfterCommit, type InboundResult } from "../../src/delivery/inbound.js";
import { createSimulatorCarrier } from "../../src/carriers/simulator.js";
import { createAdmitLimits } from "../../src/limits/account-limits.js";
import type { ServiceSendDeps } from "../../src/messaging/service-sends.js";
import { newSid } from "../../src/common/sid.js";
import { sendJudge } from "../../src/messaging/send-pipeline.js";
import { SEND_RULES } from "../../src/messaging/send-steps.js";

/** SERVICE_SEND_GRACE_MS (delivery/service-send-sweep.ts), spelt out so that this file runs against a build without it. */
const GRACE_MS = 30_000;

const STOP_ANSWER = "You have been unsubscribed from Tenant and will get no more messages from it. Reply START to subscribe again.";

let t: TestApp;
let pool: string;
let seq = 0;
/** A fresh Australian mobile. */
const auHandset = () => `+6142000${String(++seq).padStart(4, "0")}`;

beforeAll(async () => {
  t = await createTestApp({ engine: true });
  [pool] = await addPoolNumbers(t.app, 1);
});

afterAll(async () => {
  await t?.close();
});

/** Submits every due message through the test app's engine. */
async function drain(): Promise<void> {
  while ((await t.engine!.dispatcher.tick()) > 0) {
    /* every due message */
  }
}

/** A process started on the same database (as after a restart), its loops on unless told. */
async function restartedProcess(opts: { loops: boolean; log?: Logger }): Promise<DeliveryEngine> {
  const engine = createDeliveryEngine({
    orm: t.db.orm,
    clock: t.clock,
    carrier: createSimulatorCarrier({ clock: t.clock, reportDelayMs: 0 }),
    webhookAllowPrivate: false,
    pollMs: 20,
    serviceSendSweepMs: 20,
    dispatcher: { shared: t.limits },
    log: opts.log,
  } as Parameters<typeof createDeliveryEngine>[0]);
  await engine.start({ loops: opts.loops });
  return engine;
}

/** The inbound SMS's transaction, committed, and then the process stops: no sendAfterCommit. */
function receivedThenStopped(from: string, to: string, text: string): Promise<InboundResult> {
  return receiveInbound(t.db.orm.em.fork(), { from, to, text, at: t.clock.now() }, t.clock.now(), {});
}

/** The account's outgoing messages to `to`. */
function sentTo(tenant: Tenant, to: string): Promise<{ sid: string; text: string; status: string; error_code: string }[]> {
  return t.db.orm.em
    .fork()
    .execute("select sid, text, status, error_code from messages where account_sid = ? and direction = 'Transmit' and recipient = ? order by created_at", [
      tenant.accountSid,
      to,
    ]);
}

async function outboxRows(): Promise<number> {
  const [{ n }] = await t.db.orm.em.fork().execute<{ n: number | string }[]>("select count(*) as n from service_send_outbox");
  return Number(n);
}

/** Polls (real time) until `check` holds or 10 s have passed; returns its last value. */
async function eventually<T>(read: () => Promise<T>, check: (v: T) => boolean): Promise<T> {
  for (const until = Date.now() + 10_000; ;) {
    const v = await read();
    if (check(v) || Date.now() > until) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A tenant whose message to `handset` went out from the pool number (with ForwardToSms `staff`, if given). */
async function leasedWithForward(handset: string, staff?: string): Promise<Tenant> {
  const tenant = await createTenant(t.app);
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: tenant.auth },
    payload: { To: handset, Text: "Your table is booked", ...(staff ? { ForwardToSms: staff } : {}) },
  });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json().From).toBe(pool);
  await drain();
  return tenant;
}

describe(`a forward or keyword answer accepted with its inbound SMS survives a stop after the commit (${dbKind()})`, () => {
  it("a reply to a lease with ForwardToSms: the process stops after the commit; a restarted one forwards it once, after the grace period", async () => {
    const handset = auHandset();
    const staff = auHandset();
    const tenant = await leasedWithForward(handset, staff);
    const reply = await receivedThenStopped(handset, pool, "running late");
    expect(reply.pendingForward?.forwardToSms).toBe(staff);
    expect(await sentTo(tenant, staff)).toEqual([]);

    const restarted = await restartedProcess({ loops: true });
    try {
      // Within the grace period the row is the receiving process's: nothing is sent yet.
      await new Promise((r) => setTimeout(r, 200));
      expect(await sentTo(tenant, staff)).toEqual([]);
      t.clock.advance(GRACE_MS);
      const forwards = await eventually(
        () => sentTo(tenant, staff),
        (f) => f.length > 0,
      );
      expect(forwards).toHaveLength(1);
      expect(forwards[0]).toMatchObject({ text: "running late", error_code: "" });
      expect(forwards[0].status).not.toBe("Failed");
      expect(await outboxRows()).toBe(0);
      // Later sweeps find nothing more to send.
      t.clock.advance(10 * GRACE_MS);
      await new Promise((r) => setTimeout(r, 200));
      expect(await sentTo(tenant, staff)).toHaveLength(1);
    } finally {
      await restarted.stop();
    }
  });

  it("a STOP to a leased number and a STOP to an owned number: opted out at once, each confirmed once by a restarted process", async () => {
    const leasedHandset = auHandset();
    const tenant = await leasedWithForward(leasedHandset);
    const ownedHandset = auHandset();
    const leased = await receivedThenStopped(leasedHandset, pool, "STOP");
    const owned = await receivedThenStopped(ownedHandset, tenant.ownedNumber, "STOP");
    expect(leased.keyword?.kind).toBe("Stop");
    expect(owned.keyword?.kind).toBe("Stop");
    // The opt-outs were in the SMS's transaction.
    const res = await t.app.inject({ method: "GET", url: `/v2/Accounts/${tenant.accountSid}/OptOuts`, headers: { authorization: tenant.auth } });
    expect(new Set((res.json().OptOuts as { Number: string }[]).map((o) => o.Number))).toEqual(new Set([leasedHandset, ownedHandset]));
    const beforeRestart = await sentTo(tenant, leasedHandset);
    expect(beforeRestart).toHaveLength(1); // the leased message itself
    const leasedSid = beforeRestart[0].sid;
    expect(await sentTo(tenant, ownedHandset)).toEqual([]);

    const restarted = await restartedProcess({ loops: true });
    try {
      t.clock.advance(GRACE_MS);
      // Not the leased message itself (stored at the same instant on the manual clock).
      const answered = async () => [...(await sentTo(tenant, leasedHandset)).filter((m) => m.sid !== leasedSid), ...(await sentTo(tenant, ownedHandset))];
      const answers = await eventually(answered, (a) => a.length >= 2);
      expect(answers.map((a) => a.text)).toEqual([STOP_ANSWER, STOP_ANSWER]);
      // The Sids the keyword step gave them (keyword_answers keeps them: the opt-out spares them).
      expect(answers.map((a) => a.sid)).toEqual([leased.keyword!.answerSid, owned.keyword!.answerSid]);
      for (const a of answers) expect(a.error_code).toBe("");
      expect(await outboxRows()).toBe(0);
      t.clock.advance(10 * GRACE_MS);
      await new Promise((r) => setTimeout(r, 200));
      expect(await answered()).toHaveLength(2);
    } finally {
      await restarted.stop();
    }
  });
});

describe(`the outbox's row is stored once (${dbKind()})`, () => {
  it("the receiving process's after-commit send and another process's sweep race for the same rows: one message each, the loser's quota given back", async () => {
    const handset = auHandset();
    const staff = auHandset();
    const tenant = await leasedWithForward(handset, staff);
    // The lease's send, five forwards and one more send: what the quota allows only if every
    // duplicate admit of the race gave its segment back.
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { DailySegmentQuota: 7 });
    const deps: ServiceSendDeps = {
      orm: t.db.orm,
      limits: createAdmitLimits(t.limits, { ratePerSecond: 1000, burst: 1000 }, () => t.clock.now().getTime()),
      noAlphaCountries: new Set(["US", "CA"]),
      judge: sendJudge(SEND_RULES),
    };
    const lines: string[] = [];
    const other = await restartedProcess({ loops: false, log: pino({ level: "info" }, { write: (l: string) => lines.push(l) }) });
    try {
      const replies: InboundResult[] = [];
      for (let i = 0; i < 5; i++) replies.push(await receivedThenStopped(handset, pool, `reply ${i}`));
      // The receiving process was slow: the grace period has passed when it sends.
      t.clock.advance(GRACE_MS);
      await Promise.all([...replies.map((r) => sendAfterCommit(deps, r)), other.serviceSendSweep.tick()]);
      const forwards = await sentTo(tenant, staff);
      expect(forwards.map((f) => f.text).sort()).toEqual(["reply 0", "reply 1", "reply 2", "reply 3", "reply 4"]);
      for (const f of forwards) expect(f.error_code).toBe("");
      expect(await outboxRows()).toBe(0);
      // Each row is reported by exactly one of the two. The sweep claims every row still in the
      // outbox when its claim runs: all five as a rule, fewer on a busy machine where some
      // receiving-process sends stored theirs first (those never raced).
      const swept = lines.map((l) => JSON.parse(l) as { msg: string; status?: string }).filter((l) => l.msg.startsWith("service send"));
      expect(swept.length).toBeLessThanOrEqual(5);
      const bySweep = swept.filter((l) => l.status !== undefined).length;
      expect(bySweep + replies.filter((r) => r.forward !== undefined).length).toBe(5);
      const more = await t.app.inject({
        method: "POST",
        url: `/v2/Properties/${tenant.propertySid}/Messages`,
        headers: { authorization: tenant.auth },
        payload: { To: auHandset(), Text: "the seventh segment" },
      });
      expect(more.statusCode, more.body).toBe(200);
    } finally {
      await other.stop();
    }
  });

  it("two processes' sweeps at once: each row is claimed by one", async () => {
    const handset = auHandset();
    const staff = auHandset();
    const tenant = await leasedWithForward(handset, staff);
    for (let i = 0; i < 4; i++) await receivedThenStopped(handset, pool, `late ${i}`);
    const [a, b] = [await restartedProcess({ loops: false }), await restartedProcess({ loops: false })];
    try {
      t.clock.advance(GRACE_MS);
      await Promise.all([a.serviceSendSweep.tick(), b.serviceSendSweep.tick(), a.serviceSendSweep.tick(), b.serviceSendSweep.tick()]);
      expect((await sentTo(tenant, staff)).map((f) => f.text).sort()).toEqual(["late 0", "late 1", "late 2", "late 3"]);
      expect(await outboxRows()).toBe(0);
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it("a row whose account is gone is deleted; a row the sweep cannot store is tried again and given up after 24 hours", async () => {
    const em = t.db.orm.em.fork();
    const insert = (id: string, accountSid: string, payload: object) =>
      em.execute("insert into service_send_outbox (id, kind, account_sid, payload, created_at) values (?, 'forward', ?, ?::jsonb, ?)", [
        id,
        accountSid,
        JSON.stringify(payload),
        t.clock.now(),
      ]);
    const now = t.clock.now().toISOString();
    const forward = { propertySid: "PR0", forwardToSms: "+61412999999", forwardFromSms: "", replyFrom: "+61412999998", text: "x", replySid: "MG0", now };
    const gone = newSid("AC");
    await insert("ss_gone", gone, { ...forward, accountSid: gone });
    // An account that exists, a property that does not: the message's insert fails every time.
    const tenant = await createTenant(t.app);
    await insert("ss_broken", tenant.accountSid, { ...forward, accountSid: tenant.accountSid, propertySid: "PRnone" });
    const sweeper = await restartedProcess({ loops: false });
    try {
      t.clock.advance(GRACE_MS);
      await sweeper.serviceSendSweep.tick();
      const ids = async () =>
        (await t.db.orm.em.fork().execute<{ id: string; attempts: number }[]>("select id, attempts from service_send_outbox order by id")).map((r) => [
          r.id,
          r.attempts,
        ]);
      expect(await ids()).toEqual([["ss_broken", 1]]);
      // Claimed for 60 s: not tried again before.
      await sweeper.serviceSendSweep.tick();
      expect(await ids()).toEqual([["ss_broken", 1]]);
      t.clock.advance(60_000);
      await sweeper.serviceSendSweep.tick();
      expect(await ids()).toEqual([["ss_broken", 2]]);
      t.clock.advance(24 * 3_600_000);
      await sweeper.serviceSendSweep.tick();
      expect(await ids()).toEqual([]);
    } finally {
      await sweeper.stop();
    }
  });
});
