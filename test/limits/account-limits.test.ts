/**
 * An account's limits for the deployment (docs/limits.md), through the REST API on the injectable
 * clock: the operator sets them (UpdateAccount) and reads them with today's use (GetAccount), bad
 * values are 400s naming the field; the request rate counts segments; the daily quota refuses the
 * send that would pass it (429 QuotaExceeded, Retry-After to the next UTC midnight), a send not
 * stored gives its segments back, and the next UTC day starts afresh; ValidityPeriod is checked;
 * with the request rate's buckets in Redis and Redis unreachable, a send is 503, never let through,
 * and the quota (kept in the database) counts on across a Redis restart.
 */
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Message } from "../../src/messaging/message.entity.js";
import { dbKind } from "../support/db.js";
import type { PrivateRedis } from "../support/private-redis.js";
import { without } from "../support/system-packages.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp, type RedisTestApp, startRedisTestApp } from "../support/harness.js";

let t: TestApp;
let seq = 0;
const recipient = () => `+447911${String(++seq).padStart(6, "0")}`;
// 160 GSM-7 characters is one segment, 161 is two (153 per part), 307 is three.
const TEXT = { one: "a".repeat(160), two: "b".repeat(161), three: "c".repeat(307) };

function send(tenant: Tenant, text: string, extra: object = {}) {
  return t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: tenant.auth },
    payload: { From: "Acme", To: recipient(), Text: text, ...extra },
  });
}

function getAccount(sid: string) {
  return t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${sid}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
}

function update(sid: string, body: object) {
  return t.app.inject({ method: "POST", url: `/admin/v1/Accounts/${sid}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: body });
}

function expectQuota(res: LightMyRequestResponse, tenant: Tenant, quota: number, needs: number, retryAfter: number): void {
  expect(res.statusCode, res.body).toBe(429);
  expect(res.headers["retry-after"]).toBe(String(retryAfter));
  expect(res.json()).toStrictEqual({
    ResponseStatus: {
      ErrorCode: "QuotaExceeded",
      Message: `Daily quota reached: account ${tenant.accountSid} may send ${quota} segments per UTC day; this request needs ${needs}. Retry after ${retryAfter} seconds (the next UTC midnight).`,
      Errors: [],
    },
  });
}

beforeAll(async () => {
  // 12:00 UTC: the next UTC midnight is 43,200 s away.
  t = await createTestApp({ now: new Date("2026-11-22T12:00:00Z"), config: { sendRateLimit: 0 } });
});

afterAll(async () => {
  await t?.close();
});

describe(`account limits (${dbKind()})`, () => {
  it("the operator sets an account's limits; GetAccount shows them and today's segments; 0 clears one", async () => {
    const a = await createTenant(t.app);
    const set = await update(a.accountSid, { SendRatePerSecond: 2.5, SendRateBurst: 10, MessagesPerSecond: 20, DailySegmentQuota: 100 });
    expect(set.statusCode, set.body).toBe(200);
    const got = (await getAccount(a.accountSid)).json();
    expect([got.SendRatePerSecond, got.SendRateBurst, got.MessagesPerSecond, got.DailySegmentQuota, got.SegmentsToday]).toEqual([2.5, 10, 20, 100, 0]);
    expect((await send(a, TEXT.three)).statusCode).toBe(200);
    expect((await getAccount(a.accountSid)).json().SegmentsToday).toBe(3);
    expect((await update(a.accountSid, { MessagesPerSecond: 0, SendRatePerSecond: 0 })).statusCode).toBe(200);
    const cleared = (await getAccount(a.accountSid)).json();
    expect(cleared).not.toHaveProperty("MessagesPerSecond");
    expect(cleared).not.toHaveProperty("SendRatePerSecond");
    expect([cleared.SendRateBurst, cleared.DailySegmentQuota, cleared.SegmentsToday]).toEqual([10, 100, 3]);
  });

  it("a bad limit is a 400 naming its field, and changes nothing", async () => {
    const a = await createTenant(t.app);
    const cases: [object, string, string][] = [
      [
        { DailySegmentQuota: -1 },
        "DailySegmentQuota",
        "DailySegmentQuota must be a whole number more than 0 and at most 1000000000, or 0 to clear it; got -1.",
      ],
      [{ SendRatePerSecond: 100001 }, "SendRatePerSecond", "SendRatePerSecond must be more than 0 and at most 100000, or 0 to clear it; got 100001."],
      [{ MessagesPerSecond: -0.5 }, "MessagesPerSecond", "MessagesPerSecond must be more than 0 and at most 100000, or 0 to clear it; got -0.5."],
    ];
    for (const [body, field, message] of cases) {
      const res = await update(a.accountSid, body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().ResponseStatus.Errors).toEqual([{ FieldName: field, ErrorCode: "InvalidParameter", Message: message }]);
    }
    const got = (await getAccount(a.accountSid)).json();
    expect(got).not.toHaveProperty("DailySegmentQuota");
    expect(got.SegmentsToday).toBe(0);
  });

  it("the request rate counts segments: a 3-segment text costs 3 of a burst of 4", async () => {
    const a = await createTenant(t.app);
    await update(a.accountSid, { SendRatePerSecond: 2, SendRateBurst: 4 });
    expect((await send(a, TEXT.three)).statusCode).toBe(200);
    const refused = await send(a, TEXT.two);
    expect(refused.statusCode, refused.body).toBe(429);
    expect(refused.headers["retry-after"]).toBe("1");
    expect(refused.json().ResponseStatus).toStrictEqual({
      ErrorCode: "RateLimited",
      Message: `Too many messages: account ${a.accountSid} may send 2 per second, in bursts of up to 4. This request asks for 2. Retry after 1 second.`,
      Errors: [],
    });
    expect((await send(a, TEXT.one)).statusCode).toBe(200);
    t.clock.advance(1000);
    expect((await send(a, TEXT.two)).statusCode).toBe(200);
  });

  it("a quota of 100 segments: the send that would pass it is 429 QuotaExceeded until the next UTC midnight; a send not stored gives its segments back", async () => {
    const a = await createTenant(t.app);
    await update(a.accountSid, { DailySegmentQuota: 100 });
    // Earlier tests moved the clock a second past 12:00.
    t.clock.set(new Date("2026-11-22T12:00:00Z"));
    for (let i = 0; i < 33; i++) expect((await send(a, TEXT.three)).statusCode).toBe(200);
    // 99 used: a 2-segment send would pass 100.
    expectQuota(await send(a, TEXT.two), a, 100, 2, 43_200);
    // Refused for its content: not stored, so it does not count.
    const bad = await send(a, TEXT.one, { To: "not-a-number" });
    expect(bad.statusCode).toBe(400);
    expect((await getAccount(a.accountSid)).json().SegmentsToday).toBe(99);
    expect((await send(a, TEXT.one)).statusCode).toBe(200);
    t.clock.advance(3_600_000);
    expectQuota(await send(a, TEXT.one), a, 100, 1, 39_600);
    expect(await t.db.orm.em.fork().count(Message, { accountSid: a.accountSid })).toBe(34);
    const metrics = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(metrics).toContain(`switchboard_account_refused{account="${a.accountSid}",reason="QuotaExceeded"} 2\n`);
    expect(metrics).toContain(`switchboard_account_refused{account="${a.accountSid}",reason="RateLimited"} 0\n`);
    // A batch is charged for all its items at once.
    const batch = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/BatchMessages`,
      headers: { authorization: a.auth },
      payload: { Messages: [{ From: "Acme", To: recipient(), Text: "x" }] },
    });
    expectQuota(batch, a, 100, 1, 39_600);
    // The next UTC day starts afresh.
    t.clock.set(new Date("2026-11-23T00:00:00Z"));
    expect((await send(a, TEXT.three)).statusCode).toBe(200);
    expect((await getAccount(a.accountSid)).json().SegmentsToday).toBe(3);
    t.clock.set(new Date("2026-11-22T12:00:00Z"));
  });

  it("ValidityPeriod is 1 to 1,209,600 seconds; outside that the send is a 400 naming it", async () => {
    const a = await createTenant(t.app);
    for (const v of [0, 1_209_601]) {
      const res = await send(a, "hi", { ValidityPeriod: v });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().ResponseStatus.Errors).toEqual([
        { FieldName: "ValidityPeriod", ErrorCode: "InvalidParameter", Message: `ValidityPeriod must be 1 to 1209600 seconds (14 days); got ${v}.` },
      ]);
    }
    const ok = await send(a, "hi", { ValidityPeriod: 60 });
    expect(ok.statusCode, ok.body).toBe(200);
    const m = await t.db.orm.em.fork().findOneOrFail(Message, { sid: ok.json().MessageSid });
    expect(m.validUntil!.getTime() - m.createdAt.getTime()).toBe(60_000);
  });
});

