import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Clock } from "../common/clock.js";
import {
  type AwaitingRow,
  listAwaitingReceipt,
  listSubmittedAfter,
  markReceiptTimeouts,
  RECEIPT_TIMEOUT_ERROR,
  type SubmittedKey,
} from "../messaging/message-receipt-store.js";
import { advanceSweepPosition, readSweepPosition } from "./sweep-position-store.js";

/** Index entries the sweep reads per statement: each round is two short statements, whatever the table's size. */
const SWEEP_BATCH = 1000;

/** The receipt-timeout sweep's row in sweep_positions. */
export const SWEEP_NAME = "receipt-timeout";

/** The sweep of messages whose receipt never came. */
export interface ReceiptSweep {
  /**
   * Reads the next batch of messages submitted at or before now − the timeout and gives those still
   * Submitted ErrorCode ReceiptTimeout; returns how many it read when the batch was full (more may
   * be waiting: the loop runs again at once), else 0.
   */
  tick(): Promise<number>;
}

/**
 * Creates the receipt-timeout sweep (issue 27, 9). A message whose delivery report never comes
 * stays Submitted (the carrier may still report it), but gets ErrorCode ReceiptTimeout once
 * timeoutMs has passed since its submission, so that operators can find it. The sweep walks the
 * submitted messages in submission order (messages_submitted_at_idx) from where it stopped: each
 * round reads at most SWEEP_BATCH index entries and updates their Sids by key, so it never holds
 * a send up for long. Where it stopped is kept in the database (sweep_positions), shared by every
 * process and across restarts: a start resumes there, where starting from the index's beginning
 * would walk every message kept (months of them) again. Any number of processes may sweep: the
 * update is conditional, and the position only moves forward.
 */
export function createReceiptSweep(opts: { orm: MikroORM; clock: Clock; timeoutMs: number; log?: Logger; batch?: number }): ReceiptSweep {
  const batch = opts.batch ?? SWEEP_BATCH;
  return {
    async tick() {
      const until = new Date(opts.clock.now().getTime() - opts.timeoutMs);
      const position = (await readSweepPosition(opts.orm.em.fork(), SWEEP_NAME)) ?? { submitted_at: new Date(0), sid: "" };
      const keys = await listSubmittedAfter(opts.orm.em.fork(), position, until, batch);
      if (keys.length === 0) return 0;
      const marked = await markReceiptTimeouts(
        opts.orm.em.fork(),
        keys.map((k) => k.sid),
      );
      const last = keys[keys.length - 1];
      await advanceSweepPosition(opts.orm.em.fork(), SWEEP_NAME, { submitted_at: new Date(last.submitted_at), sid: last.sid });
      if (marked.length > 0) {
        opts.log?.warn(
          { count: marked.length, messageSids: marked.slice(0, 50), errorCode: RECEIPT_TIMEOUT_ERROR, timeoutHours: opts.timeoutMs / 3_600_000 },
          "no delivery report came for these submitted messages within the receipt timeout: they stay Submitted, with ErrorCode ReceiptTimeout",
        );
      }
      return keys.length === batch ? keys.length : 0;
    },
  };
}

/**
 * Every message still Submitted that was submitted after `after` and before `before` (and not yet
 * given up on), page by page: what a restarted simulator still owes a report for.
 */
export async function listAwaitingReports(orm: MikroORM, before: Date, after: Date): Promise<{ messageSid: string; from: string; to: string; text: string }[]> {
  const out: { messageSid: string; from: string; to: string; text: string }[] = [];
  let from: SubmittedKey = { submitted_at: after, sid: "" };
  for (;;) {
    const page: AwaitingRow[] = await listAwaitingReceipt(orm.em.fork(), from, before, SWEEP_BATCH);
    for (const r of page) out.push({ messageSid: r.sid, from: r.sender, to: r.recipient, text: r.text });
    if (page.length < SWEEP_BATCH) return out;
    const last = page[page.length - 1];
    from = { submitted_at: new Date(last.submitted_at), sid: last.sid };
  }
}
