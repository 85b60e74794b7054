/**
 * The shared token buckets (src/limits/bucket-store.ts) and the allowance that takes them in blocks
 * (src/limits/shared-allowance.ts), each against both stores: the test database (PGlite or
 * PostgreSQL, sb_take_tokens) and a private Redis (the same algorithm in Lua). Exact grants and
 * tokens at the boundaries on the caller's clock; many concurrent takers never get more than the
 * bucket holds; blocks make one call serve many takes; what is held too long goes back.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/common/clock.js";
import { type BucketRequest, type BucketStore, createPostgresBucketStore } from "../../src/limits/bucket-store.js";
import { openBucketStore } from "../../src/limits/limits-store.js";
import { type BucketSpec, createSharedAllowance } from "../../src/limits/shared-allowance.js";
import { dbKind, useTestOrm } from "../support/db.js";
import { type PrivateRedis, startPrivateRedis } from "../support/private-redis.js";
import { without } from "../support/system-packages.js";

const T = Date.UTC(2026, 10, 25, 12, 0, 0);
let seq = 0;
const newKey = () => `test:${process.pid}:${++seq}`;

/** The store's bucket `key` counted by `rate` and `burst`: take `want` (least = want unless given) at `now`. */
function take(store: BucketStore, key: string, rate: number, burst: number, want: number, now: number, least = want) {
  return store.take([{ key, rate, burst, want, least }], now).then(([a]) => a);
}

/** A store that counts the calls made to it (the real store underneath). */
function counted(store: BucketStore): BucketStore & { calls: number } {
  const c = {
    kind: store.kind,
    calls: 0,
    take(reqs: readonly BucketRequest[], now: number) {
      c.calls++;
      return store.take(reqs, now);
    },
    sweep: (now: number) => store.sweep(now),
    close: () => store.close(),
  };
  return c;
}

const db = useTestOrm();
let redis: PrivateRedis | undefined;
let redisStore: BucketStore | undefined;

beforeAll(async () => {
  if (without("redis")) return;
  redis = await startPrivateRedis();
  redisStore = await openBucketStore(db.orm, redis.url);
});

afterAll(async () => {
  await redisStore?.close();
  await redis?.stop();
});

const stores: [string, () => BucketStore][] = [
  [dbKind(), () => createPostgresBucketStore(db.orm)],
  ["redis", () => redisStore!],
];

