import type { Clock } from "../common/clock.js";
import { type BucketAnswer, type BucketRequest, type BucketStore, PartialTakeError } from "./bucket-store.js";

/**
 * Allowances in blocks (docs/limits.md): a process takes tokens from the shared buckets a block at
 * a time and spends them locally, so the hot path asks the store at most once per gathering, not
 * once per request. Every take that finds too few tokens held waits for the next call to the store,
 * which serves all the takes waiting at that moment, of every bucket, in one call (as the send
 * pipeline's group commit gathers sends); one call at a time. Tokens held longer than the bucket's
 * `holdMs` are given back (with the next call for their bucket, or by the sweep), so a process that
 * stopped sending does not sit on another process's share.
 */

/** How one bucket is counted and taken. */
export interface BucketSpec {
  /** Tokens per second; 0: never refills (a daily quota). */
  rate: number;
  burst: number;
  /** Tokens taken beyond the need, for the takes to come (0: exactly the need). */
  block: number;
  /** How long held tokens may be spent here before they are given back, ms. */
  holdMs: number;
  /** A bucket that never refills: when its row may go (ms). */
  expiresMs?: number;
}

/** A take's answer: granted, or refused with the time until the bucket could hold it. */
export type Taken = { ok: true } | { ok: false; retryAfterMs: number };

/** Takes tokens of shared buckets in blocks. */
export interface SharedAllowance {
  readonly store: BucketStore;
  /** Takes `cost` tokens (all or nothing) of bucket `key`; rejects when the store cannot be reached. */
  take(key: string, cost: number, spec: BucketSpec): Promise<Taken>;
  /** Takes up to `cost` tokens, as many as the bucket holds now (0 when none): for a dispatcher round. */
  takeUpTo(key: string, cost: number, spec: BucketSpec): Promise<number>;
  /** Gives tokens back to the bucket (a refused send's quota), with the next call. */
  giveBack(key: string, tokens: number, spec: BucketSpec): void;
  /** What the bucket holds now, shared and here (without taking): a quota's remainder for the operator. */
  peek(key: string, spec: BucketSpec): Promise<number>;
  /** Gives back every token held and stops the sweep. */
  close(): Promise<void>;
}

interface Held {
  /** Tokens this process may spend, until `until` (clock ms). */
  tokens: number;
  until: number;
  /** Tokens held past their time, given back with the next call. */
  toReturn: number;
  spec: BucketSpec;
  /** The tokens the bucket held after the last call (undefined before one). */
  lastTokens?: number;
}

interface Waiter {
  key: string;
  cost: number;
  /** Takes less than the cost when that is all there is. */
  partial: boolean;
  spec: BucketSpec;
  resolve(granted: number, retryAfterMs: number): void;
  reject(err: unknown): void;
}

/** A bucket that never refills is taken without a block once it holds fewer than this many blocks. */
const END_BLOCKS = 20;

/** Options of createSharedAllowance. */
export interface SharedAllowanceOptions {
  store: BucketStore;
  clock: Clock;
  /** How often held tokens past their time are given back, ms (default 500). */
  sweepMs?: number;
  /** How often the store's empty rows are deleted, ms (default 5 minutes). */
  storeSweepMs?: number;
  onError?: (err: unknown) => void;
}

