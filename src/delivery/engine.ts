import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Carrier, CarrierEvents, SegmentReceipt } from "./carrier.js";
import type { Clock } from "../common/clock.js";
import type { Transporter } from "nodemailer";
import { createMailWorker } from "../mail/mail-outbox.js";
import { createWebhookWorker, type WebhookWorker, type WebhookWorkerOptions } from "../webhooks/webhook-worker.js";
import { createDispatcher, type Dispatcher, type DispatcherOptions } from "./dispatcher.js";
import type { AcceptClaims } from "../messaging/claim-at-accept.js";
import {
  DEFAULT_BILLING,
  DEFAULT_NO_ALPHA_COUNTRIES,
  DEFAULT_SEND_RATE_LIMIT,
  defaultSendBurst,
  type DestinationConfig,
  type SenderIdMode,
} from "../config.js";
import { receiveInbound, sendAfterCommit } from "./inbound.js";
import { createAdmitLimits, type DefaultSendRate, type LimitCounters } from "../limits/account-limits.js";
import type { ServiceSendDeps } from "../messaging/service-sends.js";
import { sendJudge } from "../messaging/send-pipeline.js";
import { SEND_RULES, type SendRules } from "../messaging/send-steps.js";
import type { SendCounters } from "../messaging/send-counters.js";
import { createGroupCommit } from "../common/group-commit.js";
import { ormKind } from "../db/orm.js";
import { isDatabaseUnavailable } from "../common/pg-errors.js";
import { applyReportBatch, recordSubmissions, type Submission } from "./receipts.js";
import { createWorkerLoop, type WorkerLoop } from "./worker-loop.js";
import { applyPendingReceipts, applySegmentReceipts, flushInboundParts, storeInboundPart } from "./segment-store.js";
import { createRetentionPurge, type RetentionOptions, type RetentionPurge } from "./retention.js";
import { createUsageRollup, type UsageRollup } from "../billing/usage-rollup.js";
import { createReceiptSweep, listAwaitingReports, type ReceiptSweep } from "./receipt-timeout.js";
import { createServiceSendSweep, type ServiceSendSweep } from "./service-send-sweep.js";
import { createLowBalanceJob, type LowBalanceJob } from "../billing/low-balance.js";

