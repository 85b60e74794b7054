import type { EntityManager, MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Clock } from "../common/clock.js";
import { listRetentionSettings, type RetentionRow } from "../accounts/account-store.js";
import { deleteEmailsOfMessages, redactEmailsOfMessages } from "../mail/mail-store.js";
import { deleteBatchKeysBefore, deleteKeysOfMessages } from "../messaging/idempotency-key-store.js";
import { claimExpiredMessages, deleteMessages, redactExpiredTexts } from "../messaging/message-retention-store.js";
import { deleteAccountCallsWithoutMessage, deleteWebhookDeliveriesOfMessages, redactWebhookPayloadsOfMessages } from "../webhooks/webhook-store.js";
import { deleteSegmentsOfMessages } from "./segment-store.js";
import { createUsageRollup, type UsageRollup } from "../billing/usage-rollup.js";
import { deleteInboundTextsOfAccount, deleteInboundTextsOfNoAccount, type InboundTextTable, redactUnmatchedOfAccount } from "./unmatched-inbound-store.js";

/** The tables of inbound texts no message owns (unmatched_inbound, inbound_parts), which retention covers too. */
const INBOUND_TEXT_TABLES: InboundTextTable[] = ["unmatched_inbound", "inbound_parts"];

const DAY_MS = 86_400_000;
/** A long drain logs its progress every this many batches. */
const PROGRESS_BATCHES = 100;

/** Options of createRetentionPurge (docs/configuration.md#retention). */
export interface RetentionOptions {
  orm: MikroORM;
  clock: Clock;
  /** MESSAGE_RETENTION_DAYS: days a message is kept when its account sets none; null keeps them. */
  defaultDays: number | null;
  /** Messages per statement (default 1000). */
  batch?: number;
  /** Pause between two batches, ms (default 100). */
  pauseMs?: number;
  log?: Logger;
  /** Waits between batches (a test passes its own). */
  sleep?: (ms: number) => Promise<void>;
  /** The usage rollup run before an account's messages are deleted (default: one on `orm` and `clock`). */
  usage?: UsageRollup;
}

/** What one pass (or the process so far) deleted and redacted. */
export interface PurgeCounts {
  /** Messages deleted. */
  purged: number;
  /** Messages whose text was emptied. */
  redacted: number;
  /** Webhook calls, e-mails and Idempotency-Keys deleted with the messages. */
  webhooks: number;
  emails: number;
  keys: number;
}

/** The purge of old messages and texts. */
export interface RetentionPurge {
  /** One pass over every account with a retention or redaction setting; resolves once it caught up or stop() was called. */
  pass(): Promise<PurgeCounts>;
  /** Totals of this process since it started, for /metrics. */
  totals(): Readonly<PurgeCounts>;
  /** Makes the pass in progress end after its current batch. */
  stop(): void;
}

const zero = (): PurgeCounts => ({ purged: 0, redacted: 0, webhooks: 0, emails: 0, keys: 0 });

/**
 * Creates the retention purge (issue 33; the contract's "Retention and redaction"). A pass walks each property of the accounts
 * concerned: it deletes messages created more than RetentionDays (the account's, else
 * MESSAGE_RETENTION_DAYS) ago, with their webhook calls and attempts, e-mails, carrier segments and
 * Idempotency-Keys, then empties the text of those older than RedactAfterDays (and its copies: the
 * Text of a reply's Response webhook, the body of its forwarding e-mail). The inbound texts no
 * message owns follow the same settings: an SMS kept in unmatched_inbound and the parts of an
 * unfinished inbound SMS (inbound_parts) are the account's when sent to a number it owns or
 * between the ends of one of its leases (deleted after its RetentionDays, the SMS emptied and the
 * parts deleted after RedactAfterDays), else nobody's (deleted after MESSAGE_RETENTION_DAYS). Only settled
 * messages (Delivered, Failed, Canceled, Received, no webhook or e-mail still pending) are touched:
 * a queued or in-flight message stays whatever its age. Before an account's messages are deleted
 * its usage is rolled up (billing/usage-rollup.ts): a message whose usage is not summed yet is kept.
 *
 * Work is claimed row by row: each batch is one transaction that locks its messages `for update skip
 * locked`, so any number of processes may run the purge at once and none takes rows another holds
 * (an advisory lock per pass would serialize them instead, and leave the work undone while its holder
 * is slow). Batches are small (PURGE_BATCH_SIZE) with a pause between them (PURGE_PAUSE_MS): each
 * holds its locks and a connection for a few milliseconds only, so sends and the dispatcher keep
 * their latency while a backlog of millions of rows drains.
 */
