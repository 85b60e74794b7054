import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Clock } from "../common/clock.js";
import { isQuotaKey } from "./account-limits.js";
import { type BucketStore, createPostgresBucketStore, createRedisBucketStore, createRoutedBucketStore, type RedisLike } from "./bucket-store.js";
import { createSharedAllowance, type SharedAllowance } from "./shared-allowance.js";

/** A Redis call that takes longer than this fails (503), as a lost database does: never an unlimited pass. */
const REDIS_TIMEOUT_MS = 2000;

/** How long /readyz waits for Redis to answer a PING. */
const REDIS_READY_TIMEOUT_MS = 1000;

/** `p`, or a rejection after `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms).unref())]);
}

/**
 * The bucket store of the deployment: Redis at `redisUrl`, else the database. With Redis, the daily
 * quotas still live in the database (createRoutedBucketStore): their count must survive a Redis
 * restart, and a quota is taken in blocks, so it costs no call per send. The Redis client
 * answers a call made while it is disconnected with an error at once (no offline queue) and
 * reconnects by itself; a call it does not answer within REDIS_TIMEOUT_MS fails.
 */
export async function openBucketStore(orm: MikroORM, redisUrl: string | undefined, log?: Logger): Promise<BucketStore> {
  if (!redisUrl) return createPostgresBucketStore(orm);
  const { createClient } = await import("redis");
  const client = createClient({
    url: redisUrl,
    disableOfflineQueue: true,
    socket: { connectTimeout: REDIS_TIMEOUT_MS, reconnectStrategy: (retries: number) => Math.min(2000, 50 * 2 ** retries) },
  });
  client.on("error", (err: unknown) => log?.warn({ err }, "shared limits: Redis connection error"));
  // Waits for the first connection a while; if Redis is not there yet, the limits answer 503 until it is.
  await Promise.race([
    client.connect().catch((err: unknown) => log?.warn({ err }, "shared limits: Redis not reachable yet")),
    new Promise((resolve) => setTimeout(resolve, REDIS_TIMEOUT_MS).unref()),
  ]);
  const timed: RedisLike = {
    eval: (script, options) => within(client.eval(script, options), REDIS_TIMEOUT_MS, "Redis did not answer"),
    ready: async () =>
      client.isReady &&
      (await within(client.ping(), REDIS_READY_TIMEOUT_MS, "Redis did not answer PING").then(
        () => true,
        () => false,
      )),
    // At once, even while it reconnects to a Redis that is gone.
    close: async () => {
      if (client.isOpen) client.destroy();
    },
  };
  return createRoutedBucketStore(createRedisBucketStore(timed), createPostgresBucketStore(orm), isQuotaKey);
}

/** The process's allowance over the deployment's bucket store. */
export async function openSharedAllowance(opts: { orm: MikroORM; redisUrl?: string; clock: Clock; log?: Logger }): Promise<SharedAllowance> {
  const store = await openBucketStore(opts.orm, opts.redisUrl, opts.log);
  return createSharedAllowance({ store, clock: opts.clock, onError: (err) => opts.log?.warn({ err }, "shared limits: could not give back held tokens") });
}
