/**
 * The limits hold for the deployment (docs/limits.md): two API processes (each with
 * its delivery engine, as `npm start` runs) and two worker processes on one PostgreSQL database,
 * the shared buckets in that database, then the same with them in Redis. Real time, real HTTP:
 *  - a request rate of 50/s driven at 200/s for 10 s through both API processes: 50/s ± 10 % accepted;
 *  - MessagesPerSecond 20 and 400 sent at once: handed to the carrier over 20 s ± 10 %, none
 *    refused, while another account's messages go out at once;
 *  - a quota of 100 segments refuses the send that would pass it, Retry-After to the next UTC midnight;
 *  - a message still queued after its ValidityPeriod ends QueueTimeout.
 * Long (about a minute per store), so one file and one set of processes per store.
 */
import type { MikroORM } from "@mikro-orm/sql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Message } from "../../src/messaging/message.entity.js";
import { dbKind } from "../support/db.js";
import { freePort } from "../support/kannel.js";
import { type PrivateRedis, startPrivateRedis } from "../support/private-redis.js";
import { type Service, type ServiceDatabase, serviceDatabase, startService } from "../support/service.js";
import { without } from "../support/system-packages.js";

const ADMIN = "deployment-limits-admin-token-0123456789";
let seq = 0;
const recipient = () => `+447911${String(++seq).padStart(6, "0")}`;

interface Tenant {
  accountSid: string;
  propertySid: string;
  auth: string;
}

/** A JSON answer, read loosely (the tests assert its fields). */
type Json = Record<string, any>;
const json = async (res: Response | Promise<Response>): Promise<Json> => (await (await res).json()) as Json;

