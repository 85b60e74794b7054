import type { EntityManager, MikroORM } from "@mikro-orm/sql";
import { DependencyUnreachable } from "../common/unreachable.js";
import { executeBound } from "../db/bound-sql.js";

/**
 * The shared token buckets every limit of the deployment is counted in (docs/limits.md): in
 * PostgreSQL by default (the table `limit_buckets`, changed only by sb_take_tokens in sql/), in
 * Redis where REDIS_URL is set (the same algorithm as one Lua script, keys `sb:lim:<key>`), except
 * the daily quotas, which stay in PostgreSQL (createRoutedBucketStore: a Redis restart must not give
 * an account its day again). Either way one call takes from (or gives back to) several buckets of
 * one store atomically, with the caller's clock.
 */

/** One bucket's part of a call: refill `rate` per second up to `burst`, then take `want` (negative: give back). */
export interface BucketRequest {
  key: string;
  /** Tokens per second; 0: never refills (a daily quota). */
  rate: number;
  burst: number;
  /** Tokens to take (more than the burst, all or nothing: granted on a full bucket, leaving a debt); negative gives them back (never past the burst). */
  want: number;
  /** The least grant worth having: less than `want` but at least this is granted whole tokens; `want` for all or nothing. */
  least: number;
  /** For a bucket that never refills: when (ms) its row may go. */
  expiresMs?: number;
}

/** What a bucket granted (negative: taken back) and the tokens it holds after. */
export interface BucketAnswer {
  granted: number;
  tokens: number;
}

