/**
 * The usage rollup job (docs/billing.md#usage): sums each account's closed UTC days into
 * usage_days (usage-store.ts), so that a statement of any length reads a few rows per day and
 * survives the retention purge, which deletes the messages.
 *
 * It rolls up closed UTC hours, added to their day's rows, so that what is read live (after the
 * watermark) is at most an hour or two of messages. An hour is closed once it ended more than
 * `settleMs` ago (a send accepted at 10:59:59 may commit a moment later). A message of it still
 * queued may yet be refunded (canceled, QueueTimeout, NoRoute) or get its carrier cost at
 * hand-over, so it is set aside (usage_pending, read live) and added to its day once it has left
 * the queue, after which neither changes again. Each step is one transaction under the account's
 * watermark lock (at most `maxDays` days of messages), so the job is idempotent and resumable: any
 * number of processes may run it, a message is summed once, and a pass stopped halfway goes on
 * from the watermark.
 */
import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Clock } from "../common/clock.js";
import { firstMessageAt, foldPending, lockRollup, rolledUntilOf, rollUpDays, rollupCandidates, type RollupCandidate } from "./usage-store.js";

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/** How long after its end an hour is closed, by default: 15 minutes. */
export const USAGE_SETTLE_MS = 15 * 60_000;

/** The start of the UTC hour at or before `t`. */
export function hourStart(t: Date | number): Date {
  const ms = typeof t === "number" ? t : t.getTime();
  return new Date(ms - (((ms % HOUR_MS) + HOUR_MS) % HOUR_MS));
}

/** The usage rollup. */
export interface UsageRollup {
  /** Rolls up every account's closed hours; how many accounts moved their watermark. */
  pass(): Promise<number>;
  /** Rolls up one account's closed hours; its watermark after (null: it never had one). */
  rollUpAccount(accountSid: string): Promise<Date | null>;
}

/** Creates the usage rollup; `clock` is injectable, `settleMs` defaults to USAGE_SETTLE_MS. */
export function createUsageRollup(opts: { orm: MikroORM; clock: Clock; log?: Logger; settleMs?: number; maxDays?: number }): UsageRollup {
  const settleMs = opts.settleMs ?? USAGE_SETTLE_MS;
  // A day of messages a step: a backlog of months (a first run) is many short transactions, each
  // well within the statement timeout.
  const maxDays = opts.maxDays ?? 1;

  /** The first hour not closed now. */
  const closedBefore = () => hourStart(opts.clock.now().getTime() - settleMs);

  /** Folds a candidate's pending messages that left the queue, and rolls it up to `until`; its watermark. */
  async function rollUp(c: RollupCandidate, until: Date): Promise<Date | null> {
    let watermark = c.rolledUntil;
    for (let first = true; ; first = false) {
      const step = await opts.orm.em.fork().transactional(async (tx) => {
        const w = await lockRollup(tx, c.accountSid);
        if (first) await foldPending(tx, c.accountSid);
        if (w !== null && w.getTime() >= until.getTime()) return { done: true, watermark: w };
        let from = w;
        if (from === null) {
          const first = await firstMessageAt(tx, c.accountSid);
          from = first === null || first >= until ? until : hourStart(first);
        }
        const to = new Date(Math.min(until.getTime(), from.getTime() + maxDays * DAY_MS));
        const rows = await rollUpDays(tx, c.accountSid, from, to);
        if (rows > 0) opts.log?.debug({ accountSid: c.accountSid, from, to, rows }, "usage rolled up");
        return { done: to.getTime() >= until.getTime(), watermark: to };
      });
      watermark = step.watermark;
      if (step.done) return watermark;
    }
  }

  return {
    async pass() {
      const closed = closedBefore();
      const candidates = await rollupCandidates(opts.orm.em.fork(), closed);
      let moved = 0;
      for (const c of candidates) {
        const before = c.rolledUntil?.getTime();
        const after = await rollUp(c, closed);
        if (after?.getTime() !== before) moved++;
      }
      return moved;
    },
    async rollUpAccount(accountSid) {
      const closed = closedBefore();
      const [c] = await rollupCandidates(opts.orm.em.fork(), closed, accountSid);
      if (c) return rollUp(c, closed);
      // Up to date already: its watermark is closedBefore or later.
      return rolledUntilOf(opts.orm.em.fork(), accountSid);
    },
  };
}