async function call(base: string, method: string, path: string, auth: string, body?: object): Promise<Response> {
  return fetch(`${base}${path}`, {
    method,
    headers: { authorization: auth, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
}

async function tenant(base: string, limits: object): Promise<Tenant> {
  const op = `Bearer ${ADMIN}`;
  const acc = await json(call(base, "POST", "/admin/v1/Accounts", op, { Name: "Limited" }));
  const prop = await json(call(base, "POST", `/admin/v1/Accounts/${acc.AccountSid}/Properties`, op, { Name: "Site" }));
  const set = await call(base, "POST", `/admin/v1/Accounts/${acc.AccountSid}`, op, limits);
  expect(set.status, await set.clone().text()).toBe(200);
  return { accountSid: acc.AccountSid, propertySid: prop.PropertySid, auth: `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}` };
}

function send(base: string, t: Tenant, text = "hi", extra: object = {}): Promise<Response> {
  return call(base, "POST", `/v2/Properties/${t.propertySid}/Messages`, t.auth, { From: "Acme", To: recipient(), Text: text, ...extra });
}

const secondsToUtcMidnight = () => {
  const now = new Date();
  return (Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000;
};

const runs: [string, boolean][] = [
  ["PostgreSQL", false],
  ["Redis", true],
];

describe.each(runs)("limits across two API and two worker processes, buckets in %s", (_name, useRedis) => {
  const skip = dbKind() !== "postgres" || (useRedis && without("redis"));
  let db: ServiceDatabase;
  let orm: MikroORM;
  let redis: PrivateRedis | undefined;
  const apis: Service[] = [];
  const workers: Service[] = [];

  beforeAll(async () => {
    if (skip) return;
    db = await serviceDatabase();
    if (useRedis) redis = await startPrivateRedis();
    const env = {
      DATABASE_URL: db.url,
      SWITCHBOARD_ADMIN_TOKEN: ADMIN,
      LOG_LEVEL: "warn",
      SEND_RATE_LIMIT: "off",
      ...(redis ? { REDIS_URL: redis.url } : {}),
    };
    const started = await Promise.all([
      startService({ port: await freePort(), env }),
      startService({ port: await freePort(), env }),
      startService({ port: await freePort(), script: "src/worker.ts", waitReady: false, env }),
      startService({ port: await freePort(), script: "src/worker.ts", waitReady: false, env }),
    ]);
    apis.push(started[0], started[1]);
    workers.push(started[2], started[3]);
    orm = await db.open();
  }, 180_000);

  afterAll(async () => {
    await Promise.all([...apis, ...workers].map((s) => s.kill("SIGKILL")));
    await orm?.close(true);
    await redis?.stop();
    await db?.drop();
  });

  it.skipIf(skip)(
    "a request rate of 50/s driven at 200/s for 10 s through both API processes: 50/s ± 10 % accepted",
    async () => {
      const t = await tenant(apis[0].base, { SendRatePerSecond: 50, SendRateBurst: 5 });
      const answers: Promise<number>[] = [];
      const start = performance.now();
      // 2,000 requests, one every 5 ms, alternating between the two processes.
      for (let i = 0; i < 2000; i++) {
        const due = start + i * 5;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        answers.push(send(apis[i % 2].base, t).then((r) => r.status));
      }
      const statuses = await Promise.all(answers);
      const seconds = (performance.now() - start) / 1000;
      const accepted = statuses.filter((s) => s === 200).length;
      console.log(`request rate: ${accepted} of 2000 accepted in ${seconds.toFixed(2)} s = ${(accepted / seconds).toFixed(1)}/s`);
      expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
      expect(accepted / seconds).toBeGreaterThanOrEqual(45);
      expect(accepted / seconds).toBeLessThanOrEqual(55);
    },
    60_000,
  );

  it.skipIf(skip)(
    "MessagesPerSecond 20, 400 sent at once: handed to the carrier over 20 s ± 10 %, none refused; another account's go out at once",
    async () => {
      const capped = await tenant(apis[0].base, { MessagesPerSecond: 20 });
      const other = await tenant(apis[1].base, {});
      const sentAt = Date.now();
      const batches = Array.from({ length: 4 }, (_, i) =>
        call(apis[i % 2].base, "POST", `/v2/Properties/${capped.propertySid}/BatchMessages`, capped.auth, {
          Messages: Array.from({ length: 100 }, () => ({ From: "Acme", To: recipient(), Text: "hi" })),
        }),
      );
      for (const res of await Promise.all(batches)) {
        expect(res.status).toBe(200);
        const body = await json(res);
        expect(body.Messages.filter((m: { MessageSid?: string }) => typeof m.MessageSid === "string")).toHaveLength(100);
      }
      const others = await Promise.all(Array.from({ length: 10 }, (_, i) => send(apis[i % 2].base, other)));
      expect(others.map((r) => r.status)).toEqual(Array.from({ length: 10 }, () => 200));
      const submitted = (t: Tenant) => orm.em.fork().count(Message, { accountSid: t.accountSid, submittedAt: { $ne: null } });
      await expect.poll(() => submitted(other), { timeout: 5000, interval: 100 }).toBe(10);
      const otherDone = (Date.now() - sentAt) / 1000;
      expect(otherDone).toBeLessThan(5);
      await expect.poll(() => submitted(capped), { timeout: 40_000, interval: 250 }).toBe(400);
      const rows = await orm.em.fork().find(Message, { accountSid: capped.accountSid }, { fields: ["submittedAt", "status"] });
      const last = Math.max(...rows.map((m) => m.submittedAt!.getTime()));
      // 400 at 20 per second, the first 20 at once: 19 s from the send to the last.
      const spread = (last - sentAt) / 1000;
      console.log(
        `MessagesPerSecond 20: 400 handed to the carrier ${spread.toFixed(2)} s after the send; the other account's 10 within ${otherDone.toFixed(2)} s`,
      );
      expect(spread).toBeGreaterThanOrEqual(18);
      expect(spread).toBeLessThanOrEqual(22);
      expect(rows.filter((m) => m.status === "Failed")).toEqual([]);
    },
    90_000,
  );

  it.skipIf(skip)(
    "a quota of 100 segments refuses the send that would pass it, with Retry-After to the next UTC midnight",
    async () => {
      const t = await tenant(apis[0].base, { DailySegmentQuota: 100 });
      const three = "c".repeat(307);
      for (let i = 0; i < 33; i++) expect((await send(apis[i % 2].base, t, three)).status).toBe(200);
      const refused = await send(apis[1].base, t, "b".repeat(161));
      expect(refused.status).toBe(429);
      expect((await json(refused)).ResponseStatus.ErrorCode).toBe("QuotaExceeded");
      expect(Number(refused.headers.get("retry-after"))).toBeCloseTo(secondsToUtcMidnight(), -1);
      expect((await send(apis[0].base, t)).status).toBe(200);
      const last = await send(apis[1].base, t);
      expect(last.status).toBe(429);
      const account = await json(call(apis[1].base, "GET", `/admin/v1/Accounts/${t.accountSid}`, `Bearer ${ADMIN}`));
      expect([account.DailySegmentQuota, account.SegmentsToday]).toEqual([100, 100]);
    },
    60_000,
  );

  it.skipIf(skip)(
    "a message still queued after its ValidityPeriod ends Failed with QueueTimeout",
    async () => {
      const t = await tenant(apis[0].base, { MessagesPerSecond: 1 });
      const res = await call(apis[1].base, "POST", `/v2/Properties/${t.propertySid}/BatchMessages`, t.auth, {
        Messages: Array.from({ length: 6 }, () => ({ From: "Acme", To: recipient(), Text: "hi", ValidityPeriod: 2 })),
      });
      expect(res.status).toBe(200);
      const settled = async () => {
        const rows = await orm.em.fork().find(Message, { accountSid: t.accountSid }, { fields: ["status", "errorCode", "submittedAt"] });
        return {
          timedOut: rows.filter((m) => m.status === "Failed" && m.errorCode === "QueueTimeout" && m.submittedAt === null).length,
          sent: rows.filter((m) => m.submittedAt !== null).length,
        };
      };
      await expect.poll(async () => Object.values(await settled()).reduce((a, b) => a + b, 0), { timeout: 15_000, interval: 250 }).toBe(6);
      const { timedOut, sent } = await settled();
      console.log(`ValidityPeriod 2 s at 1/s: ${sent} sent, ${timedOut} QueueTimeout`);
      // One at once and about one a second for the 2 s the messages may wait: the rest time out.
      expect(sent).toBeGreaterThanOrEqual(2);
      expect(sent).toBeLessThanOrEqual(4);
      expect(timedOut).toBe(6 - sent);
    },
    30_000,
  );
});
