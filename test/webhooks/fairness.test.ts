/**
 * Webhook fairness (issue 12): no account's calls wait behind another account's. The issue's
 * scenario on a listening app with its background loops and real receivers (account A: 300
 * receipts to an endpoint that answers in 12 s, past the 10 s call timeout; account B's one
 * receipt must not wait behind them), then the claim's rules one by one with the worker driven
 * by hand: round-robin across accounts, a few slots per (account, host), first attempts before
 * retries at equal due time, and several workers on one database never making a call twice.
 */
import type { AddressInfo } from "node:net";
import type { MikroORM } from "@mikro-orm/sql";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createOrm } from "../../src/db/orm.js";
import { entities } from "../../src/entities.js";
import { createWebhookWorker, webhookBackoffMs, type WebhookWorkerOptions } from "../../src/webhooks/webhook-worker.js";
import { dbKind } from "../support/db.js";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { startReceiver, type Receiver } from "../support/webhook-receiver.js";

const T0 = new Date(Math.floor(Date.now() / 1000) * 1000);
let recipientSeq = 0;
const recipient = () => `+447700${String(800_000 + ++recipientSeq)}`;

/** Sends `n` messages with a delivery receipt webhook, in batches of up to 100, over `send`. */
async function sendMany(send: (path: string, body: unknown) => Promise<{ status: number; body: any }>, tenant: Tenant, n: number, uri: string) {
  const sids: string[] = [];
  for (let done = 0; done < n; done += 100) {
    const items = Array.from({ length: Math.min(100, n - done) }, () => ({
      From: tenant.ownedNumber,
      To: recipient(),
      Text: "hi",
      DeliveryReceiptWebhookUri: uri,
    }));
    const res = await send(`/v2/Properties/${tenant.propertySid}/BatchMessages`, { Messages: items });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    for (const m of res.body.Messages) {
      expect(m.MessageSid, JSON.stringify(m)).toMatch(/^MG/);
      sids.push(m.MessageSid);
    }
  }
  return sids;
}

async function countDeliveries(orm: MikroORM, accountSid: string, status?: string): Promise<number> {
  const [row] = await orm.em
    .fork()
    .execute<{ n: string | number }[]>(
      `select count(*) as n from webhook_deliveries where account_sid = ?${status ? " and status = ?" : ""}`,
      status ? [accountSid, status] : [accountSid],
    );
  return Number(row.n);
}

describe("account A's 300 receipts to a 12 s endpoint do not hold up account B's (listening app)", () => {
  let t: TestApp;
  let base: string;
  let slow: Receiver;
  let fast: Receiver;

  beforeAll(async () => {
    slow = await startReceiver();
    slow.answer = () => ({ status: 200, afterMs: 12_000 });
    fast = await startReceiver();
    // Defaults throughout (64 slots, 4 per account and host, 10 s per call), background loops on.
    t = await createTestApp({ now: T0, webhookAllowPrivate: true, engine: { loops: true }, config: { sendRateLimit: 0 } });
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    // Cut A's held calls so the engine's stop does not wait out their timeouts.
    const closing = t?.close();
    await slow?.close();
    await closing;
    await fast?.close();
  });

  it("B's receipt arrives while all of A's backlog is still queued", { timeout: 120_000 }, async () => {
    const a = await createTenant(t.app);
    const b = await createTenant(t.app);
    const post = (auth: string) => async (path: string, body: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method: "POST",
        headers: { authorization: auth, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: await res.json() };
    };
    await sendMany(post(a.auth), a, 300, slow.url("/a"));
    await vi.waitFor(async () => expect(await countDeliveries(t.db.orm, a.accountSid)).toBe(300), { timeout: 60_000, interval: 100 });
    // B's receipt comes due after all of A's: oldest-first would put it last.
    t.clock.advance(1000);

    const sent = performance.now();
    const [sid] = await sendMany(post(b.auth), b, 1, fast.url("/b"));
    // Well under A's 10 s call timeout: B did not wait for any of A's calls to end.
    await vi.waitFor(() => expect(fast.requests).toHaveLength(1), { timeout: 9000, interval: 10 });
    const latency = fast.requests[0].at - sent;
    expect(JSON.parse(fast.requests[0].body)).toMatchObject({ MessageSid: sid, AccountSid: b.accountSid });
    // A holds at most its 4 slots for that host; none of its calls has ended, all 300 still queued.
    const aInFlight = slow.requests.length;
    expect(aInFlight).toBeGreaterThan(0);
    expect(aInFlight).toBeLessThanOrEqual(4);
    expect(await countDeliveries(t.db.orm, a.accountSid, "Pending")).toBe(300);
    await vi.waitFor(async () => expect(await countDeliveries(t.db.orm, b.accountSid, "Delivered")).toBe(1), { timeout: 5000, interval: 20 });
    console.log(
      `[fairness ${dbKind()}] A: 300 receipts queued to a 12 s endpoint, ${aInFlight} in flight; B's receipt arrived ${latency.toFixed(0)} ms after B's send`,
    );
  });
});