/** Options of the delivery engine. */
export interface DeliveryEngineOptions {
  orm: MikroORM;
  clock: Clock;
  carrier: Carrier;
  webhookAllowPrivate: boolean;
  log?: Logger;
  /** Poll interval when idle, ms (default 250). */
  pollMs?: number;
  dispatcher?: Partial<Pick<DispatcherOptions, "batchSize" | "claimMs" | "retryWindowMs" | "shared" | "onPaced" | "databasePollMs" | "submissionHoldMs">> & {
    /**
     * Dispatcher loops run side by side (default 2): while one waits for the database, the other
     * claims or records. Claims never overlap (SKIP LOCKED and the claim deadline), as across processes.
     */
    loops?: number;
    /**
     * More dispatcher loops that run only while a backlog lasts (a round came back full; default
     * 2). Neither Node nor PostgreSQL was busy during a 100,000-message drain with two loops: each
     * round waits for its claim, its submissions and its record in turn, so more rounds side by side
     * drain faster (docs/benchmarks.md). Under a steady send load rounds are small, and more loops
     * would only split them into more statements: these stay asleep then.
     */
    backlogLoops?: number;
    /**
     * Least time between the starts of two rounds while no backlog builds up (default 20 ms). Under
     * a steady send load the loops would otherwise claim every few milliseconds, a handful of
     * messages each, and every round costs its claim, its submission record and its reports'
     * statements whatever its size: spaced rounds carry more messages each (docs/benchmarks.md).
     * A message queued after a quiet spell still goes at once; a full round (backlog) is not held.
     */
    roundGapMs?: number;
  };
  webhooks?: Partial<Pick<WebhookWorkerOptions, "timeoutMs" | "retryForMs" | "concurrency" | "concurrencyPerHost" | "concurrencyPerAccount" | "resolve">>;
  /** SMTP transport for forwarded e-mails; without one they are kept for the operator. */
  mailTransport?: Transporter;
  /** Countries whose operators do not take alphanumeric sender IDs (forwarded replies follow the send rules); default US, CA. */
  noAlphaCountries?: ReadonlySet<string>;
  /** SENDER_ID_REGISTRATION, which forwarded replies from an alphanumeric ForwardFromSms obey as sends do; default AU=require. */
  /** DEFAULT_RATE_CARD, for the service's own sends (a reply's forward, a keyword's answer). */
  defaultRateCard?: string;
  senderIdRegistration?: ReadonlyMap<string, SenderIdMode>;
  /** The deployment's destination permissions, which forwards and keyword answers obey as sends do; default: none but premium numbers. */
  /** The send rules that need data, for the service's own sends (messaging/send-steps.ts); default SEND_RULES. */
  rules?: SendRules;
  /** Where forwards SENDER_ID_REGISTRATION labels unregistered are counted (shared with the app's sends, for the metrics). */
  sendCounters?: SendCounters;
  destinations?: DestinationConfig;
  /**
   * The deployment's default request rate (SEND_RATE_LIMIT, SEND_RATE_BURST; default 50/s): with the
   * dispatcher's shared allowance, forwards and keyword answers pass the admit step (the account's
   * request rate and daily quota) as the API's sends do. Without a shared allowance they are not limited.
   */
  sendRate?: DefaultSendRate;
  /** Where the admit step counts what it refused (the API's counters, for /metrics). */
  limitCounters?: LimitCounters;
  /** How long after its submission a message without a receipt gets ErrorCode ReceiptTimeout, ms (default 72 h: RECEIPT_TIMEOUT_HOURS). */
  receiptTimeoutMs?: number;
  /** How often the receipt-timeout sweep looks once it has caught up, ms (default 60 s). */
  receiptSweepMs?: number;
  /** How often the sweep of the service sends' outbox looks once it has caught up, ms (default 10 s). */
  serviceSendSweepMs?: number;
  /** BILLING_CURRENCY, the PriceUnit of BalanceLow webhooks (default AUD). */
  currency?: string;
  /** How often the low-balance job looks for crossings to notify, ms (default 1 s). */
  lowBalanceMs?: number;
  /** The retention purge's settings (docs/configuration.md#retention); without them nothing is purged. */
  retention?: Omit<RetentionOptions, "orm" | "clock" | "log"> & { intervalMs?: number };
  /** How often the usage rollup looks for closed days, ms (default 10 min). */
  usageRollupMs?: number;
}

/** The dispatcher, the webhook sender and the carrier's event sink, started and stopped together. */
export interface DeliveryEngine {
  dispatcher: Dispatcher;
  webhooks: WebhookWorker;
  mail: { tick(): Promise<number> };
  /** Gives ErrorCode ReceiptTimeout to messages Submitted longer than receiptTimeoutMs ago; any process may run it. */
  receiptSweep: ReceiptSweep;
  /** Deletes and redacts old messages (MESSAGE_RETENTION_DAYS, accounts' RetentionDays and RedactAfterDays); any process may run it. */
  retention: RetentionPurge;
  /** Sums each account's closed UTC days into usage_days (docs/billing.md#usage); any process may run it. */
  usageRollup: UsageRollup;
  /**
   * Sends the forwards and keyword answers whose inbound SMS committed but whose process never
   * stored them (it stopped first), once SERVICE_SEND_GRACE_MS has passed; any process may run it.
   */
  serviceSendSweep: ServiceSendSweep;
  /** Queues the BalanceLow webhooks of the charges that took a balance below its threshold (docs/billing.md#low-balance); any process may run it. */
  lowBalance: LowBalanceJob;
  events: CarrierEvents;
  /** Starts the carrier and (unless `loops` is false) the background loops. */
  start(opts?: { loops?: boolean }): Promise<void>;
  /** Wakes the dispatcher: a message due now was just stored unclaimed, in the database. */
  nudge(): void;
  /**
   * The dispatcher's hand-off, for the send pipeline of this process only (messaging/claim-at-accept.ts):
   * sends due now are stored claimed by this dispatcher and handed to it in memory.
   */
  claims: AcceptClaims;
  /**
   * Stops the loops after their current round, gives back the claims of the sends stored claimed
   * and not yet handed to the carrier, waits for webhook calls in flight, then stops the carrier.
   */
  stop(): Promise<void>;
}

