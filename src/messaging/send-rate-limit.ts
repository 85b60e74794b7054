import type { Clock } from "../common/clock.js";
import { apiError } from "../common/errors.js";

/** How fast an account may send: `ratePerSecond` 0 turns the limit off. */
export interface SendRateLimitOptions {
  ratePerSecond: number;
  burst: number;
  clock: Clock;
}

/** Takes send tokens from per-account buckets; throws RateLimited (ResourceExhausted, 429) when there are too few. */
export interface SendRateLimiter {
  /** Charges `cost` messages to the account, or throws without charging anything. */
  take(accountSid: string, cost: number): void;
}

interface Bucket {
  tokens: number;
  /** Clock time (ms) the tokens were counted at. */
  at: number;
}

// Buckets that have refilled to the brim hold no information; past this many accounts they are dropped.
const PRUNE_ABOVE = 10_000;
// Rounding slack, so that 0.2 s × 5/s is one whole token and Retry-After 1.0000001 s is still 1.
const EPSILON = 1e-9;

/**
 * A token bucket per account, in this process's memory: each holds up to `burst` tokens and
 * refills at `ratePerSecond`; a message costs one. A request is let through when the bucket holds
 * its cost, or is full (so a batch larger than the burst still goes, and the debt it leaves delays
 * the next sends). Undefined when the limit is off.
 */
export function createSendRateLimiter(opts: SendRateLimitOptions): SendRateLimiter | undefined {
  const { ratePerSecond: rate, burst, clock } = opts;
  if (!(rate > 0)) return undefined;
  if (!Number.isFinite(rate) || !Number.isInteger(burst) || burst < 1) {
    throw new Error(`send rate limit needs a finite rate and a whole burst of at least 1, got ${rate}/s and ${burst}`);
  }
  const buckets = new Map<string, Bucket>();
  const perMs = rate / 1000;

  function refill(b: Bucket, now: number): void {
    // A clock set back (tests, NTP) refills nothing and restarts the count from now.
    if (now > b.at) b.tokens = Math.min(burst, b.tokens + (now - b.at) * perMs);
    b.at = now;
  }

  function prune(now: number): void {
    for (const [sid, b] of buckets) {
      refill(b, now);
      if (b.tokens >= burst - EPSILON) buckets.delete(sid);
    }
  }

  return {
    take(accountSid, cost) {
      const now = clock.now().getTime();
      let b = buckets.get(accountSid);
      if (!b) {
        if (buckets.size >= PRUNE_ABOVE) prune(now);
        b = { tokens: burst, at: now };
        buckets.set(accountSid, b);
      }
      refill(b, now);
      const needed = Math.min(cost, burst);
      if (b.tokens + EPSILON >= needed) {
        b.tokens -= cost;
        return;
      }
      const seconds = Math.max(1, Math.ceil((needed - b.tokens) / rate - EPSILON));
      const asks = cost === 1 ? "" : ` This request asks for ${cost}.`;
      throw apiError(
        "RateLimited",
        `Too many messages: account ${accountSid} may send ${rate} per second, in bursts of up to ${burst}.${asks} Retry after ${seconds} second${seconds === 1 ? "" : "s"}.`,
        [],
        { "retry-after": String(seconds) },
      );
    },
  };
}