/** A store of shared token buckets. */
export interface BucketStore {
  readonly kind: "postgres" | "redis";
  /** Answers in request order; the keys must be distinct. Rejects when the store cannot be reached. */
  take(requests: readonly BucketRequest[], nowMs: number): Promise<BucketAnswer[]>;
  /** Deletes the buckets that hold no information any more (full again, or a past day's quota). */
  sweep(nowMs: number): Promise<void>;
  /** Whether a store other than the database answers now (Redis), for /readyz; absent for the database's own. */
  ready?(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * A call whose buckets lie in two stores and only one answered (createRoutedBucketStore): the
 * answers of the buckets that did (undefined for the others), and why each other one failed. What
 * was granted stays granted; only the takes of the buckets not answered fail.
 */
export class PartialTakeError extends Error {
  constructor(
    readonly answers: readonly (BucketAnswer | undefined)[],
    readonly reasons: readonly unknown[],
  ) {
    super("some buckets' store could not be reached", { cause: reasons.find((r) => r !== undefined) });
    this.name = "PartialTakeError";
  }
}

/** Requests in key order (two calls then never wait for each other's locks in a cycle), and where each answer goes. */
function sorted(requests: readonly BucketRequest[]): { order: number[]; reqs: BucketRequest[] } {
  const order = requests.map((_, i) => i).sort((a, b) => (requests[a].key < requests[b].key ? -1 : requests[a].key > requests[b].key ? 1 : 0));
  return { order, reqs: order.map((i) => requests[i]) };
}

/** The buckets in PostgreSQL (or PGlite): one call is one statement, sb_take_tokens. */
export function createPostgresBucketStore(orm: MikroORM): BucketStore {
  const em = (): EntityManager => orm.em.fork();
  return {
    kind: "postgres",
    async take(requests, nowMs) {
      if (requests.length === 0) return [];
      const { order, reqs } = sorted(requests);
      const rows = await executeBound<{ key: string; granted: number; tokens: number }>(
        em(),
        "select key, granted, tokens from sb_take_tokens(?::text[], ?::float8[], ?::float8[], ?::float8[], ?::float8[], ?::bigint[], ?::bigint)",
        [
          reqs.map((r) => r.key),
          reqs.map((r) => r.rate),
          reqs.map((r) => r.burst),
          reqs.map((r) => r.want),
          reqs.map((r) => r.least),
          reqs.map((r) => Math.round(r.expiresMs ?? nowMs)),
          Math.round(nowMs),
        ],
        "sb_take_tokens",
      );
      const out: BucketAnswer[] = new Array(requests.length);
      rows.forEach((row, j) => (out[order[j]] = { granted: Number(row.granted), tokens: Number(row.tokens) }));
      return out;
    },
    async sweep(nowMs) {
      await executeBound(em(), "delete from limit_buckets where expires_ms < ?", [Math.round(nowMs)]);
    },
    async close() {},
  };
}

/** The part of a node-redis client this store uses. */
export interface RedisLike {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** Whether the client is connected and Redis answers a PING now (for /readyz). */
  ready?(): Promise<boolean>;
  close?(): Promise<unknown>;
  quit?(): Promise<unknown>;
}

/**
 * sb_take_tokens as a Lua script (Redis runs a script atomically): the same steps and answers. A
 * row expires by itself when it holds no information (full again; a quota at its expiresMs).
 * Numbers go as strings both ways (Lua would truncate a number answer to an integer).
 */
export const TAKE_TOKENS_LUA = `
local now = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local base = 1 + (i - 1) * 5
  local rate = tonumber(ARGV[base + 1])
  local burst = tonumber(ARGV[base + 2])
  local want = tonumber(ARGV[base + 3])
  local least = tonumber(ARGV[base + 4])
  local expires = tonumber(ARGV[base + 5])
  local row = redis.call('HMGET', KEYS[i], 't', 'b', 'a')
  local t, oldb, last
  if row[1] then
    t = tonumber(row[1]); oldb = tonumber(row[2]); last = tonumber(row[3])
  else
    t = burst; oldb = burst; last = now
  end
  t = t + (burst - oldb)
  if now > last then
    t = t + (now - last) * rate / 1000
    last = now
  end
  if t > burst then t = burst end
  local g
  if want < 0 then g = want
  elseif t >= want or (want > burst and t >= burst and least >= want) then g = want
  elseif math.floor(t) >= least and t >= 1 then g = math.floor(t)
  else g = 0 end
  t = math.min(burst, t - g)
  local untilMs
  if rate > 0 then untilMs = last + math.ceil(math.max(0, burst - t) * 1000 / rate) else untilMs = expires end
  redis.call('HSET', KEYS[i], 't', string.format('%.17g', t), 'b', string.format('%.17g', burst), 'a', string.format('%d', last))
  redis.call('PEXPIRE', KEYS[i], math.max(1, untilMs - now) + 1000)
  out[i] = { string.format('%.17g', g), string.format('%.17g', t) }
end
return out
`;

/** Where Redis keeps the buckets. */
export const REDIS_PREFIX = "sb:lim:";

/** The buckets in Redis: one call is one EVAL of TAKE_TOKENS_LUA (a single Redis, not a cluster: the keys of a call may lie in different slots). */
export function createRedisBucketStore(client: RedisLike): BucketStore {
  return {
    kind: "redis",
    async take(requests, nowMs) {
      if (requests.length === 0) return [];
      const { order, reqs } = sorted(requests);
      const args = [String(Math.round(nowMs))];
      for (const r of reqs) args.push(String(r.rate), String(r.burst), String(r.want), String(r.least), String(Math.round(r.expiresMs ?? nowMs)));
      let rows: [string, string][];
      try {
        rows = (await client.eval(TAKE_TOKENS_LUA, { keys: reqs.map((r) => REDIS_PREFIX + r.key), arguments: args })) as [string, string][];
      } catch (err) {
        // Answered 503 naming Redis, not the database (issue 41).
        throw new DependencyUnreachable("redis", err);
      }
      const out: BucketAnswer[] = new Array(requests.length);
      rows.forEach((row, j) => (out[order[j]] = { granted: Number(row[0]), tokens: Number(row[1]) }));
      return out;
    },
    // Redis expires each key by itself (PEXPIRE in the script).
    async sweep() {},
    ready: () => client.ready?.() ?? Promise.resolve(true),
    async close() {
      await (client.close?.() ?? client.quit?.());
    },
  };
}

/**
 * Two stores as one: the buckets whose key `durable` picks in `durableStore` (the database), the
 * others in `fast` (Redis). A call goes to each store its keys need, both at once; when one of them
 * fails, the call rejects with a PartialTakeError carrying the other's answers (what it granted
 * stays granted). The daily quotas are kept in the database this way: a Redis restart empties
 * Redis, and a quota counted there would give the account its whole day again; the request rates,
 * dispatch rates and carriers' Tps refill within seconds, so losing them costs at most a burst.
 */
export function createRoutedBucketStore(fast: BucketStore, durableStore: BucketStore, durable: (key: string) => boolean): BucketStore {
  return {
    kind: fast.kind,
    async take(requests, nowMs) {
      const inDurable = requests.map((r) => durable(r.key));
      if (inDurable.every((d) => !d)) return fast.take(requests, nowMs);
      if (inDurable.every((d) => d)) return durableStore.take(requests, nowMs);
      const idx = (d: boolean) => requests.flatMap((_, i) => (inDurable[i] === d ? [i] : []));
      const parts = [idx(false), idx(true)];
      const settled = await Promise.allSettled([
        fast.take(
          parts[0].map((i) => requests[i]),
          nowMs,
        ),
        durableStore.take(
          parts[1].map((i) => requests[i]),
          nowMs,
        ),
      ]);
      const answers: (BucketAnswer | undefined)[] = new Array(requests.length);
      const reasons: unknown[] = new Array(requests.length);
      settled.forEach((s, p) =>
        parts[p].forEach((i, j) => {
          if (s.status === "fulfilled") answers[i] = s.value[j];
          else reasons[i] = s.reason;
        }),
      );
      if (settled.some((s) => s.status === "rejected")) throw new PartialTakeError(answers, reasons);
      return answers as BucketAnswer[];
    },
    async sweep(nowMs) {
      await Promise.all([fast.sweep(nowMs), durableStore.sweep(nowMs)]);
    },
    ready: () => fast.ready?.() ?? Promise.resolve(true),
    async close() {
      await Promise.all([fast.close(), durableStore.close()]);
    },
  };
}
