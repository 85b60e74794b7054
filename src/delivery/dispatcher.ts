import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import { type Carrier, CarrierError, type OutboundSms } from "./carrier.js";
import type { Clock } from "../common/clock.js";
import { failUnsubmitted } from "./receipts.js";
import { type AcceptedSubmission, createSubmissionWriter } from "./submission-writer.js";
import {
  claimFair,
  claimHeldMessages,
  claimInOrder,
  type ClaimedRow,
  holdExpiredClaims,
  listDueAccounts,
  releaseClaims,
  scheduleRetry,
} from "../messaging/message-store.js";
import { createHandOff } from "./hand-off.js";
import { createHeldSubmissions, type HeldSubmissions } from "./held-submissions.js";
import type { AcceptClaims } from "../messaging/claim-at-accept.js";
import type { SharedAllowance } from "../limits/shared-allowance.js";
import { createPacing } from "./dispatch-pacing.js";
import type { DestinationConfig } from "../config.js";
import { destinationPolicy, storedDestinationRefusal } from "../messaging/destination-rules.js";
import { optedOutAmong } from "../optouts/opt-out-store.js";
import { answerSids } from "../optouts/answer-cap-store.js";

/** Without the deployment's destination settings, only the accounts' own AllowedCountries are checked again at dispatch. */
const ACCOUNTS_ONLY: DestinationConfig = { defaultAllowedCountries: [], blockedPrefixes: [], allowPremium: true };

/** How long the list of accounts with due messages is reused by the round-robin claim, ms. */
const DUE_ACCOUNTS_TTL_MS = 250;

/** Options of the dispatcher. */
export interface DispatcherOptions {
  orm: MikroORM;
  clock: Clock;
  carrier: Carrier;
  log?: Logger;
  /** Messages claimed per round (default 500): one claim and one submission update per round. */
  batchSize?: number;
  /** How long a claim lasts before another dispatcher may take the message again (default 60 s). */
  claimMs?: number;
  /** How long temporary carrier errors are retried before the message fails (default 1 hour). */
  retryWindowMs?: number;
  /** Looks for expired claims at most this often, ms (default 1 s; only for carriers that confirm). */
  sweepMs?: number;
  /** The shared buckets of the accounts' MessagesPerSecond (docs/limits.md); absent: no account is paced. */
  shared?: SharedAllowance;
  /** Counts the messages a round gave back to the queue (throttled) and failed QueueTimeout, per account. */
  onPaced?: (accountSid: string, throttled: number, timedOut: number) => void;
  /**
   * While the hand-off feeds the rounds, the database is looked at this often, ms (default 250,
   * the engine's idle poll; 0: every round): for messages come due by their Schedule, a retry, a
   * pacing deferral or an expired claim.
   */
  databasePollMs?: number;
  /** Sends stored claimed were handed over (the hand-off): wake the loops. */
  onHandOff?: () => void;
  /**
   * The deployment's destination permissions (DEFAULT_ALLOWED_COUNTRIES, BLOCKED_PREFIXES,
   * ALLOW_PREMIUM_DESTINATIONS), checked again with each claimed message's account's
   * AllowedCountries at dispatch (issue 41); absent: the accounts' AllowedCountries only.
   */
  destinations?: DestinationConfig;
  /**
   * How long a submission the carrier accepted waits for the carrier's report, to be written with
   * the final state by one statement, ms (default 0: written at once; the service's SUBMISSION_HOLD_MS). Not for a carrier
   * that reports per segment: its segments' ids are written at once (delivery/held-submissions.ts).
   */
  submissionHoldMs?: number;
}

/** Hands due messages to the carrier; any number of dispatchers may share one database. */
export interface Dispatcher {
  /** Claims and submits one batch of due messages; returns how many were claimed. */
  tick(): Promise<number>;
  /** Whether the last round was full: more due messages are probably waiting. */
  backlogged(): boolean;
  /**
   * The hand-off: the sends this process stores already claimed for this dispatcher, taken by its
   * rounds before the database (messaging/claim-at-accept.ts). The send pipeline of the same
   * process gets it; nothing else does.
   */
  readonly claims: AcceptClaims;
  /** A message due now was stored unclaimed (no room in the hand-off, or no hand-off): the next round claims from the database. */
  queued(): void;
  /**
   * Stops taking sends at accept, waits for those being stored, and gives the claims of the
   * messages still in the hand-off back to the queue in one statement, so another dispatcher (or
   * this process after its restart) sends them at once; returns how many. For a clean shutdown,
   * after the last round.
   */
  releaseHandOff(): Promise<number>;
  /** The submissions waiting for their reports (the engine writes them with the final states). */
  readonly held: HeldSubmissions;
}

