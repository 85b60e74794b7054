/**
 * Reads (every Get and List method) under the read gate (issue 27): a per-account cap with a short
 * queue, then 429 RateLimited with Retry-After; a process-wide cap below the pool; a statement
 * timeout answered as 503 ServiceUnavailable. The gate's rules are unit tests; the HTTP tests hold
 * reads inside PostgreSQL with a table lock (PGlite's one connection cannot hold one read while
 * others run, so there only the rules and the sequential answers run).
 */
import type { LightMyRequestResponse } from "fastify";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { AddressService } from "../../gen/switchboard/v2/addresses_pb.js";
import { BillingService } from "../../gen/switchboard/v2/billing_pb.js";
import { SenderIdService } from "../../gen/switchboard/v2/sender_ids_pb.js";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { NumberService } from "../../gen/switchboard/v2/numbers_pb.js";
import { loadConfig } from "../../src/config.js";
import { createReadGate, isReadMethod } from "../../src/rpc/read-gate.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

/** Lets pending promise callbacks run. */
const settle = () => new Promise((r) => setImmediate(r));

describe("the read gate's rules", () => {
  it("lets an account run perAccount reads, queues queuePerAccount more, refuses the next with RateLimited and Retry-After", async () => {
    const gate = createReadGate({ perAccount: 2, queuePerAccount: 1, global: 10 });
    const a1 = await gate.acquire("A");
    await gate.acquire("A");
    let third = false;
    const a3 = gate.acquire("A").then((release) => ((third = true), release));
    await settle();
    expect([gate.inFlight("A"), gate.waiting("A"), third]).toEqual([2, 1, false]);
    const refused = await gate.acquire("A").catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 8, metadata: expect.anything() });
    expect((refused as { metadata: Headers }).metadata.get("retry-after")).toBe("1");
    expect(String((refused as Error).message)).toContain("may have 2 running and 1 waiting");
    // Another account is not held by A's.
    const b1 = await gate.acquire("B");
    expect(gate.inFlight("B")).toBe(1);
    a1();
    a1(); // freeing twice frees once
    (await a3)();
    expect([third, gate.inFlight("A"), gate.waiting("A")]).toEqual([true, 1, 0]);
    b1();
  });

  it("caps the reads of all accounts together at global, first come first served", async () => {
    const gate = createReadGate({ perAccount: 4, queuePerAccount: 4, global: 3 });
    const held = [await gate.acquire("A"), await gate.acquire("A"), await gate.acquire("B")];
    const order: string[] = [];
    const c = gate.acquire("C").then((r) => (order.push("C"), r));
    const a = gate.acquire("A").then((r) => (order.push("A"), r));
    await settle();
    expect([gate.inFlight(), gate.waiting()]).toEqual([3, 2]);
    held[0]();
    (await c)();
    held[1]();
    (await a)();
    expect(order).toEqual(["C", "A"]);
    held[2]();
    expect([gate.inFlight(), gate.waiting()]).toEqual([0, 0]);
  });

  it("forgets a waiting read whose client went away", async () => {
    const gate = createReadGate({ perAccount: 1, queuePerAccount: 1, global: 10 });
    const first = await gate.acquire("A");
    const gone = new AbortController();
    const waiting = gate.acquire("A", gone.signal);
    gone.abort(new Error("client gone"));
    await expect(waiting).rejects.toThrow("client gone");
    expect(gate.waiting("A")).toBe(0);
    first();
    expect(gate.inFlight("A")).toBe(0);
  });

  it("counts as reads exactly the methods whose REST route is a GET", () => {
    const reads = [MessagingService, AddressService, NumberService, SenderIdService, BillingService, AdminService].flatMap((s) =>
      s.methods.filter(isReadMethod).map((m) => `${s.name}.${m.name}`),
    );
    expect(reads.sort()).toEqual([
      "AddressService.GetAddress",
      "AddressService.ListAddresses",
      "AdminService.GetAccount",
      "AdminService.GetCarrierStatus",
      "AdminService.GetMessageTimeline",
      "AdminService.GetRateCard",
      "AdminService.GetRoutes",
      "AdminService.GetSmppCredentials",
      "AdminService.GetStats",
      "AdminService.GetUsage",
      "AdminService.ListAccountOptOuts",
      "AdminService.ListAccounts",
      "AdminService.ListAddresses",
      "AdminService.ListBalanceEntries",
      "AdminService.ListCarriers",
      "AdminService.ListEmails",
      "AdminService.ListHandsetMessages",
      "AdminService.ListLeases",
      "AdminService.ListNumbers",
      "AdminService.ListProperties",
      "AdminService.ListRateCards",
      "AdminService.ListSenderIds",
      "AdminService.ListSmppBinds",
      "AdminService.ListWebhookDeliveries",
      "AdminService.SearchMessages",
      "BillingService.GetBalance",
      "BillingService.GetUsage",
      "BillingService.ListBalanceEntries",
      "MessagingService.GetMessage",
      "MessagingService.ListMessages",
      "NumberService.ListNumbers",
      "SenderIdService.ListSenderIds",
    ]);
  });

  it("reads its limits from the environment, with documented defaults", () => {
    expect(loadConfig({ DATABASE_URL: "postgres://x/y" }).reads).toEqual({ perAccount: 1, queuePerAccount: 8, global: 6, statementTimeoutMs: 5000 });
    expect(loadConfig({ DATABASE_URL: "memory://" }).reads.global).toBe(1);
    const set = loadConfig({ READ_CONCURRENCY_PER_ACCOUNT: "2", READ_QUEUE_PER_ACCOUNT: "0", READ_CONCURRENCY: "3", READ_STATEMENT_TIMEOUT_MS: "250" }).reads;
    expect(set).toEqual({ perAccount: 2, queuePerAccount: 0, global: 3, statementTimeoutMs: 250 });
    expect(() => loadConfig({ READ_CONCURRENCY_PER_ACCOUNT: "0" })).toThrow(/READ_CONCURRENCY_PER_ACCOUNT must be a whole number of at least 1/);
  });
});

