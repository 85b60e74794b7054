import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import { type Carrier, CarrierError } from "../carriers/carrier.js";
import type { Clock } from "../common/clock.js";
import { applyFinalState } from "./receipts.js";

/** Options of the dispatcher. */
export interface DispatcherOptions {
  orm: MikroORM;
  clock: Clock;
  carrier: Carrier;
  log?: Logger;
  /** Messages claimed per round (default 100). */
  batchSize?: number;
  /** How long a claim lasts before another dispatcher may take the message again (default 60 s). */
  claimMs?: number;
  /** How long temporary carrier errors are retried before the message fails (default 1 hour). */
  retryWindowMs?: number;
}

interface ClaimedRow {
  sid: string;
  sender: string;
  recipient: string;
  text: string;
  delivery_receipt: boolean;
  attempts: number;
  send_at: Date | string;
  scheduled_at: Date | string | null;
  created_at: Date | string;
}

/** Hands due messages to the carrier; any number of dispatchers may share one database. */
export interface Dispatcher {
  /** Claims and submits one batch of due messages; returns how many were claimed. */
  tick(): Promise<number>;
}

/** Delay before retry n (1-based) of a temporary carrier error: 1 s doubling to at most 5 min. */
export function carrierBackoffMs(attempt: number): number {
  return Math.min(300_000, 1000 * 2 ** Math.max(0, attempt - 1));
}

/**
 * Creates a dispatcher. Claiming is one UPDATE over a `FOR UPDATE SKIP LOCKED` subselect, so
 * concurrent dispatchers never claim the same row; the claim sets a deadline after which a
 * crashed dispatcher's messages are claimed again. A canceled message is no longer Scheduled,
 * so it is never claimed; a claimed one is Processing, so it can no longer be canceled.
 */
export function createDispatcher(opts: DispatcherOptions): Dispatcher {
  const batchSize = opts.batchSize ?? 100;
  const claimMs = opts.claimMs ?? 60_000;
  const retryWindowMs = opts.retryWindowMs ?? 3_600_000;

  async function submitOne(row: ClaimedRow): Promise<void> {
    const em = opts.orm.em.fork();
    let carrierRef: string;
    try {
      ({ carrierRef } = await opts.carrier.submit({
        messageSid: row.sid,
        from: row.sender,
        to: row.recipient,
        text: row.text,
        deliveryReceipt: row.delivery_receipt,
      }));
    } catch (err) {
      await carrierRefused(em, row, err);
      return;
    }
    // Outside the try: a database error here is not the carrier's refusal. The claim then expires
    // and the message is taken again (at least once), rather than being failed or retried as a carrier error.
    // The carrier's report may have landed first (the message is already Delivered or Failed):
    // keep that final status, but still record when it was submitted and the carrier's reference.
    await em.execute(
      `update messages
          set status = case when status = 'Processing' then 'Submitted' else status end,
              submitted_at = least(?::timestamptz, delivered_at), carrier_ref = ?, claimed_until = null
        where sid = ? and (status = 'Processing' or (status in ('Delivered', 'Failed') and submitted_at is null))`,
      [opts.clock.now(), carrierRef, row.sid],
    );
  }

  async function carrierRefused(em: ReturnType<MikroORM["em"]["fork"]>, row: ClaimedRow, err: unknown): Promise<void> {
    const now = opts.clock.now();
    const carrierErr = err instanceof CarrierError ? err : new CarrierError(String((err as Error)?.message ?? err), "CarrierError", false);
    // The window runs from when the message was first due: its Schedule, or its creation if later.
    const firstDue = Math.max(new Date(row.created_at).getTime(), row.scheduled_at ? new Date(row.scheduled_at).getTime() : 0);
    const expired = now.getTime() - firstDue >= retryWindowMs;
    if (carrierErr.permanent || expired) {
      opts.log?.warn({ messageSid: row.sid, errorCode: carrierErr.errorCode, attempts: row.attempts }, "message failed at the carrier");
      await applyFinalState(em, { messageSid: row.sid, status: "Failed", errorCode: carrierErr.errorCode, at: now, now });
    } else {
      const retryAt = new Date(now.getTime() + carrierBackoffMs(row.attempts));
      opts.log?.info({ messageSid: row.sid, errorCode: carrierErr.errorCode, retryAt }, "carrier refused for now; will retry");
      await em.execute(
        `update messages set send_at = ?, claimed_until = null, error_code = ? where sid = ? and status = 'Processing'`,
        [retryAt, carrierErr.errorCode, row.sid],
      );
    }
  }


  return {
    async tick() {
      const now = opts.clock.now();
      const em = opts.orm.em.fork();
      const rows = await em.execute<ClaimedRow[]>(
        `update messages m
            set status = 'Processing', claimed_until = ?, attempts = m.attempts + 1
          where m.sid in (
            select sid from messages
             where status in ('Scheduled', 'Processing') and direction = 'Transmit'
               and send_at <= ? and (claimed_until is null or claimed_until < ?)
             order by send_at
             limit ?
             for update skip locked)
        returning m.sid, m.sender, m.recipient, m.text, m.delivery_receipt, m.attempts, m.send_at, m.scheduled_at, m.created_at`,
        [new Date(now.getTime() + claimMs), now, now, batchSize],
      );
      await Promise.all(rows.map((r) => submitOne(r)));
      return rows.length;
    },
  };
}