/** Delay before retry n (1-based) of a temporary carrier error: 1 s doubling to at most 5 min. */
export function carrierBackoffMs(attempt: number): number {
  return Math.min(300_000, 1000 * 2 ** Math.max(0, attempt - 1));
}

/**
 * Creates a dispatcher. Claiming is one UPDATE over a `FOR UPDATE SKIP LOCKED` subselect, so
 * concurrent dispatchers never claim the same row; the claim sets a deadline after which a
 * crashed dispatcher's messages are taken again. A canceled message is no longer Scheduled,
 * so it is never claimed; a claimed one is Processing, so it can no longer be canceled.
 *
 * A claim that expired without an outcome means its dispatcher died somewhere between the claim
 * and recording the carrier's answer: the carrier may or may not hold the message. With a carrier
 * that confirms submissions by report (`confirmWaitMs`), such a message is first held that long
 * by the dispatcher that found it (its claim is renewed until the wait ends): the report, retried
 * by the carrier until the service hears it, marks it Submitted and it is never sent again. Only
 * a message no report confirmed while a live dispatcher waited is submitted again, the one case
 * that can reach the handset twice.
 *
 * Claim at accept (issue 32): a send due now accepted by this process is stored already claimed by
 * this dispatcher while its hand-off has room, and a round takes those first (`claims`, the
 * hand-off; round-robin across accounts), then claims from the database. The hand-off holds at
 * most one round (the round's limit below, so what the carrier can take before the claims end),
 * and refuses sends while the database may hold due messages this process stored unclaimed or a
 * database round came back full: then every send goes through the database's fair claim, and no
 * account's burst delays another's messages beyond a round. While the hand-off feeds the rounds
 * (it gave some within databasePollMs), a round looks at the database only when told a message was
 * stored unclaimed (`queued`), after a full database round, or every databasePollMs: the idle
 * poll's pace, not one claim statement per round. Without sends stored claimed, every round looks. After a crash a message claimed at accept is an expired claim like any
 * other: with a carrier that confirms by report it is held confirmWaitMs first, although the
 * carrier may never have seen it (nothing records the moment the hand-off gives it to a round,
 * as nothing records it for a message claimed from the database).
 */