/** Creates the allowance of one process over a bucket store. */
export function createSharedAllowance(opts: SharedAllowanceOptions): SharedAllowance {
  const { store, clock } = opts;
  const held = new Map<string, Held>();
  let waiting: Waiter[] = [];
  let running: Promise<void> | undefined;
  let lastStoreSweep = clock.now().getTime();
  const storeSweepMs = opts.storeSweepMs ?? 300_000;

  function heldOf(key: string, spec: BucketSpec): Held {
    let h = held.get(key);
    if (!h) held.set(key, (h = { tokens: 0, until: 0, toReturn: 0, spec }));
    h.spec = spec;
    return h;
  }

  /** The held tokens still spendable now; those past their time move to toReturn. */
  function fresh(h: Held, now: number): number {
    if (h.tokens > 0 && h.until <= now) {
      h.toReturn += h.tokens;
      h.tokens = 0;
    }
    return h.tokens;
  }

  function enqueue(w: Waiter): void {
    waiting.push(w);
    running ??= run().finally(() => (running = undefined));
  }

  /** Calls the store for everything waiting, until nothing is. */
  async function run(): Promise<void> {
    // The takes made in the same turn of the event loop (a group commit's sends, a round's
    // accounts) go in the first call together.
    await null;
    while (waiting.length > 0) {
      const batch = waiting;
      waiting = [];
      const now = clock.now().getTime();
      const byKey = new Map<string, Waiter[]>();
      for (const w of batch) byKey.set(w.key, [...(byKey.get(w.key) ?? []), w]);
      const keys = [...byKey.keys()];
      const requests: BucketRequest[] = [];
      // Kept across the call: the sweep may drop an empty entry from the map meanwhile.
      const helds = keys.map((key) => heldOf(key, byKey.get(key)![0].spec));
      for (const [i, key] of keys.entries()) {
        const ws = byKey.get(key)!;
        const h = helds[i];
        const have = fresh(h, now);
        const takers = ws.filter((w) => w.cost > 0);
        const need = takers.reduce((n, w) => n + w.cost, 0) - have;
        const gives = ws.filter((w) => w.cost < 0).reduce((n, w) => n - w.cost, 0);
        // Gives and stale tokens are netted into the one request of this bucket.
        const back = h.toReturn + gives;
        // A bucket that never refills (a quota) is taken exactly near its end: a block held here
        // would refuse another process's send that the quota still allows.
        const block = h.spec.rate > 0 || (h.lastTokens ?? 0) >= END_BLOCKS * h.spec.block ? h.spec.block : 0;
        // A take larger than the burst is granted only whole, on a full bucket (leaving a debt):
        // then the call asks for exactly what is waiting, all or nothing.
        const oversized = takers.some((w) => !w.partial && w.cost > h.spec.burst);
        const want = need > 0 ? need + (oversized ? 0 : block) : 0;
        const smallest = takers.length === 0 ? 0 : Math.min(...takers.map((w) => (w.partial ? 1 : w.cost)));
        const least = oversized ? want : Math.max(0, smallest - have);
        requests.push({ key, rate: h.spec.rate, burst: h.spec.burst, want: want - back, least: Math.max(0, least - back), expiresMs: h.spec.expiresMs });
      }
      let answers: readonly (BucketAnswer | undefined)[];
      let reasons: readonly unknown[] = [];
      try {
        answers = await store.take(requests, now);
      } catch (err) {
        if (!(err instanceof PartialTakeError)) {
          for (const w of batch) w.reject(err);
          continue;
        }
        // Buckets in two stores, one unreachable: the answered ones count, the others' takes fail.
        ({ answers, reasons } = err);
      }
      keys.forEach((key, i) => {
        const h = helds[i];
        if (held.get(key) !== h) held.set(key, h);
        const r = requests[i];
        const a = answers[i];
        if (!a) {
          // Nothing moved in that store: what was to be given back still is.
          for (const w of byKey.get(key)!) w.reject(reasons[i]);
          return;
        }
        const gives = byKey
          .get(key)!
          .filter((w) => w.cost < 0)
          .reduce((n, w) => n - w.cost, 0);
        const back = h.toReturn + gives;
        h.lastTokens = a.tokens;
        // Nothing granted for a positive net ask: nothing moved in the store, the tokens to give back included.
        if (a.granted === 0 && r.want > 0) h.toReturn = back;
        else {
          const got = a.granted + back;
          h.toReturn = 0;
          if (got > 0) {
            h.tokens += got;
            h.until = now + h.spec.holdMs;
          }
        }
        for (const w of byKey.get(key)!) {
          if (w.cost <= 0) {
            w.resolve(0, 0);
            continue;
          }
          if (h.tokens >= w.cost) {
            h.tokens -= w.cost;
            w.resolve(w.cost, 0);
          } else if (w.partial && h.tokens >= 1) {
            const n = Math.floor(h.tokens);
            h.tokens -= n;
            w.resolve(n, 0);
          } else {
            // A take larger than the burst waits for a full bucket.
            const short = Math.min(w.cost, h.spec.burst) - h.tokens - a.tokens;
            const retryAfterMs =
              h.spec.rate > 0 ? Math.max(1, Math.ceil((Math.max(0, short) * 1000) / h.spec.rate)) : Math.max(0, (h.spec.expiresMs ?? now) - now);
            w.resolve(0, retryAfterMs);
          }
        }
      });
    }
  }

  function ask(key: string, cost: number, partial: boolean, spec: BucketSpec): Promise<{ granted: number; retryAfterMs: number }> {
    return new Promise((resolve, reject) =>
      enqueue({ key, cost, partial, spec, resolve: (granted, retryAfterMs) => resolve({ granted, retryAfterMs }), reject }),
    );
  }

  // Gives back what was held past its time (a process that stopped sending), and now and then
  // deletes the store's empty rows.
  const sweeper = setInterval(() => {
    const now = clock.now().getTime();
    for (const [key, h] of held) {
      fresh(h, now);
      if (h.toReturn > 0) enqueue({ key, cost: 0, partial: false, spec: h.spec, resolve: () => undefined, reject: (err) => opts.onError?.(err) });
      else if (h.tokens === 0) held.delete(key);
    }
    if (now - lastStoreSweep >= storeSweepMs) {
      lastStoreSweep = now;
      store.sweep(now).catch((err) => opts.onError?.(err));
    }
  }, opts.sweepMs ?? 500);
  sweeper.unref();

  return {
    store,
    take(key, cost, spec) {
      const h = held.get(key);
      if (h && fresh(h, clock.now().getTime()) >= cost) {
        h.tokens -= cost;
        return Promise.resolve({ ok: true });
      }
      return ask(key, cost, false, spec).then(({ granted, retryAfterMs }) => (granted >= cost ? { ok: true } : { ok: false, retryAfterMs }));
    },
    async takeUpTo(key, cost, spec) {
      if (cost <= 0) return 0;
      const h = held.get(key);
      if (h && fresh(h, clock.now().getTime()) >= cost) {
        h.tokens -= cost;
        return cost;
      }
      return (await ask(key, cost, true, spec)).granted;
    },
    giveBack(key, tokens, spec) {
      if (!(tokens > 0)) return;
      const h = heldOf(key, spec);
      // Spent here again before anyone else needs it, or given back with the next call.
      if (h.until > clock.now().getTime()) h.tokens += tokens;
      else h.toReturn += tokens;
    },
    async peek(key, spec) {
      const [a] = await store.take([{ key, rate: spec.rate, burst: spec.burst, want: 0, least: 0, expiresMs: spec.expiresMs }], clock.now().getTime());
      return a.tokens + (held.get(key)?.tokens ?? 0);
    },
    async close() {
      clearInterval(sweeper);
      await running;
      const now = clock.now().getTime();
      const back: BucketRequest[] = [];
      for (const [key, h] of held) {
        const n = h.tokens + h.toReturn;
        if (n > 0) back.push({ key, rate: h.spec.rate, burst: h.spec.burst, want: -n, least: 0, expiresMs: h.spec.expiresMs });
      }
      held.clear();
      if (back.length > 0) await store.take(back, now).catch((err) => opts.onError?.(err));
    },
  };
}
