/**
 * Issue 41, defect 13: a 503 says what cannot be reached. The database (refused, dropped or
 * timed-out connections), the shared limits' Redis, and this process's database connection pool
 * (every pooled connection busy past the wait) each have their own ServiceUnavailable message, the
 * same on REST (with Retry-After: 2), Connect and gRPC (Unavailable, ErrorInfo reason
 * ServiceUnavailable). The classification as units; then each cause on a listening app over the
 * three wires: the database on an ORM whose server is not there, Redis on a private redis-server the
 * test kills, the pool (PostgreSQL only: PGlite has no pool) held by two long statements.
 */
import type { AddressInfo } from "node:net";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import type { MikroORM } from "@mikro-orm/sql";
import { afterAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { ManualClock } from "../../src/common/clock.js";
import { toResponseStatus } from "../../src/common/errors.js";
import { createOrm } from "../../src/db/orm.js";
import { entities } from "../../src/entities.js";
import { createAdmitLimits } from "../../src/limits/account-limits.js";
import { createRedisBucketStore } from "../../src/limits/bucket-store.js";
import { openBucketStore } from "../../src/limits/limits-store.js";
import { createSharedAllowance } from "../../src/limits/shared-allowance.js";
import { dbKind, type TestOrm, useTestOrm } from "../support/db.js";
import { ADMIN_TOKEN, basic, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { startPrivateRedis } from "../support/private-redis.js";
import { without } from "../support/system-packages.js";

const UNAVAILABLE = {
  database: "The service is temporarily unavailable: its database cannot be reached. Try again shortly.",
  redis: "The service is temporarily unavailable: the Redis that holds its shared limits cannot be reached. Try again shortly.",
  pool: "The service is temporarily unavailable: every database connection is in use (its connection pool is exhausted). Try again shortly.",
} as const;

describe("what a 503 names", () => {
  it("a refused or dropped database connection is the database; a pooled connection not free in time is the pool; a Redis call failing is Redis", async () => {
    const database = [
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }),
      new Error("Connection terminated unexpectedly"),
      new Error("Connection terminated due to connection timeout"),
      Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }),
    ];
    for (const e of database) expect(toResponseStatus(e).status.message, e.message).toBe(UNAVAILABLE.database);
    // pg-pool's answer when every pooled connection stayed busy past connectionTimeoutMillis.
    const pool = [new Error("timeout exceeded when trying to connect"), new Error("wrapped", { cause: new Error("timeout exceeded when trying to connect") })];
    for (const e of pool) {
      const { httpStatus, status } = toResponseStatus(e);
      expect({ httpStatus, errorCode: status.errorCode, message: status.message }).toEqual({
        httpStatus: 503,
        errorCode: "ServiceUnavailable",
        message: UNAVAILABLE.pool,
      });
    }
    // The shared limits over a Redis that cannot be reached (node-redis' words for a lost connection).
    const clock = new ManualClock(new Date("2026-11-22T12:00:00Z"));
    const store = createRedisBucketStore({ eval: () => Promise.reject(new Error("The client is closed")) });
    const allowance = createSharedAllowance({ store, clock });
    const limits = createAdmitLimits(allowance, { ratePerSecond: 10, burst: 100 }, () => clock.now().getTime());
    const err = await limits
      .admit({ sid: "AC0123456789ABCDEFGHIJKLMNOPQRST" }, () => 1)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    await allowance.close();
    const { httpStatus, status } = toResponseStatus(err);
    expect({ httpStatus, errorCode: status.errorCode, message: status.message }).toEqual({
      httpStatus: 503,
      errorCode: "ServiceUnavailable",
      message: UNAVAILABLE.redis,
    });
  });
});