/** Creates the delivery engine; tests call `dispatcher.tick()` and `webhooks.tick()` themselves. */
export function createDeliveryEngine(opts: DeliveryEngineOptions): DeliveryEngine {
  const noAlphaCountries = opts.noAlphaCountries ?? new Set(DEFAULT_NO_ALPHA_COUNTRIES);
  // The forward of a reply and a keyword's answer are the account's sends: the pipeline's admit step, on the same shared buckets.
  const shared = opts.dispatcher?.shared;
  const sendRate = opts.sendRate ?? { ratePerSecond: DEFAULT_SEND_RATE_LIMIT, burst: defaultSendBurst(DEFAULT_SEND_RATE_LIMIT) };
  const serviceSends: ServiceSendDeps = {
    orm: opts.orm,
    limits: shared ? createAdmitLimits(shared, sendRate, () => opts.clock.now().getTime(), opts.limitCounters) : undefined,
    noAlphaCountries,
    senderIdRegistration: opts.senderIdRegistration,
    destinations: opts.destinations,
    judge: sendJudge(opts.rules ?? SEND_RULES, opts.sendCounters),
    defaultRateCard: opts.defaultRateCard,
  };
  const pollMs = opts.pollMs ?? 250;
  let dispatchLoops: WorkerLoop[] = [];
  const dispatcher = createDispatcher({
    orm: opts.orm,
    clock: opts.clock,
    carrier: opts.carrier,
    log: opts.log,
    databasePollMs: pollMs,
    destinations: opts.destinations,
    ...opts.dispatcher,
    // Sends stored claimed wait in memory: the loops take them, nothing to mark in the database.
    onHandOff: () => {
      for (const l of dispatchLoops) l.nudge();
    },
  });
  let webhookLoop: WorkerLoop | undefined;
  // A call that ends frees a slot: the loop fills it at once rather than at its next poll.
  const webhooks = createWebhookWorker({
    orm: opts.orm,
    clock: opts.clock,
    allowPrivate: opts.webhookAllowPrivate,
    log: opts.log,
    ...opts.webhooks,
    onSlotFree: () => webhookLoop?.nudge(),
  });
  const mail = createMailWorker({ orm: opts.orm, clock: opts.clock, transport: opts.mailTransport, log: opts.log });
  const receiptTimeoutMs = opts.receiptTimeoutMs ?? 72 * 3_600_000;
  const receiptSweep = createReceiptSweep({ orm: opts.orm, clock: opts.clock, timeoutMs: receiptTimeoutMs, log: opts.log });
  const usageRollup = createUsageRollup({ orm: opts.orm, clock: opts.clock, log: opts.log });
  const lowBalance = createLowBalanceJob({
    orm: opts.orm,
    clock: opts.clock,
    currency: opts.currency ?? DEFAULT_BILLING.currency,
    log: opts.log,
    onQueued: () => webhookLoop?.nudge(),
  });
  const retention = createRetentionPurge({ orm: opts.orm, clock: opts.clock, log: opts.log, defaultDays: null, usage: usageRollup, ...opts.retention });
  let loops: WorkerLoop[] = [];
  /** Something stored a message due now in the database (a forward, a keyword's answer): the loops claim it. */
  const queuedInDatabase = () => {
    dispatcher.queued();
    for (const l of loops) l.nudge();
  };
  const serviceSendSweep = createServiceSendSweep({ orm: opts.orm, clock: opts.clock, sends: serviceSends, log: opts.log, onQueued: () => queuedInDatabase() });

  // Delivery reports arrive one per message: the ones that arrive together share one statement
  // (applyReportBatch), and a transaction only for those whose webhook is queued with them.
  const reports = createGroupCommit({
    // Nobody waits on a report: 10 ms gathers the reports of a busy carrier into larger batches.
    lingerMs: 10,
    run: async (items: Parameters<typeof applyReportBatch>[1]) => {
      // A submission still held for its report is written with the final state (two writes per
      // delivered message); one whose report changed nothing stays held and is written alone.
      const reported = items.map((r) => {
        const held = dispatcher.held.get(r.messageSid);
        return held ? { ...r, held } : r;
      });
      const outcomes = await applyReportBatch(opts.orm.em.fork(), reported);
      dispatcher.held.settled(reported.flatMap((r, i) => (r.held && outcomes[i].changed ? [r.messageSid] : [])));
      return outcomes.map((o) => ({ ok: true as const, value: o.webhook }));
    },
  });
  // The carrier's Submitted reports (Kannel's type 8/4) likewise; a sid repeated in one batch is
  // recorded once (the first), as if the reports had come one after the other.
  const submissions = createGroupCommit({
    lingerMs: 10,
    run: async (items: Submission[]) => {
      const first = new Map<string, Submission>();
      for (const s of items) if (!first.has(s.messageSid)) first.set(s.messageSid, s);
      await recordSubmissions(opts.orm.em.fork(), [...first.values()]);
      return items.map(() => ({ ok: true as const, value: undefined }));
    },
  });

  // A carrier's per-segment receipts (SMPP deliver_sm) likewise, in batches: one transaction
  // each, and one batch at a time for every link together, so that a flood of receipts holds one
  // pooled connection, never the pool (issue 41: the API had none left). Each receipt is answered
  // once its batch committed; the links stop reading while theirs wait (smpp-carrier.ts). On
  // PGlite, whose one connection the API shares, receipts and inbound SMS take at most half its
  // time (RECEIPT_REST_PGLITE).
  const rest = ormKind(opts.orm) === "pglite" ? RECEIPT_REST_PGLITE : 0;
  let receiptsRestUntil = 0;
  const segmentReceipts = createGroupCommit({
    lingerMs: 5,
    maxInFlight: RECEIPT_CONNECTIONS,
    maxBatch: RECEIPT_BATCH,
    run: async (items: SegmentReceipt[]) => {
      // The previous batch's rest; the receipts arriving meanwhile join this batch.
      const wait = receiptsRestUntil - performance.now();
      if (wait >= 1) await new Promise((r) => setTimeout(r, wait));
      const started = performance.now();
      try {
        const outcomes = await opts.orm.em.fork().transactional((tx) => applySegmentReceipts(tx, items, opts.clock.now()));
        return outcomes.map((o) => ({ ok: true as const, value: o }));
      } catch (err) {
        // The database is down: every receipt of the batch is answered with the temporary error at
        // once (the SMSC sends them again), not retried one by one, each waiting for a connection.
        if (isDatabaseUnavailable(err)) return items.map(() => ({ ok: false as const, error: err }));
        throw err;
      } finally {
        receiptsRestUntil = performance.now() + Math.min(1000, rest * (performance.now() - started));
      }
    },
  });
  // Inbound SMS run their own transactions (matching, keywords, forwards): at most this many at once.
  const inboundSlots = createSlots(rest > 0 ? 1 : INBOUND_CONNECTIONS, rest);

  const events: CarrierEvents = {
    async deliveryReport(report) {
      if (report.status === "Submitted") {
        await submissions.submit({ messageSid: report.messageSid, at: report.at, carrierRef: report.carrierRef ?? null });
        return;
      }
      // Only a queued delivery receipt gives the webhook worker something to do (it polls anyway).
      const queuedWebhook = await reports.submit({ ...report, status: report.status, now: opts.clock.now() });
      if (queuedWebhook) webhookLoop?.nudge();
    },
    async inbound(sms) {
      const result = await inboundSlots.run(() => receiveInbound(opts.orm.em.fork(), sms, opts.clock.now(), { log: opts.log }));
      // The forward and the keyword's answer are sends of the account: the send pipeline, after the commit.
      await sendAfterCommit(serviceSends, result, opts.log);
      // Only a forward or a keyword's answer gives the dispatcher a message to claim: a flood of MO
      // must not wake it (and stop its hand-off) for each one.
      if (result.forward?.status === "Processing" || result.answer?.status === "Processing") queuedInDatabase();
      return result;
    },
    async segmentReceipt(receipt) {
      if ((await segmentReceipts.submit(receipt)) === "applied") webhookLoop?.nudge();
    },
    async inboundPart(part) {
      const result = await inboundSlots.run(() => storeInboundPart(opts.orm.em.fork(), part, opts.clock.now(), { log: opts.log }));
      if (result) {
        await sendAfterCommit(serviceSends, result, opts.log);
        queuedInDatabase();
      }
    },
    awaitingReports: (before) => listAwaitingReports(opts.orm, before, new Date(before.getTime() - receiptTimeoutMs)),
    async housekeeping(partsBefore) {
      const now = opts.clock.now();
      const applied = await opts.orm.em.fork().transactional((tx) => applyPendingReceipts(tx, now));
      const flushed = await flushInboundParts(opts.orm.em.fork(), partsBefore, now, { log: opts.log });
      for (const result of flushed) await sendAfterCommit(serviceSends, result, opts.log);
      if (applied + flushed.length > 0) queuedInDatabase();
    },
  };

  return {
    dispatcher,
    webhooks,
    mail,
    receiptSweep,
    retention,
    usageRollup,
    serviceSendSweep,
    lowBalance,
    events,
    async start(startOpts) {
      await opts.carrier.start(events);
      if (startOpts?.loops === false) return;
      // Each round starts calls into the free slots without waiting for them (the pool).
      // A slot that frees while a claim runs is filled by the next round, at once.
      webhookLoop = createWorkerLoop("webhooks", () => webhooks.fill(), { intervalMs: pollMs * 4, log: opts.log, keepNudges: true });
      const paced = pacedRounds(
        () => dispatcher.tick(),
        () => dispatcher.backlogged(),
        opts.dispatcher?.roundGapMs ?? 20,
      );
      dispatchLoops = Array.from({ length: Math.max(1, opts.dispatcher?.loops ?? 2) }, () =>
        createWorkerLoop("dispatcher", paced, { intervalMs: pollMs, log: opts.log }),
      );
      // Not nudged by sends: they look every pollMs whether the dispatcher is behind.
      const backlogLoops = Array.from({ length: Math.max(0, opts.dispatcher?.backlogLoops ?? 2) }, () =>
        createWorkerLoop("dispatcher", () => (dispatcher.backlogged() ? dispatcher.tick() : Promise.resolve(0)), { intervalMs: pollMs, log: opts.log }),
      );
      loops = [
        ...dispatchLoops,
        ...backlogLoops,
        webhookLoop,
        createWorkerLoop("mail", () => mail.tick(), { intervalMs: pollMs * 4, log: opts.log }),
        // Runs again at once while it reads full batches (catching up), else every receiptSweepMs.
        createWorkerLoop("receipt-timeout", () => receiptSweep.tick(), { intervalMs: opts.receiptSweepMs ?? 60_000, log: opts.log }),
        // What a stopped process left in the service sends' outbox, after its grace period.
        createWorkerLoop("service-sends", () => serviceSendSweep.tick(), { intervalMs: opts.serviceSendSweepMs ?? 10_000, log: opts.log }),
        // Crossings are rare and wait at most this long for their webhook to be queued.
        createWorkerLoop("low-balance", () => lowBalance.tick(), { intervalMs: opts.lowBalanceMs ?? 1000, log: opts.log }),
        // A pass drains everything due (batch by batch, paused); the next one comes intervalMs later.
        createWorkerLoop("retention", () => retention.pass().then(() => 0), { intervalMs: opts.retention?.intervalMs ?? 300_000, log: opts.log }),
        // Closed days are rolled up once; a pass finds little to do until the next UTC midnight.
        createWorkerLoop("usage-rollup", () => usageRollup.pass().then(() => 0), { intervalMs: opts.usageRollupMs ?? 600_000, log: opts.log }),
      ];
      for (const l of loops) l.start();
    },
    claims: dispatcher.claims,
    nudge() {
      dispatcher.queued();
      for (const l of dispatchLoops) l.nudge();
    },
    async stop() {
      // A purge pass in progress ends after its current batch.
      retention.stop();
      await Promise.all(loops.map((l) => l.stop()));
      // After the last round: what waits in the hand-off goes back to the queue, for a restart or
      // another process to send at once (a failure here leaves the claims to expire).
      await dispatcher.releaseHandOff().catch((err) => opts.log?.warn({ err }, "could not give back the hand-off's claims: they expire after the claim time"));
      // The submissions still waiting for their reports are written before the carrier stops.
      await dispatcher.held.flush();
      // Webhook calls already started finish (each within its timeout) and are recorded.
      await webhooks.drain();
      loops = [];
      dispatchLoops = [];
      webhookLoop = undefined;
      await opts.carrier.stop();
    },
  };
}