describe.each(stores)("shared buckets on %s", (name, storeOf) => {
  const skip = name === "redis" && without("redis");

  it.skipIf(skip)(
    "a new bucket is full; a take is all or nothing, or whole tokens down to its least; it refills at its rate, never past its burst",
    async () => {
      const s = storeOf();
      const k = newKey();
      expect(await take(s, k, 5, 5, 3, T)).toEqual({ granted: 3, tokens: 2 });
      expect(await take(s, k, 5, 5, 3, T)).toEqual({ granted: 0, tokens: 2 });
      expect(await take(s, k, 5, 5, 3, T, 1)).toEqual({ granted: 2, tokens: 0 });
      // 199 ms at 5/s is 0.995 of a token: not yet one.
      expect(await take(s, k, 5, 5, 1, T + 199)).toEqual({ granted: 0, tokens: 0.995 });
      expect(await take(s, k, 5, 5, 1, T + 200)).toEqual({ granted: 1, tokens: 0 });
      expect(await take(s, k, 5, 5, 0, T + 60_000)).toEqual({ granted: 0, tokens: 5 });
    },
  );

  it.skipIf(skip)("a give back is never past the burst; a take larger than the burst goes on a full bucket and leaves a debt", async () => {
    const s = storeOf();
    const k = newKey();
    expect(await take(s, k, 5, 5, 4, T)).toEqual({ granted: 4, tokens: 1 });
    expect(await take(s, k, 5, 5, -3, T)).toEqual({ granted: -3, tokens: 4 });
    expect(await take(s, k, 5, 5, -3, T)).toEqual({ granted: -3, tokens: 5 });
    expect(await take(s, k, 5, 5, 8, T)).toEqual({ granted: 8, tokens: -3 });
    expect(await take(s, k, 5, 5, 1, T + 600)).toEqual({ granted: 0, tokens: 0 });
    expect(await take(s, k, 5, 5, 1, T + 800)).toEqual({ granted: 1, tokens: 0 });
    // Not full: the debt is not taken again.
    expect(await take(s, k, 5, 5, 8, T + 1000)).toEqual({ granted: 0, tokens: 1 });
  });

  it.skipIf(skip)("a bucket that never refills (a day's quota) keeps what was used when its burst changes; a clock behind refills nothing", async () => {
    const s = storeOf();
    const k = newKey();
    expect(await take(s, k, 0, 100, 60, T)).toEqual({ granted: 60, tokens: 40 });
    expect(await take(s, k, 0, 100, 41, T + 3_600_000)).toEqual({ granted: 0, tokens: 40 });
    expect(await take(s, k, 0, 150, 0, T)).toEqual({ granted: 0, tokens: 90 });
    expect(await take(s, k, 0, 50, 0, T)).toEqual({ granted: 0, tokens: -10 });
    const r = newKey();
    expect(await take(s, r, 10, 10, 10, T)).toEqual({ granted: 10, tokens: 0 });
    expect(await take(s, r, 10, 10, 1, T - 5000)).toEqual({ granted: 0, tokens: 0 });
    expect(await take(s, r, 10, 10, 1, T + 100)).toEqual({ granted: 1, tokens: 0 });
  });

  it.skipIf(skip)("one call serves several buckets, answered in request order", async () => {
    const s = storeOf();
    const [a, b] = [newKey(), newKey()];
    const answers = await s.take(
      [
        { key: `${b}z`, rate: 1, burst: 2, want: 2, least: 2 },
        { key: `${a}a`, rate: 1, burst: 7, want: 3, least: 3 },
      ],
      T,
    );
    expect(answers).toEqual([
      { granted: 2, tokens: 0 },
      { granted: 3, tokens: 4 },
    ]);
  });

  it.skipIf(skip)("40 concurrent takes of one token from a bucket of 10 (no refill): exactly 10 granted", async () => {
    const s = storeOf();
    const k = newKey();
    const answers = await Promise.all(Array.from({ length: 40 }, () => take(s, k, 0, 10, 1, T)));
    expect(answers.filter((a) => a.granted === 1)).toHaveLength(10);
    expect(await take(s, k, 0, 10, 0, T)).toEqual({ granted: 0, tokens: 0 });
  });

  it.skipIf(skip)("the allowance takes blocks: 30 takes of one with a block of 10 ask the store 3 times", async () => {
    const clock = new ManualClock(T);
    const store = counted(storeOf());
    const allowance = createSharedAllowance({ store, clock });
    const spec: BucketSpec = { rate: 100, burst: 100, block: 10, holdMs: 1000 };
    const k = newKey();
    for (let i = 0; i < 30; i++) expect(await allowance.take(k, 1, spec)).toEqual({ ok: true });
    expect(store.calls).toBe(3);
    await allowance.close();
    // Closing gave back the 3 held: 100 - 30.
    expect(await take(store, k, 100, 100, 0, T)).toEqual({ granted: 0, tokens: 70 });
  });

  it.skipIf(skip)("takes made at once, of several buckets, share one call; refused ones learn when the bucket will hold them", async () => {
    const clock = new ManualClock(T);
    const store = counted(storeOf());
    const allowance = createSharedAllowance({ store, clock });
    const spec: BucketSpec = { rate: 10, burst: 20, block: 0, holdMs: 1000 };
    const [a, b] = [newKey(), newKey()];
    const answers = await Promise.all([...Array.from({ length: 25 }, () => allowance.take(a, 1, spec)), allowance.take(b, 5, spec)]);
    expect(store.calls).toBe(1);
    expect(answers.filter((x) => x.ok)).toHaveLength(21);
    // 20 whole tokens for 25 takes: each refused one waits for one token at 10/s.
    expect(answers.filter((x) => !x.ok)).toEqual(Array.from({ length: 5 }, () => ({ ok: false, retryAfterMs: 100 })));
    await allowance.close();
  });

  it.skipIf(skip)("two processes' allowances on one bucket of 10 grant exactly 10 between them; what they held goes back", async () => {
    const clock = new ManualClock(T);
    const s = storeOf();
    const p1 = createSharedAllowance({ store: s, clock });
    const p2 = createSharedAllowance({ store: s, clock });
    const spec: BucketSpec = { rate: 0, burst: 10, block: 3, holdMs: 1000 };
    const k = newKey();
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => [p1, p2][i % 2].take(k, 1, spec)));
    const granted = answers.filter((x) => x.ok).length;
    expect(granted).toBeLessThanOrEqual(10);
    await p1.close();
    await p2.close();
    expect(await take(s, k, 0, 10, 0, T)).toEqual({ granted: 0, tokens: 10 - granted });
    // Nothing held any more: the rest can be had.
    const p3 = createSharedAllowance({ store: s, clock });
    expect(await p3.take(k, 10 - granted, { ...spec, block: 0 })).toEqual({ ok: true });
    await p3.close();
  });

  it.skipIf(skip)("a quota is taken without blocks near its end; tokens held past holdMs go back to the bucket by the sweep", async () => {
    const clock = new ManualClock(T);
    const s = storeOf();
    const allowance = createSharedAllowance({ store: s, clock, sweepMs: 10 });
    const spec: BucketSpec = { rate: 0, burst: 1000, block: 6, holdMs: 1000 };
    const k = newKey();
    // The first call does not know how much is left: exactly the need.
    expect(await allowance.take(k, 2, spec)).toEqual({ ok: true });
    expect(await take(s, k, 0, 1000, 0, T)).toEqual({ granted: 0, tokens: 998 });
    // 998 left, more than 20 blocks: the need and a block.
    expect(await allowance.take(k, 2, spec)).toEqual({ ok: true });
    expect(await take(s, k, 0, 1000, 0, T)).toEqual({ granted: 0, tokens: 990 });
    clock.advance(1000);
    await expect.poll(async () => (await take(s, k, 0, 1000, 0, T)).tokens, { timeout: 2000 }).toBe(996);
    // Another process takes 900. The sweep has dropped this process's empty entry, so it no longer
    // knows how much is left and takes exactly its need; having seen 95 left (fewer than 20
    // blocks), it goes on taking exactly its needs.
    expect(await take(s, k, 0, 1000, 900, T)).toEqual({ granted: 900, tokens: 96 });
    expect(await allowance.take(k, 1, spec)).toEqual({ ok: true });
    expect(await take(s, k, 0, 1000, 0, T)).toEqual({ granted: 0, tokens: 95 });
    expect(await allowance.take(k, 7, spec)).toEqual({ ok: true });
    expect(await take(s, k, 0, 1000, 0, T)).toEqual({ granted: 0, tokens: 88 });
    await allowance.close();
    expect(await take(s, k, 0, 1000, 0, T)).toEqual({ granted: 0, tokens: 88 });
  });
});

describe.skipIf(without("redis"))("the Redis store unreachable", () => {
  it("a take fails at once (never an unlimited pass), and works again once Redis is back", async () => {
    const r = await startPrivateRedis();
    const s = await openBucketStore(db.orm, r.url);
    try {
      const k = newKey();
      expect(await take(s, k, 1, 5, 1, T)).toEqual({ granted: 1, tokens: 4 });
      await r.stop();
      await expect(take(s, k, 1, 5, 1, T)).rejects.toThrow();
      await r.start();
      // An empty Redis again: the bucket starts full.
      await expect.poll(() => take(s, k, 1, 5, 1, T).catch(() => undefined), { timeout: 10_000, interval: 100 }).toEqual({ granted: 1, tokens: 4 });
    } finally {
      await s.close();
      await r.stop();
    }
  });
});
