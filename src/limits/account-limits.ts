import { apiError, serviceUnavailable } from "../common/errors.js";
import { unreachableOf } from "../common/unreachable.js";
import { defaultSendBurst } from "../config.js";
import type { BucketSpec, SharedAllowance } from "./shared-allowance.js";

/**
 * The limits of docs/limits.md as buckets of the shared allowance: their keys, how each is counted
 * and taken, and the refusals. Every limit here holds for the deployment: the buckets are shared by
 * every process (PostgreSQL or Redis), and each process takes them in blocks.
 */

/** An account's limits as the send pipeline sees them (the account row; null: default or none; a double column may be its text). */
export interface AccountLimitFields {
  sid: string;
  sendRatePerSecond?: number | string | null;
  sendRateBurst?: number | null;
  dailySegmentQuota?: number | null;
}

/** The deployment's default request rate (SEND_RATE_LIMIT, SEND_RATE_BURST): 0 turns it off. */
export interface DefaultSendRate {
  ratePerSecond: number;
  burst: number;
}

// A block is a share of the bucket so small that what one process holds unspent hardly moves
// another's count (well within 10 %), yet large enough that a busy process asks the store
// a few times per second at most.
const BLOCK_SHARE = 0.05;
// Held tokens go back after this long: at the next group commit they are spent, or returned.
const HOLD_MS = 1000;

/** The request rate's bucket of an account, in segments: undefined when the limit is off. */
export function requestRateSpec(account: AccountLimitFields, defaults: DefaultSendRate): BucketSpec | undefined {
  // Number(): a double column may come back as its text.
  const rate = account.sendRatePerSecond != null ? Number(account.sendRatePerSecond) : defaults.ratePerSecond;
  if (!(rate > 0)) return undefined;
  const burst = account.sendRateBurst ?? (account.sendRatePerSecond != null ? defaultSendBurst(rate) : defaults.burst);
  return { rate, burst, block: Math.floor(burst * BLOCK_SHARE), holdMs: HOLD_MS };
}

/** Ms from `nowMs` to the next UTC midnight. */
export function msToUtcMidnight(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) - nowMs;
}

const QUOTA_PREFIX = "quota:";

/** The key of an account's quota bucket for the UTC day of `nowMs`. */
export function quotaKey(accountSid: string, nowMs: number): string {
  return `${QUOTA_PREFIX}${accountSid}:${new Date(nowMs).toISOString().slice(0, 10)}`;
}

/** Whether a bucket is a daily quota (kept in the database even with Redis: limits-store.ts). */
export function isQuotaKey(key: string): boolean {
  return key.startsWith(QUOTA_PREFIX);
}

/** The quota's bucket of the UTC day of `nowMs`: undefined when the account has no quota. */
export function quotaSpec(account: AccountLimitFields, nowMs: number): BucketSpec | undefined {
  const quota = account.dailySegmentQuota;
  if (quota == null) return undefined;
  // Blocks of 1 %; near the quota's end the allowance takes none (shared-allowance.ts END_BLOCKS),
  // so the send that would pass it is the one refused, whichever process it reaches.
  return { rate: 0, burst: quota, block: Math.floor(quota * 0.01), holdMs: HOLD_MS, expiresMs: nowMs + msToUtcMidnight(nowMs) };
}

/** An account's dispatch rate (MessagesPerSecond): one second's worth of burst, taken exactly (no block) once per dispatcher round. */
export function dispatchRateSpec(messagesPerSecond: number): BucketSpec {
  return { rate: messagesPerSecond, burst: Math.max(1, messagesPerSecond), block: 0, holdMs: HOLD_MS };
}

/**
 * A carrier's Tps for the deployment: a burst of a fiftieth of a second, so that no second sees more
 * than 5 % above it even with the jitter between a start and the SMSC reading the PDU.
 */
export function carrierTpsSpec(tps: number): BucketSpec {
  const burst = Math.max(1, Math.ceil(tps * 0.02));
  return { rate: tps, burst, block: burst, holdMs: 200 };
}

/** Gives back the quota of a send not stored after all: its segments, counted only if a quota was charged. */
export type Admitted = (segments: () => number) => void;

/** What a send no quota was charged for gives back: nothing. */
export const NOT_CHARGED: Admitted = () => undefined;

/** How the admit step counts a send: the rate and quota buckets, charged once per request. */
export interface AdmitLimits {
  /**
   * Charges the send's segments (counted only when a limit applies) to the account's request rate,
   * then to its quota: throws RateLimited or QuotaExceeded (429 with Retry-After) without charging
   * the quota, or ServiceUnavailable when the shared store cannot be reached (never an unlimited
   * pass). Returns what gives back the quota if the send is not stored after all.
   */
  admit(account: AccountLimitFields, segments: () => number): Promise<Admitted>;
}

