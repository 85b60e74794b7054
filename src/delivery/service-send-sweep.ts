import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Clock } from "../common/clock.js";
import { claimServiceSends, deleteServiceSendsBefore } from "../messaging/service-send-outbox-store.js";
import { pendingOf, sendQueued, type ServiceSendDeps } from "../messaging/service-sends.js";

/**
 * How long after its inbound SMS's commit a service send is left to the process that received it
 * (sendAfterCommit) before the sweep takes it: that process sends it within milliseconds unless it
 * stopped.
 */
export const SERVICE_SEND_GRACE_MS = 30_000;

/**
 * How long the sweep tries a service send that keeps failing (its claims back off from 60 s to 30
 * minutes) before it deletes it, logged as an error: the outbox holds the reply's text, and no row
 * stays longer than this.
 */
export const SERVICE_SEND_GIVE_UP_MS = 24 * 3_600_000;

/** Rows the sweep claims per statement. */
const SWEEP_BATCH = 50;

/** The sweep of the service sends' outbox. */
export interface ServiceSendSweep {
  /**
   * Deletes the rows older than SERVICE_SEND_GIVE_UP_MS, then claims the rows written more than
   * SERVICE_SEND_GRACE_MS ago and sends each (forwardReply, answerKeyword); returns how many it
   * claimed when the batch was full (more may be waiting), else 0.
   */
  tick(): Promise<number>;
}

/**
 * Creates the sweep of the forwards and keyword answers a process accepted with their inbound SMS
 * (service_send_outbox, written in its transaction) and never stored as messages: it stopped
 * between the commit and sendAfterCommit, or the send failed there. Any number of processes may
 * sweep: a claim (SKIP LOCKED, then held for its time) keeps two sweeps off one row, and the
 * transaction that stores the message deletes the row, so a sweep racing the receiving process
 * stores nothing (and gives its admitted quota back). A row whose account is gone is deleted.
 */
export function createServiceSendSweep(opts: {
  orm: MikroORM;
  clock: Clock;
  sends: ServiceSendDeps;
  log?: Logger;
  /** Called when the sweep stored a message due now (the dispatcher claims it). */
  onQueued?: () => void;
  batch?: number;
}): ServiceSendSweep {
  const batch = opts.batch ?? SWEEP_BATCH;
  return {
    async tick() {
      const now = opts.clock.now();
      const gaveUp = await deleteServiceSendsBefore(opts.orm.em.fork(), new Date(now.getTime() - SERVICE_SEND_GIVE_UP_MS));
      for (const r of gaveUp)
        opts.log?.error(
          { outboxId: r.id, kind: r.kind, accountSid: r.account_sid, giveUpHours: SERVICE_SEND_GIVE_UP_MS / 3_600_000 },
          "service send given up: it could not be stored within the give-up time (deleted from the outbox)",
        );
      const rows = await claimServiceSends(opts.orm.em.fork(), { createdBefore: new Date(now.getTime() - SERVICE_SEND_GRACE_MS), now, limit: batch });
      let queued = 0;
      for (const row of rows) {
        const pending = pendingOf(row);
        try {
          const outcome = await sendQueued(opts.sends, pending);
          if (outcome) queued++;
          opts.log?.info(
            {
              outboxId: row.id,
              kind: row.kind,
              accountSid: row.account_sid,
              attempts: row.attempts,
              messageSid: outcome?.messageSid,
              status: outcome?.status,
              errorCode: outcome?.errorCode,
            },
            outcome
              ? "service send left by a process that stopped after its inbound SMS: stored now"
              : "service send left in the outbox: its account is gone or another process stored it",
          );
        } catch (err) {
          opts.log?.error(
            { err, outboxId: row.id, kind: row.kind, accountSid: row.account_sid, attempts: row.attempts },
            "service send not stored: the sweep tries again later",
          );
        }
      }
      if (queued > 0) opts.onQueued?.();
      return rows.length === batch ? rows.length : 0;
    },
  };
}