/** A send on REST, Connect and gRPC; each answer as { wire, code, errorCode, message, retryAfter }. */
async function sendOnThreeWires(baseUrl: string, tenant: Pick<Tenant, "propertySid" | "auth">) {
  const req = { propertySid: tenant.propertySid, from: "Acme", to: "+447911000001", text: "hi" };
  const headers = { authorization: tenant.auth };
  const rest = await fetch(`${baseUrl}/v2/Properties/${tenant.propertySid}/Messages`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ From: req.from, To: req.to, Text: req.text }),
  });
  const body = (await rest.json()) as { ResponseStatus?: { ErrorCode: string; Message: string } };
  const out: object[] = [
    {
      wire: "rest",
      code: rest.status,
      errorCode: body.ResponseStatus?.ErrorCode,
      message: body.ResponseStatus?.Message,
      retryAfter: rest.headers.get("retry-after"),
    },
  ];
  for (const [wire, transport] of [
    ["connect", createConnectTransport({ baseUrl, httpVersion: "1.1" })],
    ["grpc", createGrpcTransport({ baseUrl })],
  ] as const) {
    const err = await createClient(MessagingService, transport)
      .sendMessage(req, { headers })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    out.push({ wire, code: err && Code[err.code], errorCode: err?.findDetails(ErrorInfoSchema)[0]?.reason, message: err?.rawMessage, retryAfter: null });
  }
  return out;
}

const expected = (message: string) => [
  { wire: "rest", code: 503, errorCode: "ServiceUnavailable", message, retryAfter: "2" },
  { wire: "connect", code: "Unavailable", errorCode: "ServiceUnavailable", message, retryAfter: null },
  { wire: "grpc", code: "Unavailable", errorCode: "ServiceUnavailable", message, retryAfter: null },
];

async function listen(t: TestApp): Promise<string> {
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

describe(`each cause on every wire (${dbKind()})`, () => {
  const closers: (() => Promise<unknown>)[] = [];
  // Made before the tests: a PGlite database takes a while on a busy machine.
  const test = useTestOrm();
  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  });

  it("the database not there: the database's message", async () => {
    // Nothing listens on port 1: the ORM a server has while its database is down.
    const down = await createOrm({ entities, databaseUrl: "postgres://postgres@127.0.0.1:1/postgres", connectTimeoutMs: 1000 });
    closers.push(() => down.close(true));
    const t = await createTestApp({ db: { orm: down, close: async () => undefined } });
    closers.push(() => t.close());
    const base = await listen(t);
    const tenant = { propertySid: "PR0123456789ABCDEFGHIJKLMNOPQRST", auth: basic("AC0123456789ABCDEFGHIJKLMNOPQRST", "token") };
    expect(await sendOnThreeWires(base, tenant)).toEqual(expected(UNAVAILABLE.database));
  });

  it.skipIf(without("redis"))("the shared limits' Redis not there: Redis's message", async () => {
    const redis = await startPrivateRedis();
    closers.push(() => redis.stop());
    const db: TestOrm = { orm: test.orm, close: async () => undefined };
    const store = await openBucketStore(db.orm, redis.url);
    closers.push(() => store.close());
    const clock = new ManualClock(new Date("2026-11-22T12:00:00Z"));
    const limits = createSharedAllowance({ store, clock });
    closers.push(() => limits.close());
    const t = await createTestApp({ db, clock, limits, config: { sendRateLimit: 0 } });
    closers.push(() => t.close());
    const base = await listen(t);
    const tenant = await createTenant(t.app);
    // A request rate (in Redis) with a burst too small for a block: every send asks Redis.
    const set = await t.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${tenant.accountSid}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { SendRatePerSecond: 100, SendRateBurst: 10 },
    });
    expect(set.statusCode, set.body).toBe(200);
    await redis.stop();
    expect(await sendOnThreeWires(base, tenant)).toEqual(expected(UNAVAILABLE.redis));
  });

  it.skipIf(dbKind() !== "postgres")("every pooled connection busy past the wait: the pool's message", { timeout: 30_000 }, async () => {
    // The test's database through a pool of 2 that waits 300 ms for a free connection.
    const small: MikroORM = await createOrm({ entities, databaseUrl: test.orm.config.get("clientUrl")!, poolMax: 2, connectTimeoutMs: 300 });
    closers.push(() => small.close(true));
    const t = await createTestApp({ db: { orm: small, close: async () => undefined } });
    closers.push(() => t.close());
    const base = await listen(t);
    const tenant = await createTenant(t.app);
    // Both pooled connections busy for 4 s; the three sends each wait 300 ms for one.
    const busy = [0, 1].map(() => small.em.fork().execute("select pg_sleep(4)"));
    await new Promise((done) => setTimeout(done, 200));
    expect(await sendOnThreeWires(base, tenant)).toEqual(expected(UNAVAILABLE.pool));
    await Promise.all(busy);
  });
});