export function createDispatcher(opts: DispatcherOptions): Dispatcher {
  const batchSize = opts.batchSize ?? 500;
  const claimMs = opts.claimMs ?? 60_000;
  const recordSubmitted = createSubmissionWriter({ orm: opts.orm, clock: opts.clock, claimMs, log: opts.log });
  const databasePollMs = opts.databasePollMs ?? 250;
  const retryWindowMs = opts.retryWindowMs ?? 3_600_000;
  // Read afresh: a router's carriers (and so the longest wait among them) change while it runs.
  const confirmWait = () => opts.carrier.confirmWaitMs ?? 0;
  const sweepMs = opts.sweepMs ?? 1000;
  let lastSweep = -Infinity;
  /** Messages this dispatcher holds for the carrier's report, and when each wait ends. */
  const holds = new Map<string, Date>();

  /** The SMS the carrier gets for a claimed message. */
  const outbound = (row: ClaimedRow): OutboundSms => ({
    messageSid: row.sid,
    from: row.sender,
    to: row.recipient,
    text: row.text,
    deliveryReceipt: row.delivery_receipt,
    accountSid: row.account_sid,
  });

  /** Hands one message to the carrier: its reference, or undefined when the carrier refused it (already handled). */
  async function submitOne(row: ClaimedRow, sms: OutboundSms): Promise<AcceptedSubmission | undefined> {
    // Before the carrier writes anything: no receipt heard earlier can be for this submission's ids.
    const startedAt = opts.clock.now();
    try {
      const { carrierRef, segmentIds, carrier } = await opts.carrier.submit(sms);
      return { messageSid: row.sid, carrierRef, segmentIds, carrier, at: opts.clock.now(), startedAt };
    } catch (err) {
      await carrierRefused(opts.orm.em.fork(), row, err);
      return undefined;
    }
  }

  /**
   * Holds messages whose claim expired without an outcome: their claim is renewed until the end of
   * the wait, and this dispatcher remembers the end it set. Only a dispatcher that lived through a
   * whole wait (so could hear the report) submits again; if it dies, the hold expires like any
   * claim and the next dispatcher waits afresh.
   */
  async function holdUnconfirmed(now: Date): Promise<void> {
    const confirmWaitMs = confirmWait();
    const until = new Date(now.getTime() + confirmWaitMs);
    const held = await holdExpiredClaims(opts.orm.em.fork(), until, now);
    for (const sid of held) holds.set(sid, until);
    if (held.length > 0) {
      opts.log?.warn(
        { count: held.length, messageSids: held.slice(0, 50), confirmWaitMs },
        "claims expired without the carrier's answer (a dispatcher stopped mid-submission): waiting for the carrier's report before submitting again",
      );
    }
  }

  /** Claims held messages whose wait this dispatcher saw through and that no report settled. */
  async function claimHeld(now: Date): Promise<ClaimedRow[]> {
    const byEnd = new Map<number, string[]>();
    for (const [sid, until] of holds) {
      if (until.getTime() > now.getTime()) continue;
      holds.delete(sid);
      byEnd.set(until.getTime(), [...(byEnd.get(until.getTime()) ?? []), sid]);
    }
    const claimed: ClaimedRow[] = [];
    for (const [end, sids] of byEnd) {
      // Still exactly our hold: not settled by a report, not taken over by another dispatcher.
      claimed.push(...(await claimHeldMessages(opts.orm.em.fork(), sids, new Date(end), new Date(now.getTime() + claimMs))));
    }
    if (claimed.length > 0) {
      opts.log?.warn(
        { count: claimed.length, messageSids: claimed.slice(0, 50).map((r) => r.sid), confirmWaitMs: confirmWait() },
        "no carrier report confirmed these earlier submissions within the wait: submitting them again (a handset may get one twice)",
      );
    }
    return claimed;
  }

  async function carrierRefused(em: ReturnType<MikroORM["em"]["fork"]>, row: ClaimedRow, err: unknown): Promise<void> {
    const now = opts.clock.now();
    const carrierErr = err instanceof CarrierError ? err : new CarrierError(String((err as Error)?.message ?? err), "CarrierError", false);
    // The window runs from when the message was first due: its Schedule, or its creation if later.
    const firstDue = Math.max(new Date(row.created_at).getTime(), row.scheduled_at ? new Date(row.scheduled_at).getTime() : 0);
    const expired = now.getTime() - firstDue >= retryWindowMs;
    if (carrierErr.permanent || expired) {
      opts.log?.warn(
        { messageSid: row.sid, errorCode: carrierErr.errorCode, attempts: row.attempts, reason: carrierErr.message },
        "message failed at the carrier",
      );
      // Never taken by a carrier: its lease goes with it (failUnsubmitted).
      await em.transactional((tx) =>
        failUnsubmitted(tx, [{ messageSid: row.sid, status: "Failed", errorCode: carrierErr.errorCode, carrierError: carrierErr.carrierError, at: now, now }]),
      );
    } else if (await optedOutWhileHeld(em, row)) {
      // A STOP that came while this dispatcher held the message passed it by (it was on its way to
      // the carrier); the carrier did not take it, so it is not retried: failed, its charge refunded.
      await em.transactional((tx) =>
        failUnsubmitted(tx, [{ messageSid: row.sid, status: "Failed", errorCode: "RecipientOptedOut", carrierError: carrierErr.carrierError, at: now, now }]),
      );
    } else {
      const retryAt = new Date(now.getTime() + carrierBackoffMs(row.attempts));
      opts.log?.info({ messageSid: row.sid, errorCode: carrierErr.errorCode, retryAt }, "carrier refused for now; will retry");
      await scheduleRetry(em, row.sid, retryAt, carrierErr.errorCode);
    }
  }

  /** Whether the message's recipient opted out of its account (and it is not one of the answers an opt-out spares: optouts/opt-out.ts). */
  async function optedOutWhileHeld(em: ReturnType<MikroORM["em"]["fork"]>, row: ClaimedRow): Promise<boolean> {
    if ((await optedOutAmong(em, row.account_sid, [row.recipient])).size === 0) return false;
    return !(await answerSids(em, row.account_sid, row.recipient)).includes(row.sid);
  }

  /**
   * Fails the claimed messages whose account or property was disabled for SMS before the claim
   * (the claim reads both flags in its own statement, so a disable committed by any process is
   * seen by the next claim): the message is Failed with SmsNotEnabled, and its delivery receipt
   * webhook queued with it, as for any failure. A send stored claimed at accept was checked by its
   * own statement, which is its claim. Conditional like every final state: a message
   * that is no longer Processing is left alone.
   */
  async function failDisabled(rows: ClaimedRow[], now: Date): Promise<void> {
    if (rows.length === 0) return;
    opts.log?.info(
      { count: rows.length, messageSids: rows.slice(0, 50).map((r) => r.sid) },
      "account or property disabled for SMS: queued messages failed, not submitted",
    );
    await opts.orm.em.fork().transactional((tx) =>
      failUnsubmitted(
        tx,
        rows.map((r) => ({ messageSid: r.sid, status: "Failed" as const, errorCode: "SmsNotEnabled", at: now, now })),
      ),
    );
  }

  /**
   * The destination permissions again (issue 41), as the send was judged (destination-rules.ts),
   * with the AllowedCountries the claim read of each message's account and this process's
   * deployment settings: a message the account may no longer send there (its AllowedCountries
   * narrowed, a prefix blocked since) fails with DestinationNotAllowed, the reason in its
   * CarrierError, and its lease released. Sends stored claimed at accept were judged by their own
   * statement a moment ago (allowed_countries null). Returns the rows that may go. Not the premium
   * check: whether a number is premium-rate and ALLOW_PREMIUM_DESTINATIONS cannot change while a
   * message waits (a setting read at start), it was checked at accept, and classifying a number is
   * the one costly part (several µs each, on every message claimed from the database).
   */
  async function failRefusedDestinations(rows: ClaimedRow[], now: Date): Promise<ClaimedRow[]> {
    const deployment = { ...(opts.destinations ?? ACCOUNTS_ONLY), allowPremium: true };
    const refused: { row: ClaimedRow; reason: string }[] = [];
    const allowed: ClaimedRow[] = [];
    for (const r of rows) {
      const reason = r.allowed_countries === null ? undefined : storedDestinationRefusal(r.recipient, destinationPolicy(r.allowed_countries, deployment));
      if (reason === undefined) allowed.push(r);
      else refused.push({ row: r, reason });
    }
    if (refused.length === 0) return rows;
    opts.log?.info(
      { count: refused.length, messageSids: refused.slice(0, 50).map((r) => r.row.sid) },
      "destination no longer allowed for the account: queued messages failed, not submitted",
    );
    await opts.orm.em.fork().transactional((tx) =>
      failUnsubmitted(
        tx,
        refused.map(({ row, reason }) => ({
          messageSid: row.sid,
          status: "Failed" as const,
          errorCode: "DestinationNotAllowed",
          carrierError: reason,
          at: now,
          now,
        })),
      ),
    );
    return allowed;
  }

  /** The accounts' MessagesPerSecond, one step of the round (dispatch-pacing.ts). */
  const paced = createPacing(opts);

  /** True after a full round: due messages may be waiting for the next one, so claim fairly. */
  let backlog = false;
  /** The accounts with due messages while a backlog lasts, and when they were listed (performance.now()). */
  let dueAccounts: { sids: string[]; at: number } | undefined;

  /**
   * Claims up to limit (batchSize, or less when the carrier can take fewer) due messages. While
   * every due message fits in a round, in due order: one statement outside any transaction (the
   * function sb_claim_due carries its own planner settings), so an idle poll is one round trip.
   * After a full round a backlog may be waiting, and one account's burst must not hold back the
   * others: the round is shared round-robin across the accounts with due messages, and what the
   * accounts with fewer due messages than their share left of it goes in due order; that round's
   * statements share a transaction, so that they claim all or nothing (a failed round leaves no
   * claim to wait out). More than limit accounts get one each. The list of accounts is made again
   * every DUE_ACCOUNTS_TTL_MS (an account whose messages come due meanwhile waits that long at
   * most): walking every account's queue index range each round cost as much again as the claim
   * itself while the index still held the entries of the messages just submitted (they go at the
   * next vacuum).
   */
  async function claimDue(now: Date, limit: number): Promise<ClaimedRow[]> {
    const confirmed = confirmWait() > 0;
    const until = new Date(now.getTime() + claimMs);
    let rows: ClaimedRow[];
    if (!backlog) {
      rows = await claimInOrder(opts.orm.em.fork(), confirmed, until, now, limit);
    } else {
      rows = await opts.orm.em.fork().transactional(async (tx) => {
        // The loops share the list, and another loop may replace or drop it while this one waits
        // for the database: this round works on the list it started with.
        let listed = dueAccounts;
        if (!listed || performance.now() - listed.at >= DUE_ACCOUNTS_TTL_MS || listed.sids.length === 0) {
          listed = dueAccounts = { sids: await listDueAccounts(tx, now), at: performance.now() };
        }
        const sids = listed.sids;
        const share = Math.max(1, Math.ceil(limit / Math.max(1, sids.length)));
        let fair = sids.length === 0 ? [] : await claimFair(tx, confirmed, until, sids, now, share);
        const taken = new Map<string, number>();
        for (const r of fair) taken.set(r.account_sid, (taken.get(r.account_sid) ?? 0) + 1);
        // An account that took less than its share has nothing more due now: the next rounds share among the others.
        listed.sids = sids.filter((sid) => (taken.get(sid) ?? 0) >= share);
        // Those that took their whole share may have more; the rows just claimed no longer match.
        if (fair.length < limit && listed.sids.length > 0) fair = [...fair, ...(await claimInOrder(tx, confirmed, until, now, limit - fair.length))];
        return fair;
      });
    }
    backlog = rows.length >= limit;
    if (!backlog) dueAccounts = undefined;
    return rows;
  }

  /**
   * No more than the carrier can submit well before the claims expire (its window and rate, less
   * what it already holds): a claimed message waiting in the carrier's queue past its deadline would
   * be claimed again by another dispatcher. Half the claim leaves the margin. The hand-off holds no
   * more than this either.
   */
  const roundLimit = () => Math.max(0, Math.min(batchSize, Math.floor(opts.carrier.capacity?.(claimMs / 2) ?? batchSize)));
  /** Messages stored unclaimed due now (queued()), counted; those up to seenSeq were there when a database round came back not full. */
  let queuedSeq = 0;
  let seenSeq = 0;
  /** When a round last claimed from the database (counted from the start), and last took messages from the hand-off (performance.now()). */
  let lastLook = performance.now();
  let lastHanded = -Infinity;
  /** The last round left messages in the hand-off (it took its share of the round, or the round was full). */
  let handOffFull = false;
  /** The database may hold due messages this dispatcher should claim before taking sends at accept again. */
  const databasePending = () => backlog || queuedSeq > seenSeq;
  const handOff = createHandOff({
    clock: opts.clock,
    claimMs,
    room: () => (databasePending() ? 0 : roundLimit()),
    onRows: () => opts.onHandOff?.(),
  });
  const submissionHoldMs = opts.submissionHoldMs ?? 0;
  const heldSubmissions = createHeldSubmissions({ holdMs: submissionHoldMs, record: recordSubmitted, log: opts.log });

  return {
    held: heldSubmissions,
    backlogged: () => backlog || handOffFull,
    claims: handOff,
    queued() {
      queuedSeq++;
    },
    async releaseHandOff() {
      const left = await handOff.close();
      if (left.length === 0) return 0;
      const released = await releaseClaims(
        opts.orm.em.fork(),
        left.map((l) => l.sid),
        left.map((l) => l.until),
      );
      opts.log?.info({ count: released }, "stopping: claims of messages not yet handed to the carrier given back to the queue");
      return released;
    },
    async tick() {
      const now = opts.clock.now();
      let held: ClaimedRow[] = [];
      if (confirmWait() > 0) {
        held = await claimHeld(now);
        if (performance.now() - lastSweep >= sweepMs) {
          lastSweep = performance.now();
          await holdUnconfirmed(now);
        }
      }
      // The claim must walk the queue indexes in send_at order and stop at the limit. The planner
      // prefers a bitmap scan plus sort when it expects few due rows, and a bitmap scan visits the
      // heap for every entry of the index, including every message submitted since the last
      // vacuum (their old versions stay in the index until then): milliseconds per round, growing
      // with the table. An ordered index scan stops early and marks such entries dead for the
      // next scan (docs/benchmarks.md). The fair claim underestimates its rows and would then hash-join
      // a full scan of the primary key (80 ms for 50,000 queued); it must reach each claimed row
      // by its key. The claims' functions set this for their own statements (src/messaging/sql/).
      const limit = roundLimit();
      // The database is looked at when it may hold due messages for this round (told so, a full
      // round, the periodic look), or when the hand-off has fed no round lately (as without one).
      const t = performance.now();
      const look = databasePending() || t - lastLook >= databasePollMs || (handOff.size() === 0 && t - lastHanded >= databasePollMs);
      // The sends stored claimed first (a claim with less than half its time left is dropped:
      // after its end another dispatcher may take the message), then the database. A round that
      // looks leaves the database half of it: sends that keep the hand-off full must not hold back
      // what waits there (another account's sends, schedules come due, retries).
      const handed = limit <= 0 ? [] : handOff.take(look && handOff.size() > 0 ? Math.floor(limit / 2) : limit, claimMs / 2);
      if (handed.length > 0) lastHanded = t;
      const room = limit - handed.length;
      let fresh: ClaimedRow[] = [];
      if (room > 0 && look) {
        lastLook = t;
        const seen = queuedSeq;
        fresh = await claimDue(now, room);
        if (!backlog) seenSeq = Math.max(seenSeq, seen);
      }
      // Left in the hand-off after this round took its share: the next round should not wait.
      handOffFull = limit > 0 && handOff.size() > 0;
      const claimed = [...held, ...handed, ...fresh];
      await failDisabled(
        claimed.filter((r) => !r.sms_enabled),
        now,
      );
      const rows = await paced(
        await failRefusedDestinations(
          claimed.filter((r) => r.sms_enabled),
          now,
        ),
        now,
      );
      // In rounds of batchSize (after a crash under load, many held messages may come due at once):
      // the carrier gets a round's messages side by side, then one UPDATE records them.
      for (let i = 0; i < rows.length; i += batchSize) {
        // allSettled: a refusal that could not be recorded (database down) must not keep the
        // carrier's acceptances of the same round from being recorded.
        const round = rows.slice(i, i + batchSize);
        const sms = round.map(outbound);
        // What the carrier looks up for the whole round (the router's LeastCost costs: one statement).
        await opts.carrier.prepare?.(sms, now);
        const outcomes = await Promise.allSettled(round.map((r, j) => submitOne(r, sms[j])));
        const accepted = outcomes.flatMap((o) => (o.status === "fulfilled" && o.value ? [o.value] : []));
        // One line per message (debug only: the check keeps a busy round from paying for them).
        if (opts.log?.isLevelEnabled("debug")) {
          for (const d of accepted) opts.log.debug({ messageSid: d.messageSid, carrierRef: d.carrierRef }, "message submitted to the carrier");
        }
        // Written with their final states when the reports come within the hold; a carrier that
        // reports per segment matches its receipts by the segments' ids, which are written at once.
        // Not while the database holds a backlog: a held message stays Processing under its claim,
        // in the queue index, and every claim of the backlog walks past it (a heap visit each), so
        // the drain writes its submissions at once and the rows leave the queue.
        const later = submissionHoldMs > 0 && !backlog ? accepted.filter((d) => !d.segmentIds?.length) : [];
        heldSubmissions.hold(later);
        await recordSubmitted(later.length === 0 ? accepted : accepted.filter((d) => d.segmentIds?.length));
        const failed = outcomes.find((o) => o.status === "rejected");
        if (failed) throw failed.reason;
      }
      return claimed.length;
    },
  };
}