describe("the claim, driven by hand", () => {
  let t: TestApp;
  let rx: Receiver;
  const worker = (o: Partial<WebhookWorkerOptions> = {}) => createWebhookWorker({ orm: t.db.orm, clock: t.clock, allowPrivate: true, ...o });
  const send = (tenant: Tenant) => async (path: string, body: unknown) => {
    const res = await t.app.inject({ method: "POST", url: path, headers: { authorization: tenant.auth }, payload: body as object });
    return { status: res.statusCode, body: res.json() };
  };
  /** Queues `n` receipts for `tenant` to `path` on rx: sends, dispatches, waits for the reports. */
  async function queue(tenant: Tenant, n: number, path: string, host = "127.0.0.1") {
    const before = await countDeliveries(t.db.orm, tenant.accountSid);
    await sendMany(send(tenant), tenant, n, rx.url(path, host));
    while ((await t.engine!.dispatcher.tick()) > 0);
    await vi.waitFor(async () => expect(await countDeliveries(t.db.orm, tenant.accountSid)).toBe(before + n), { timeout: 10_000, interval: 20 });
  }
  const paths = () => rx.requests.map((r) => r.url);

  beforeAll(async () => {
    rx = await startReceiver();
    t = await createTestApp({ now: T0, webhookAllowPrivate: true, engine: true, config: { sendRateLimit: 0 } });
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  it("deals due calls round-robin across accounts: each account's first before any account's second", async () => {
    const [a, b, c] = [await createTenant(t.app), await createTenant(t.app), await createTenant(t.app)];
    t.clock.set(T0);
    await queue(a, 6, "/rr-a");
    t.clock.advance(1000);
    await queue(b, 2, "/rr-b");
    t.clock.advance(1000);
    await queue(c, 1, "/rr-c");
    rx.requests.length = 0;
    const wk = worker({ concurrency: 3 });
    expect(await wk.tick()).toBe(3);
    expect(paths().sort()).toEqual(["/rr-a", "/rr-b", "/rr-c"]);
    expect(await wk.tick()).toBe(3);
    expect(paths().slice(3).sort()).toEqual(["/rr-a", "/rr-a", "/rr-b"]);
    expect(await wk.tick()).toBe(3);
    expect(await wk.tick()).toBe(0);
    expect(paths().filter((p) => p === "/rr-a")).toHaveLength(6);
  });

  it("holds at most the per-host slots for one (account, host), counting calls already in flight; other hosts and accounts go on", async () => {
    const [a, b] = [await createTenant(t.app), await createTenant(t.app)];
    t.clock.set(T0);
    await queue(a, 5, "/cap-a");
    await queue(a, 1, "/cap-a-other", "localhost");
    await queue(b, 1, "/cap-b");
    rx.requests.length = 0;
    rx.answer = (_n, req) => (req.url === "/cap-a" ? { status: 200, afterMs: 60_000 } : 200);
    const wk = worker({ concurrencyPerHost: 2 });
    expect(await wk.fill()).toBe(4); // 2 of A's to 127.0.0.1, A's one to localhost, B's one
    await vi.waitFor(() => expect(rx.requests).toHaveLength(4));
    expect(paths().sort()).toEqual(["/cap-a", "/cap-a", "/cap-a-other", "/cap-b"]);
    await vi.waitFor(() => expect(wk.inFlight()).toBe(2));
    expect(await wk.fill()).toBe(0); // A's two slots for 127.0.0.1 are taken, in this process
    expect(wk.inFlight()).toBe(2);
    // Once A's held calls end, its other three go two at a time.
    rx.answer = () => 200;
    rx.releaseHeld();
    await wk.drain();
    expect(await wk.tick()).toBe(2);
    expect(await wk.tick()).toBe(1);
    expect(await wk.tick()).toBe(0);
    expect(paths().filter((p) => p === "/cap-a")).toHaveLength(5);
  });

  it("holds at most the per-account slots for one account across all its hosts: 40 black-hole hosts do not stop another account's call", async () => {
    const [a, b] = [await createTenant(t.app), await createTenant(t.app)];
    t.clock.set(T0);
    // 40 host names, every one resolving to the receiver (a black hole for A: it holds each call).
    const hosts = Array.from({ length: 40 }, (_, i) => `h${i}.black-hole.test`);
    for (const host of hosts) await queue(a, 2, "/hole-a", host);
    rx.requests.length = 0;
    rx.answer = (_n, req) => (req.url === "/hole-a" ? { status: 200, afterMs: 60_000 } : 200);
    const toReceiver = async () => [{ address: "127.0.0.1", family: 4 as const }];
    const wk = worker({ concurrency: 64, concurrencyPerHost: 4, concurrencyPerAccount: 8, resolve: toReceiver });
    expect(await wk.fill()).toBe(8); // A's share, though its 40 hosts could take every slot
    await vi.waitFor(() => expect(rx.requests).toHaveLength(8));
    const perHost = new Map<string, number>();
    for (const r of rx.requests) perHost.set(r.headers.host, (perHost.get(r.headers.host) ?? 0) + 1);
    expect(Math.max(...perHost.values())).toBeLessThanOrEqual(4);
    expect(await wk.fill()).toBe(0); // A's eight are still out
    // B's receipt is queued later, while A's calls hang: it goes out at once.
    await queue(b, 1, "/hole-b");
    expect(await wk.fill()).toBe(1);
    await vi.waitFor(() => expect(paths()).toContain("/hole-b"));
    expect(wk.inFlight()).toBe(8);
    expect(paths().filter((p) => p === "/hole-a")).toHaveLength(8);
    rx.answer = () => 200;
    rx.releaseHeld();
    await wk.drain();
    for (let k; (k = await wk.tick()) > 0;) expect(k).toBeLessThanOrEqual(8);
    expect(await countDeliveries(t.db.orm, a.accountSid, "Pending")).toBe(0);
  });

  it("at equal due time makes a first attempt before a retry", async () => {
    const a = await createTenant(t.app);
    t.clock.set(T0);
    rx.answer = (_n, req) => (req.url === "/retry" ? 500 : 200);
    await queue(a, 1, "/retry");
    rx.requests.length = 0;
    expect(await worker().tick()).toBe(1); // fails: due again in 5 s
    t.clock.advance(webhookBackoffMs(1));
    await queue(a, 1, "/first"); // queued now, due now: the same due time as the retry
    rx.requests.length = 0;
    const one = worker({ concurrency: 1 });
    expect(await one.tick()).toBe(1);
    expect(await one.tick()).toBe(1);
    expect(paths()).toEqual(["/first", "/retry"]);
    rx.answer = () => 200;
  });

  it("several workers on one database make each call once", { timeout: 60_000 }, async () => {
    const tenants = [await createTenant(t.app), await createTenant(t.app), await createTenant(t.app)];
    t.clock.set(T0);
    for (const [i, tenant] of tenants.entries()) await queue(tenant, 40, `/multi-${i}`);
    rx.requests.length = 0;
    rx.answer = () => 200;
    // On PostgreSQL each worker has its own connection pool, as separate processes would.
    const orms: MikroORM[] = [];
    if (dbKind() === "postgres") {
      const url = new URL(process.env.DATABASE_URL!);
      url.pathname = `/${t.db.orm.config.get("dbName")}`;
      for (let i = 0; i < 3; i++) orms.push(await createOrm({ entities, databaseUrl: url.toString(), poolMax: 4 }));
    } else orms.push(t.db.orm, t.db.orm, t.db.orm);
    try {
      const workers = orms.map((orm) => createWebhookWorker({ orm, clock: t.clock, allowPrivate: true, concurrency: 8, concurrencyPerHost: 8 }));
      const made = await Promise.all(
        workers.map(async (w) => {
          let n = 0;
          for (let k; (k = await w.tick()) > 0;) n += k;
          return n;
        }),
      );
      expect(made.reduce((x, y) => x + y, 0)).toBe(120);
      expect(rx.requests).toHaveLength(120);
      expect(new Set(rx.requests.map((r) => r.headers["webhook-id"])).size).toBe(120);
      for (const tenant of tenants) expect(await countDeliveries(t.db.orm, tenant.accountSid, "Pending")).toBe(0);
      console.log(`[webhook claims ${dbKind()}] 120 calls, 3 workers: made ${made.join(" / ")}`);
    } finally {
      if (dbKind() === "postgres") for (const orm of orms) await orm.close(true);
    }
  });
});