describe.skipIf(without("redis"))(`account limits with the buckets in Redis (${dbKind()})`, () => {
  let redis: PrivateRedis;
  let r: TestApp;
  let env: RedisTestApp | undefined;

  beforeAll(async () => {
    env = await startRedisTestApp();
    ({ redis, app: r } = env);
  });

  afterAll(async () => {
    await env?.close();
  });

  it("the request rate is counted in Redis; with Redis unreachable a send is 503 ServiceUnavailable, never let through; back, it counts again and the quota's count survived", async () => {
    const a = await createTenant(r.app);
    // The request rate's bucket is in Redis (a burst of 10 takes no block: every send asks Redis);
    // the quota's is in the database (issue 41: a Redis restart must not reset it).
    const set = await r.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${a.accountSid}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { DailySegmentQuota: 2, SendRatePerSecond: 100, SendRateBurst: 10 },
    });
    expect(set.statusCode).toBe(200);
    const sendOne = () =>
      r.app.inject({
        method: "POST",
        url: `/v2/Properties/${a.propertySid}/Messages`,
        headers: { authorization: a.auth },
        payload: { From: "Acme", To: recipient(), Text: "hi" },
      });
    expect((await sendOne()).statusCode).toBe(200);
    await redis.stop();
    const down = await sendOne();
    expect(down.statusCode, down.body).toBe(503);
    expect(down.json().ResponseStatus.ErrorCode).toBe("ServiceUnavailable");
    expect(await r.db.orm.em.fork().count(Message, { accountSid: a.accountSid })).toBe(1);
    await redis.start();
    // An empty Redis again (no persistence): the request rate starts afresh there, the quota does not.
    await expect.poll(async () => (await sendOne()).statusCode, { timeout: 10_000, interval: 200 }).toBe(200);
    const over = await sendOne();
    expect(over.statusCode, over.body).toBe(429);
    expect(over.json().ResponseStatus.ErrorCode).toBe("QuotaExceeded");
    expect(await r.db.orm.em.fork().count(Message, { accountSid: a.accountSid })).toBe(2);
  });
});