/** Creates the admit step's limits over the process's shared allowance. */
export function createAdmitLimits(allowance: SharedAllowance, defaults: DefaultSendRate, now: () => number, counters?: LimitCounters): AdmitLimits {
  async function take(key: string, cost: number, spec: BucketSpec) {
    try {
      return await allowance.take(key, cost, spec);
    } catch (err) {
      // Named: the database, its connection pool, or Redis (any other failure of the database's store is the database).
      throw serviceUnavailable(unreachableOf(err) ?? "database");
    }
  }
  return {
    async admit(account, segmentsOf) {
      const rate = requestRateSpec(account, defaults);
      const t = now();
      const quota = quotaSpec(account, t);
      if (!rate && !quota) return NOT_CHARGED;
      const segments = segmentsOf();
      if (rate) {
        // A send larger than the burst goes on a full bucket, and the debt it leaves delays the next.
        const got = await take(`rate:${account.sid}`, segments, rate);
        if (!got.ok) {
          counters?.refused(account.sid, "RateLimited");
          const seconds = Math.max(1, Math.ceil(got.retryAfterMs / 1000 - 1e-9));
          const asks = segments === 1 ? "" : ` This request asks for ${segments}.`;
          throw apiError(
            "RateLimited",
            `Too many messages: account ${account.sid} may send ${rate.rate} per second, in bursts of up to ${rate.burst}.${asks} Retry after ${seconds} second${seconds === 1 ? "" : "s"}.`,
            [],
            { "retry-after": String(seconds) },
          );
        }
      }
      if (!quota) return NOT_CHARGED;
      const key = quotaKey(account.sid, t);
      const got = await take(key, segments, quota);
      if (!got.ok) {
        counters?.refused(account.sid, "QuotaExceeded");
        const seconds = Math.max(1, Math.ceil(msToUtcMidnight(t) / 1000));
        throw apiError(
          "QuotaExceeded",
          `Daily quota reached: account ${account.sid} may send ${quota.burst} segments per UTC day; this request needs ${segments}. Retry after ${seconds} seconds (the next UTC midnight).`,
          [],
          { "retry-after": String(seconds) },
        );
      }
      return (n) => allowance.giveBack(key, n(), quota);
    },
  };
}

/** Today's use of an account's quota (segments), for the operator; 0 without a quota. */
export async function quotaUsedToday(allowance: SharedAllowance, account: AccountLimitFields, nowMs: number): Promise<number> {
  const spec = quotaSpec(account, nowMs);
  if (!spec) return 0;
  const left = await allowance.peek(quotaKey(account.sid, nowMs), spec);
  return Math.max(0, Math.round(spec.burst - left));
}

/** What the limits did per account in this process, for the metrics (docs/operations.md#metrics). */
export interface LimitCounters {
  /** A send refused by the request rate (RateLimited) or the quota (QuotaExceeded). */
  refused(accountSid: string, reason: "RateLimited" | "QuotaExceeded"): void;
  /** Messages a dispatcher round gave back to the queue (MessagesPerSecond) and failed QueueTimeout. */
  paced(accountSid: string, throttled: number, timedOut: number): void;
  /** The totals since the process started, per account. */
  totals(): Map<string, { rateLimited: number; quotaExceeded: number; throttled: number; queueTimeouts: number }>;
}

/** Counters kept in memory; past `maxAccounts` accounts, new ones are not counted (the metric's labels stay bounded). */
export function createLimitCounters(maxAccounts = 10_000): LimitCounters {
  const byAccount = new Map<string, { rateLimited: number; quotaExceeded: number; throttled: number; queueTimeouts: number }>();
  const of = (sid: string) => {
    let c = byAccount.get(sid);
    if (!c && byAccount.size < maxAccounts) byAccount.set(sid, (c = { rateLimited: 0, quotaExceeded: 0, throttled: 0, queueTimeouts: 0 }));
    return c;
  };
  return {
    refused(sid, reason) {
      const c = of(sid);
      if (c && reason === "RateLimited") c.rateLimited++;
      else if (c) c.quotaExceeded++;
    },
    paced(sid, throttled, timedOut) {
      const c = of(sid);
      if (!c) return;
      c.throttled += throttled;
      c.queueTimeouts += timedOut;
    },
    totals: () => byAccount,
  };
}
