/**
 * Issue 41, defect 6: the daily quota is durable and readiness names Redis. With the shared limits'
 * buckets in a private Redis (started, killed and started again by the test, empty each time: no
 * persistence), a quota used up stays used up the same UTC day after Redis restarts (its count is
 * kept in PostgreSQL), and `SegmentsToday` still says what was stored; with Redis unreachable,
 * /readyz and the gRPC health service are not ready and say it is Redis, and a send that needs
 * Redis is 503 naming Redis; back, everything is ready again; a call of the allowance that needs
 * both stores keeps the database's grants when Redis is down. On the injectable clock.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresBucketStore } from "../../src/limits/bucket-store.js";
import { Message } from "../../src/messaging/message.entity.js";
import { dbKind } from "../support/db.js";
import type { PrivateRedis } from "../support/private-redis.js";
import { without } from "../support/system-packages.js";
import { ADMIN_TOKEN, createTenant, type Tenant, type TestApp, type RedisTestApp, startRedisTestApp } from "../support/harness.js";

const REDIS_UNAVAILABLE = "The service is temporarily unavailable: the Redis that holds its shared limits cannot be reached. Try again shortly.";

describe.skipIf(without("redis"))(`the daily quota across a Redis restart (${dbKind()})`, () => {
  let redis: PrivateRedis;
  let r: TestApp;
  let env: RedisTestApp | undefined;
  let seq = 0;

  beforeAll(async () => {
    env = await startRedisTestApp();
    ({ redis, app: r } = env);
  });

  afterAll(async () => {
    await env?.close();
  });

  const send = (a: Tenant) =>
    r.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/Messages`,
      headers: { authorization: a.auth },
      payload: { From: "Acme", To: `+447911${String(++seq).padStart(6, "0")}`, Text: "hi" },
    });
  const admin = (method: "GET" | "POST", sid: string, payload?: object) =>
    r.app.inject({ method, url: `/admin/v1/Accounts/${sid}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload });
  /** An account with a daily quota and a request rate: the rate's bucket is in Redis, so its sends need Redis. */
  async function tenant(quota: number): Promise<Tenant> {
    const a = await createTenant(r.app);
    // A burst of 10 takes no block (5 % of it is 0): every send asks the store.
    const set = await admin("POST", a.accountSid, { DailySegmentQuota: quota, SendRatePerSecond: 100, SendRateBurst: 10 });
    expect(set.statusCode, set.body).toBe(200);
    return a;
  }
  const health = () => r.app.inject({ method: "POST", url: "/grpc.health.v1.Health/Check", headers: { "content-type": "application/json" }, payload: {} });

  it("a quota of 20 used up: after Redis restarts, the 21st send the same day is still 429 QuotaExceeded and SegmentsToday stays 20", async () => {
    r.clock.set(new Date("2026-11-22T12:00:00Z"));
    const a = await tenant(20);
    for (let i = 0; i < 20; i++) {
      const ok = await send(a);
      expect(ok.statusCode, ok.body).toBe(200);
      r.clock.advance(200);
    }
    expect((await send(a)).json().ResponseStatus.ErrorCode).toBe("QuotaExceeded");

    await redis.stop();
    await redis.start();
    // The client reconnects by itself: until it has, a send is 503 (never let through).
    let after = await send(a);
    for (let i = 0; after.statusCode === 503 && i < 100; i++) {
      await new Promise((done) => setTimeout(done, 100));
      r.clock.advance(200);
      after = await send(a);
    }
    expect(after.statusCode, after.body).toBe(429);
    expect(after.json().ResponseStatus.ErrorCode).toBe("QuotaExceeded");
    expect((await admin("GET", a.accountSid)).json().SegmentsToday).toBe(20);
    expect(await r.db.orm.em.fork().count(Message, { accountSid: a.accountSid })).toBe(20);

    // The next UTC day starts afresh.
    r.clock.set(new Date("2026-11-23T00:00:01Z"));
    expect((await send(a)).statusCode).toBe(200);
    expect((await admin("GET", a.accountSid)).json().SegmentsToday).toBe(1);
  });

  it("with Redis unreachable, /readyz and Health are not ready and name Redis, a send that needs Redis is 503 naming it; back, ready again", async () => {
    r.clock.set(new Date("2026-11-24T12:00:00Z"));
    const a = await tenant(1000);
    expect((await send(a)).statusCode).toBe(200);
    const ready = await r.app.inject({ method: "GET", url: "/readyz" });
    expect({ status: ready.statusCode, body: ready.json() }).toStrictEqual({ status: 200, body: { Status: "ready" } });
    expect((await health()).json()).toStrictEqual({ status: "SERVING" });

    await redis.stop();
    try {
      const notReady = await r.app.inject({ method: "GET", url: "/readyz" });
      expect({ status: notReady.statusCode, body: notReady.json() }).toStrictEqual({ status: 503, body: { Status: "redis unavailable" } });
      expect((await health()).json()).toStrictEqual({ status: "NOT_SERVING" });
      r.clock.advance(1000);
      const down = await send(a);
      expect(down.statusCode, down.body).toBe(503);
      expect(down.headers["retry-after"]).toBe("2");
      expect(down.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "ServiceUnavailable", Message: REDIS_UNAVAILABLE, Errors: [] } });
    } finally {
      await redis.start();
    }
    await expect.poll(async () => (await r.app.inject({ method: "GET", url: "/readyz" })).statusCode, { timeout: 10_000, interval: 100 }).toBe(200);
    expect((await health()).json()).toStrictEqual({ status: "SERVING" });
    r.clock.advance(1000);
    expect((await send(a)).statusCode).toBe(200);
  });

  it("with Redis down, one call for a quota (in the database) and a request rate (in Redis): the quota's grant counts, only the rate's take fails", async () => {
    r.clock.set(new Date("2026-11-25T12:00:00Z"));
    const now = r.clock.now().getTime();
    const key = "quota:AC0123456789ABCDEFGHIJKLMNOPQRST:2026-11-25";
    const quota = { rate: 0, burst: 50, block: 0, holdMs: 1000, expiresMs: now + 43_200_000 };
    await redis.stop();
    try {
      // The same turn of the event loop: one call of the allowance, to both stores.
      const [q, rate] = await Promise.allSettled([
        r.limits.take(key, 5, quota),
        r.limits.take("rate:AC0123456789ABCDEFGHIJKLMNOPQRST", 1, { rate: 10, burst: 10, block: 0, holdMs: 1000 }),
      ]);
      expect(q).toStrictEqual({ status: "fulfilled", value: { ok: true } });
      expect(rate.status).toBe("rejected");
      const [row] = await createPostgresBucketStore(r.db.orm).take([{ key, rate: 0, burst: 50, want: 0, least: 0, expiresMs: quota.expiresMs }], now);
      expect(row).toStrictEqual({ granted: 0, tokens: 45 });
    } finally {
      await redis.start();
    }
  });
});
