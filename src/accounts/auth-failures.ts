// The two modules used, not the package's index: that loads every store it supports (Redis,
// Mongo, SQL, ...), ~1.1 MiB more heap in every process.
import RateLimiterMemory from "rate-limiter-flexible/lib/RateLimiterMemory.js";
import RateLimiterRes from "rate-limiter-flexible/lib/RateLimiterRes.js";
import type { Clock } from "../common/clock.js";
import { createBoundedMemo } from "../common/bounded-memo.js";
import { apiError } from "../common/errors.js";
import type { AuthFailureLimits } from "../config.js";

/** An attempt counted before its credential is checked. */
export interface AuthAttempt {
  /** The credential was right: the attempt no longer counts. */
  succeeded(): void;
}

/**
 * The limit on guessing credentials (docs/reliability.md, "Hostile clients"). Attempts are counted
 * before their credential is checked, so that concurrent guesses cannot all get in before the
 * count says stop; a right credential takes its count back. Past the limit, attempts get 429
 * RateLimited without their credential being checked, until the window ends.
 */
export interface AuthFailureGuard {
  /** Synchronous, for every authenticated call: throws 429 when the address, or the account (from an address not known good for it), is blocked. */
  admit(address: string, accountSid?: string): void;
  /** Counts an attempt about to be checked; throws 429 (nothing checked) when it is one too many. */
  attempt(address: string, accountSid?: string): Promise<AuthAttempt>;
  /** A right credential for the account came from the address: the account's limit no longer applies to that address. */
  trust(address: string, accountSid: string): void;
}

// Accounts whose known-good addresses are remembered (the oldest half is forgotten past this), and addresses per account.
const TRUSTED_ACCOUNTS_MAX = 10_000;
const TRUSTED_ADDRESSES_PER_ACCOUNT = 64;
// A blocked map this large is pruned of ended blocks before it grows further.
const PRUNE_ABOVE = 10_000;

/**
 * Creates the guard, undefined when both limits are off. The counts are rate-limiter-flexible's
 * (its memory store: per process, so N API processes allow N times the failures; its Redis and
 * PostgreSQL stores take the same calls). The window is taken from the injected clock and is part
 * of the key, so time in tests is the clock's; the store's own expiry only drops old windows.
 * Which keys are blocked is also kept here, so that the check every call makes is a map lookup.
 */
export function createAuthFailureGuard(limits: AuthFailureLimits, clock: Clock): AuthFailureGuard | undefined {
  const { perAddress, perAccount, windowMs } = limits;
  if (!(perAddress > 0) && !(perAccount > 0)) return undefined;
  if (!Number.isSafeInteger(windowMs) || windowMs < 1000) throw new Error(`the authentication failure window must be at least one second, got ${windowMs} ms`);
  const duration = Math.ceil(windowMs / 1000);
  const byAddress = perAddress > 0 ? new RateLimiterMemory({ keyPrefix: "auth-address", points: perAddress, duration }) : undefined;
  const byAccount = perAccount > 0 ? new RateLimiterMemory({ keyPrefix: "auth-account", points: perAccount, duration }) : undefined;
  /** Address or AccountSid → end of the window it is blocked in (clock ms). */
  const blockedAddresses = new Map<string, number>();
  const blockedAccounts = new Map<string, number>();
  const trusted = createBoundedMemo<string, Set<string>>(TRUSTED_ACCOUNTS_MAX);

  const isTrusted = (address: string, sid: string) => trusted.get(sid)?.has(address) === true;

  function blockedUntil(blocked: Map<string, number>, key: string, now: number): number | undefined {
    const until = blocked.get(key);
    if (until === undefined) return undefined;
    if (until > now) return until;
    blocked.delete(key);
    return undefined;
  }

  function block(blocked: Map<string, number>, key: string, until: number, now: number): void {
    if (blocked.size >= PRUNE_ABOVE) for (const [k, end] of blocked) if (end <= now) blocked.delete(k);
    blocked.set(key, until);
  }

  function tooMany(who: string, until: number, now: number) {
    const seconds = Math.max(1, Math.ceil((until - now) / 1000));
    return apiError("RateLimited", `Too many failed authentications ${who}. Retry after ${seconds} second${seconds === 1 ? "" : "s"}.`, [], {
      "retry-after": String(seconds),
    });
  }

  function admit(address: string, accountSid?: string): void {
    if (blockedAddresses.size === 0 && blockedAccounts.size === 0) return;
    const now = clock.now().getTime();
    const a = blockedUntil(blockedAddresses, address, now);
    if (a !== undefined) throw tooMany("from your address", a, now);
    if (accountSid === undefined || blockedAccounts.size === 0) return;
    const s = blockedUntil(blockedAccounts, accountSid, now);
    if (s !== undefined && !isTrusted(address, accountSid)) throw tooMany(`for account ${accountSid}`, s, now);
  }

  /** Counts one point on `key`: "over" when that is one too many, "last" when it used up the window's points. */
  async function take(limiter: RateLimiterMemory, key: string): Promise<"over" | "last" | "ok"> {
    try {
      const res = await limiter.consume(key);
      return res.remainingPoints === 0 ? "last" : "ok";
    } catch (e) {
      if (e instanceof RateLimiterRes) return "over";
      throw e;
    }
  }

  return {
    admit,
    async attempt(address, accountSid) {
      admit(address, accountSid);
      const now = clock.now().getTime();
      const window = Math.floor(now / windowMs);
      const end = (window + 1) * windowMs;
      const counted: (() => void)[] = [];
      const refund = () => {
        for (const undo of counted) undo();
      };
      /** Counts the attempt on one limiter; throws 429 when it is one too many. */
      const count = async (limiter: RateLimiterMemory, blocked: Map<string, number>, id: string, who: string) => {
        const key = `${window}:${id}`;
        const taken = await take(limiter, key);
        if (taken === "over") {
          // Not checked, so not a failure of anything counted before.
          refund();
          block(blocked, id, end, now);
          throw tooMany(who, end, now);
        }
        // The last point: every other attempt is refused from now on (a cached credential
        // included), unless this one turns out right.
        if (taken === "last") block(blocked, id, end, now);
        counted.push(() => {
          void limiter.reward(key);
          if (taken === "last" && blocked.get(id) === end) blocked.delete(id);
        });
      };
      if (byAddress) await count(byAddress, blockedAddresses, address, "from your address");
      if (byAccount && accountSid !== undefined && !isTrusted(address, accountSid)) {
        await count(byAccount, blockedAccounts, accountSid, `for account ${accountSid}`);
      }
      return { succeeded: refund };
    },
    trust(address, accountSid) {
      let addresses = trusted.get(accountSid);
      if (addresses?.has(address)) return;
      if (!addresses) trusted.set(accountSid, (addresses = new Set()));
      if (addresses.size < TRUSTED_ADDRESSES_PER_ACCOUNT) addresses.add(address);
    },
  };
}
