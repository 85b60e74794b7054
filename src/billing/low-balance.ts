/**
 * The BalanceLow webhook (docs/billing.md#low-balance): the worker's side. A charge that leaves
 * an armed account below its LowBalanceThreshold records the crossing on the balance row
 * (Pending, in sb_charge's own update: nothing more on the send path); this job takes the
 * Pending rows, queues one signed webhook each through the webhook outbox and marks them Sent in
 * the same transaction. A crash before the commit leaves them Pending for the next round; a row
 * two workers reach at once is taken by the first (the row lock), so each crossing is queued
 * exactly once, and the outbox then delivers it at least once with the same webhook-id.
 */
import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import { type Clock, unixSeconds } from "../common/clock.js";
import { formatMoney } from "../common/money.js";
import { enqueueWebhook } from "../webhooks/outbox.js";
import { type LowBalanceCrossing, lockLowBalanceCrossings, settleLowBalanceCrossings } from "./balance-store.js";

/** Crossings taken per round: each round holds their balance rows' locks for a few statements. */
export const LOW_BALANCE_BATCH = 50;

/** The BalanceLow webhook's body (docs/webhooks.md#balancelow). */
export function balanceLowPayload(c: LowBalanceCrossing, currency: string): Record<string, string | number> {
  return {
    Type: "BalanceLow",
    AccountSid: c.accountSid,
    Balance: formatMoney(c.balance),
    LowBalanceThreshold: c.threshold === null ? "" : formatMoney(c.threshold),
    PriceUnit: currency,
    Timestamp: unixSeconds(c.at),
  };
}

/** The job that queues BalanceLow webhooks; any process may run it (the delivery engine does). */
export interface LowBalanceJob {
  /** Queues the webhooks of the Pending crossings (one batch); returns how many crossings it settled. */
  tick(): Promise<number>;
}

/** Creates the job; `currency` is BILLING_CURRENCY, `onQueued` wakes the webhook sender. */
export function createLowBalanceJob(deps: { orm: MikroORM; clock: Clock; currency: string; log?: Logger; onQueued?: () => void }): LowBalanceJob {
  return {
    async tick() {
      const queued = await deps.orm.em.fork().transactional(async (tx) => {
        const crossings = await lockLowBalanceCrossings(tx, LOW_BALANCE_BATCH);
        let calls = 0;
        for (const c of crossings) {
          // Settings cleared meanwhile (a race with UpdateAccount, which re-arms): nothing to tell.
          if (c.webhookUri === null || c.threshold === null) continue;
          await enqueueWebhook(tx, {
            accountSid: c.accountSid,
            messageSid: null,
            eventType: "BalanceLow",
            url: c.webhookUri,
            method: "POST",
            payload: balanceLowPayload(c, deps.currency),
            now: deps.clock.now(),
          });
          calls++;
        }
        await settleLowBalanceCrossings(
          tx,
          crossings.map((c) => c.accountSid),
        );
        return { crossings: crossings.length, calls };
      });
      if (queued.calls > 0) {
        deps.log?.info({ webhooks: queued.calls }, "BalanceLow webhooks queued");
        deps.onQueued?.();
      }
      return queued.crossings;
    },
  };
}