export function createRetentionPurge(opts: RetentionOptions): RetentionPurge {
  const batch = opts.batch ?? 1000;
  const pauseMs = opts.pauseMs ?? 100;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const total = zero();
  let stopping = false;
  const usage = opts.usage ?? createUsageRollup({ orm: opts.orm, clock: opts.clock, log: opts.log });

  /** Deletes one batch of a property's expired messages and what hangs off them; how many messages. */
  async function purgeBatch(propertySid: string, before: Date, counts: PurgeCounts): Promise<number> {
    return opts.orm.em.fork().transactional(async (tx) => {
      const sids = await claimExpiredMessages(tx, propertySid, before, batch);
      if (sids.length === 0) return 0;
      // Each table's rows by its own store; the foreign keys are checked at commit.
      counts.webhooks += await deleteWebhookDeliveriesOfMessages(tx, sids);
      counts.emails += await deleteEmailsOfMessages(tx, sids);
      counts.keys += await deleteKeysOfMessages(tx, sids);
      await deleteSegmentsOfMessages(tx, sids);
      const deleted = await deleteMessages(tx, sids);
      counts.purged += deleted;
      return sids.length;
    });
  }

  /** Empties the texts of one batch of a property's messages, with the copies in their Response webhooks and e-mails; how many. */
  async function redactBatch(propertySid: string, before: Date, counts: PurgeCounts): Promise<number> {
    return opts.orm.em.fork().transactional(async (tx) => {
      const sids = await redactExpiredTexts(tx, propertySid, before, batch);
      if (sids.length === 0) return 0;
      await redactWebhookPayloadsOfMessages(tx, sids);
      await redactEmailsOfMessages(tx, sids);
      counts.redacted += sids.length;
      return sids.length;
    });
  }

  /** Unmatched inbound SMS and inbound parts deleted or emptied by the pass in progress (logged). */
  let inbound = 0;

  /** One batch of an inbound-text statement in its own transaction; how many rows. */
  function inboundBatch(run: (tx: EntityManager) => Promise<number>): () => Promise<number> {
    return async () => {
      const n = await opts.orm.em.fork().transactional(run);
      inbound += n;
      return n;
    };
  }

  /** Runs `step` until it returns less than a full batch (or the purge stops), pausing between batches. */
  async function drain(step: () => Promise<number>, what: string, propertySid: string): Promise<void> {
    let done = 0;
    for (let batches = 1; !stopping; batches++) {
      const n = await step();
      done += n;
      if (n < batch) return;
      // Progress of a long backlog, every PROGRESS_BATCHES batches.
      if (batches % PROGRESS_BATCHES === 0) opts.log?.info({ propertySid, [what]: done }, `retention: ${what} so far`);
      if (pauseMs > 0) await sleep(pauseMs);
    }
  }

  async function passOver(accountSid: string, rows: RetentionRow[], now: Date, counts: PurgeCounts): Promise<void> {
    const { retention_days: retentionDays, redact_after_days: redactDays } = rows[0];
    const days = retentionDays ?? opts.defaultDays;
    if (days !== null) {
      const before = new Date(now.getTime() - days * DAY_MS);
      // Usage statements outlive the messages (docs/billing.md#usage): the account's closed hours are
      // rolled up first, and a message not summed yet (after the watermark, or pending) is kept.
      const rolledUntil = (await usage.rollUpAccount(accountSid))?.getTime() ?? -Infinity;
      const purgeBefore = new Date(Math.min(before.getTime(), rolledUntil));
      for (const r of rows) await drain(() => purgeBatch(r.property_sid, purgeBefore, counts), "purged", r.property_sid);
      if (!stopping) counts.keys += await deleteBatchKeysBefore(opts.orm.em.fork(), accountSid, before);
      // The account's calls of no message (BalanceLow, docs/billing.md#low-balance) age out with its messages.
      await drain(
        () =>
          opts.orm.em.fork().transactional(async (tx) => {
            const n = await deleteAccountCallsWithoutMessage(tx, accountSid, before, batch);
            counts.webhooks += n;
            return n;
          }),
        "webhooks",
        accountSid,
      );
      for (const table of INBOUND_TEXT_TABLES)
        await drain(
          inboundBatch((tx) => deleteInboundTextsOfAccount(tx, table, accountSid, before, batch)),
          table,
          accountSid,
        );
    }
    if (redactDays !== null && !stopping) {
      const before = new Date(now.getTime() - redactDays * DAY_MS);
      for (const r of rows) await drain(() => redactBatch(r.property_sid, before, counts), "redacted", r.property_sid);
      // Batch-send keys hold their responses' texts; past RedactAfterDays they have long expired.
      if (!stopping) counts.keys += await deleteBatchKeysBefore(opts.orm.em.fork(), accountSid, before);
      await drain(
        inboundBatch((tx) => redactUnmatchedOfAccount(tx, accountSid, before, batch)),
        "unmatched_inbound",
        accountSid,
      );
      // A part is nothing without the rest: past RedactAfterDays it goes.
      await drain(
        inboundBatch((tx) => deleteInboundTextsOfAccount(tx, "inbound_parts", accountSid, before, batch)),
        "inbound_parts",
        accountSid,
      );
    }
  }

  return {
    async pass() {
      stopping = false;
      const started = Date.now();
      const now = opts.clock.now();
      const counts = zero();
      inbound = 0;
      const rows = await listRetentionSettings(opts.orm.em.fork(), opts.defaultDays !== null);
      const byAccount = new Map<string, RetentionRow[]>();
      for (const r of rows) {
        const list = byAccount.get(r.account_sid);
        if (list) list.push(r);
        else byAccount.set(r.account_sid, [r]);
      }
      try {
        for (const [accountSid, accountRows] of byAccount) {
          if (stopping) break;
          const before = { ...counts };
          await passOver(accountSid, accountRows, now, counts);
          if (counts.purged > before.purged || counts.redacted > before.redacted) {
            opts.log?.info(
              { accountSid, purged: counts.purged - before.purged, redacted: counts.redacted - before.redacted },
              "retention: old messages of an account purged or redacted",
            );
          }
        }
        // The inbound texts of no account: MESSAGE_RETENTION_DAYS, when set.
        if (opts.defaultDays !== null) {
          const before = new Date(now.getTime() - opts.defaultDays * DAY_MS);
          for (const table of INBOUND_TEXT_TABLES)
            await drain(
              inboundBatch((tx) => deleteInboundTextsOfNoAccount(tx, table, before, batch)),
              table,
              "",
            );
        }
      } finally {
        for (const k of Object.keys(total) as (keyof PurgeCounts)[]) total[k] += counts[k];
      }
      if (counts.purged + counts.redacted + counts.keys + inbound > 0) {
        opts.log?.info({ ...counts, inbound, ms: Date.now() - started, stopped: stopping }, "retention pass done");
      }
      return counts;
    },
    totals: () => total,
    stop() {
      stopping = true;
    },
  };
}