/** Receipt batches written at once, all links together: the pooled connections receipts may hold. */
export const RECEIPT_CONNECTIONS = 1;
/** Most receipts in one batch (one transaction). */
export const RECEIPT_BATCH = 500;
/** Inbound SMS stored at once, all links together: the pooled connections they may hold (PGlite: 1). */
export const INBOUND_CONNECTIONS = 2;
/**
 * On PGlite, after each receipt batch or inbound SMS, how many times its time the next one waits:
 * 1, so that a flood takes at most half of the one connection and the API's queries get the rest
 * (a flood of MO at 1,000/s otherwise held REST sends for seconds; docs/carriers.md).
 */
export const RECEIPT_REST_PGLITE = 1;

/**
 * At most `n` tasks at once; the others wait their turn, in order. With `restFactor`, a slot rests
 * after each task for that many times the task's time before it takes the next: the tasks get at
 * most 1 / (1 + restFactor) of the time, and a task slowed down by other work (the API's queries
 * ahead of it on PGlite's one connection) rests longer, leaving that work more room.
 */
function createSlots(n: number, restFactor = 0): { run<T>(task: () => Promise<T>): Promise<T> } {
  let busy = 0;
  const waiting: (() => void)[] = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else busy--;
  };
  return {
    async run(task) {
      if (busy >= n) await new Promise<void>((r) => waiting.push(r));
      else busy++;
      const started = performance.now();
      try {
        return await task();
      } finally {
        const rest = restFactor * (performance.now() - started);
        if (rest >= 1) setTimeout(release, Math.min(rest, 1000));
        else release();
      }
    },
  };
}

/** The clock and the timer pacedRounds uses (a test passes its own). */
export interface PacingTiming {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const REAL_TIMING: PacingTiming = {
  now: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/**
 * Spaces the starts of rounds shared by several loops at least gapMs apart, unless backlogged()
 * says a round came back full. Each caller reserves the next free start before it waits, so two
 * loops never wake for the same start (they would split one round's messages between them).
 */
export function pacedRounds(tick: () => Promise<number>, backlogged: () => boolean, gapMs: number, timing: PacingTiming = REAL_TIMING): () => Promise<number> {
  let nextStart = 0;
  return async () => {
    const now = timing.now();
    if (gapMs > 0 && !backlogged()) {
      const start = Math.max(now, nextStart);
      nextStart = start + gapMs;
      // A timer counts from the event loop's cached time, which lags performance.now() when the
      // loop is busy, so it can fire early: wait again until the reserved start has come.
      for (let left = start - now; left > 0; left = start - timing.now()) await timing.sleep(Math.ceil(left));
    }
    return tick();
  };
}