describe.skipIf(dbKind() !== "postgres")("reads over HTTP, held inside PostgreSQL by a table lock", () => {
  let t: TestApp | undefined;
  let unlock: (() => void) | undefined;
  afterEach(async () => {
    unlock?.();
    await t?.close();
    t = undefined;
  });

  const get = (tenant: Tenant, url: string) => t!.app.inject({ method: "GET", url, headers: { authorization: tenant.auth } });
  const addresses = (tenant: Tenant) => get(tenant, `/v2/Accounts/${tenant.accountSid}/Addresses`);
  /** Answers within ms, or fails (a read held behind the lock would not answer). */
  const within = <T>(p: Promise<T>, ms: number, what: string) =>
    Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms))]);

  /** Locks `addresses` on a connection of its own until unlock(); reads of that table wait in PostgreSQL. */
  async function lockAddresses(): Promise<void> {
    let locked!: () => void;
    const ready = new Promise<void>((r) => (locked = r));
    const released = new Promise<void>((r) => (unlock = r));
    void t!.db.orm.em.fork().transactional(async (tx) => {
      await tx.execute("lock table addresses in access exclusive mode");
      locked();
      await released;
    });
    await ready;
  }
  async function waitingOnLocks(n: number): Promise<void> {
    await vi.waitFor(
      async () => {
        const [row] = await t!.db.orm.em
          .fork()
          .execute<{ n: string }[]>("select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'");
        expect(Number(row.n)).toBe(n);
      },
      { timeout: 5000, interval: 20 },
    );
  }

  it("with 2 reads per account, A's third read is 429 RateLimited while B's read and send go on", { timeout: 30_000 }, async () => {
    t = await createTestApp({ config: { sendRateLimit: 0, reads: { perAccount: 2, queuePerAccount: 0, global: 6, statementTimeoutMs: 20_000 } } });
    const [a, b] = [await createTenant(t.app), await createTenant(t.app)];
    expect((await addresses(a)).statusCode).toBe(200); // A's credentials are now cached
    await lockAddresses();
    const held = [addresses(a), addresses(a)];
    await waitingOnLocks(2);

    const third: LightMyRequestResponse = await within(get(a, `/v2/Properties/${a.propertySid}/Messages`), 2000, "A's third read");
    expect(third.statusCode).toBe(429);
    expect(third.headers["retry-after"]).toBe("1");
    expect(third.json()).toEqual({
      ResponseStatus: {
        ErrorCode: "RateLimited",
        Message: "Too many reads at once: an account may have 2 running and 0 waiting. Retry after 1 second.",
        Errors: [],
      },
    });

    const bRead = await within(get(b, `/v2/Properties/${b.propertySid}/Messages?Status=Received`), 2000, "B's read");
    expect(bRead.statusCode, bRead.body).toBe(200);
    expect(bRead.json()).toMatchObject({ Messages: [], TotalCount: 0 });
    const bSend = await within(
      t.app.inject({
        method: "POST",
        url: `/v2/Properties/${b.propertySid}/Messages`,
        headers: { authorization: b.auth },
        payload: { From: b.ownedNumber, To: "+447700900123", Text: "hi" },
      }),
      2000,
      "B's send",
    );
    expect(bSend.statusCode, bSend.body).toBe(200);
    // The operator's reads have their own slots.
    const ops = await within(
      t.app.inject({ method: "GET", url: "/admin/v1/Accounts", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
      2000,
      "operator read",
    );
    expect(ops.statusCode).toBe(200);

    unlock!();
    for (const res of await Promise.all(held)) expect(res.statusCode, res.body).toBe(200);
    expect((await addresses(a)).statusCode).toBe(200); // the slots are free again
  });

  it("a read past the statement timeout is 503 ServiceUnavailable with Retry-After, and frees its slots", { timeout: 30_000 }, async () => {
    t = await createTestApp({ config: { reads: { perAccount: 1, queuePerAccount: 0, global: 6, statementTimeoutMs: 300 } } });
    const a = await createTenant(t.app);
    await lockAddresses();
    const res = await within(addresses(a), 3000, "the timed-out read");
    expect(res.statusCode).toBe(503);
    expect(res.headers["retry-after"]).toBe("2");
    expect(res.json()).toEqual({
      ResponseStatus: {
        ErrorCode: "ServiceUnavailable",
        Message: "The read took longer than 300 ms and was stopped. Narrow it (a Status, a date range, a smaller Results_Count) or retry later.",
        Errors: [],
      },
    });
    unlock!();
    // Its one slot was freed: the next read runs.
    expect((await addresses(a)).statusCode).toBe(200);
  });
});
