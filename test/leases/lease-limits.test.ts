/**
 * Issue 27, defect 3: the 5 concurrent leases to one recipient are counted per account
 * (docs/api.md#leased-senders), so one tenant cannot use up a recipient's leases for
 * every other tenant; a pool number is still leased to a given recipient by one lease at a time,
 * whatever the account, so every reply matches exactly one lease.
 */
import { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorCodeOf } from "../../src/common/errors.js";
import { newSid } from "../../src/common/sid.js";
import { allocateLease } from "../../src/leases/lease-allocator.js";
import { dbKind } from "../support/db.js";
import { addPoolNumbers, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const onPostgres = dbKind() === "postgres";
const DAY = 86_400_000;

let t: TestApp;
let a: Tenant;
let b: Tenant;
let pool: string[];
let seq = 0;
/** A fresh US recipient (no alphanumeric senders there: a blank From is leased anyway). */
const recipient = () => `+1415555${String(3000 + ++seq).padStart(4, "0")}`;

beforeAll(async () => {
  // No send rate limit: the test clock stands still, so the buckets would never refill.
  t = await createTestApp({ config: { sendRateLimit: 0 } });
  a = await createTenant(t.app);
  b = await createTenant(t.app);
  pool = await addPoolNumbers(t.app, 8, 40);
}, 120_000);
afterAll(async () => {
  await t?.close();
});

function send(tenant: Tenant, body: object) {
  return t.app.inject({ method: "POST", url: `/v2/Properties/${tenant.propertySid}/Messages`, headers: { authorization: tenant.auth }, payload: body });
}
/** A leased send 14 days ahead (the probe's way to hold a lease longest for nothing sent yet). */
const leasedBody = (to: string, text = "hold") => ({ From: "", To: to, Text: text, Schedule: Math.floor(t.clock.now().getTime() / 1000) + 14 * 86_400 });

/** The live leases to `to`, as the table holds them. */
async function liveLeases(to: string): Promise<{ pool_number: string; account_sid: string }[]> {
  return t.db.orm.em.fork().execute("select pool_number, account_sid from leases where recipient = ? and not released order by pool_number", [to]);
}

describe("the 5 concurrent leases to a recipient are counted per account (issue 27)", () => {
  it("account A's 6th lease to R is 400 LeaseLimitReached; account B's send to R still gets a pool number none of A's leases to R hold", async () => {
    const r = recipient();
    const held: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await send(a, leasedBody(r));
      expect(res.statusCode, res.body).toBe(200);
      held.push(res.json().From);
    }
    expect(held).toEqual(pool.slice(0, 5));

    const sixth = await send(a, leasedBody(r));
    expect(sixth.statusCode).toBe(400);
    expect(sixth.json()).toEqual({
      ResponseStatus: {
        ErrorCode: "LeaseLimitReached",
        Message: `This account already holds 5 live leased senders to ${r}; a lease lasts 30 days. Send from an E164 or alphanumeric sender instead.`,
        Errors: [],
      },
    });

    const other = await send(b, leasedBody(r, "B's offer"));
    expect(other.statusCode, other.body).toBe(200);
    expect(other.json()).toMatchObject({ AccountSid: b.accountSid, To: r, Text: "B's offer", From: pool[5] });
    expect(held).not.toContain(other.json().From);

    const live = await liveLeases(r);
    expect(live).toHaveLength(6);
    // A pool number never holds two live leases to the same recipient.
    expect(new Set(live.map((l) => l.pool_number)).size).toBe(live.length);
  });

  it("B holds its own 5 beside A's 5; with no pool number left free for R, the next send gets NoLeasedNumberAvailable", async () => {
    const r = recipient();
    for (let i = 0; i < 5; i++) expect((await send(a, leasedBody(r))).statusCode).toBe(200);
    const bFrom: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await send(b, leasedBody(r));
      expect(res.statusCode, res.body).toBe(200);
      bFrom.push(res.json().From);
    }
    // 8 pool numbers, all now leased to R (5 by A, 3 by B): B is under its own 5 but no number is free.
    expect(bFrom).toEqual(pool.slice(5, 8));
    const none = await send(b, leasedBody(r));
    expect(none.statusCode).toBe(400);
    expect(none.json().ResponseStatus).toEqual({
      ErrorCode: "NoLeasedNumberAvailable",
      Message: `No pool number is free for ${r}; send from an E164 or alphanumeric sender, or ask the operator to add pool numbers.`,
      Errors: [],
    });
    // A, at its own 5, hears of its own limit first.
    expect((await send(a, leasedBody(r))).json().ResponseStatus.ErrorCode).toBe("LeaseLimitReached");
    const live = await liveLeases(r);
    expect(live.map((l) => l.pool_number)).toEqual(pool);
    expect(live.filter((l) => l.account_sid === a.accountSid)).toHaveLength(5);
  });

  it("an account's slot frees once its own lease expires (day 30), and another account's leases do not count against it", async () => {
    const r = recipient();
    const start = t.clock.now().getTime();
    for (let i = 0; i < 5; i++) expect((await send(b, { To: r, Text: "b" })).statusCode).toBe(200);
    for (let i = 0; i < 2; i++) expect((await send(a, { To: r, Text: "a" })).statusCode).toBe(200);
    expect((await send(b, { To: r, Text: "b6" })).json().ResponseStatus.ErrorCode).toBe("LeaseLimitReached");
    t.clock.set(start + 30 * DAY);
    const again = await send(b, { To: r, Text: "b, day 30" });
    expect(again.statusCode, again.body).toBe(200);
    t.clock.set(start);
  });
});

describe.runIf(onPostgres)("concurrent sends by one account to one recipient (PostgreSQL)", () => {
  it("12 at once take exactly 5 leases: the others get LeaseLimitReached, never a 6th lease or a 500", { timeout: 120_000 }, async () => {
    for (let round = 0; round < 10; round++) {
      const r = recipient();
      const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => send(i % 4 === 3 ? b : a, leasedBody(r))));
      const fromA = answers.filter((_, i) => i % 4 !== 3);
      const fromB = answers.filter((_, i) => i % 4 === 3);
      expect(fromA.filter((x) => x.statusCode === 200)).toHaveLength(5);
      for (const x of fromA.filter((y) => y.statusCode !== 200)) {
        expect(x.statusCode, x.body).toBe(400);
        expect(x.json().ResponseStatus.ErrorCode).toBe("LeaseLimitReached");
      }
      // B's three fit beside A's five in the pool of 8.
      for (const x of fromB) expect(x.statusCode, x.body).toBe(200);
      const live = await liveLeases(r);
      expect(live.filter((l) => l.account_sid === a.accountSid)).toHaveLength(5);
      expect(new Set(live.map((l) => l.pool_number)).size).toBe(8);
    }
  });

  it("12 allocations in 12 concurrent transactions (the service's allocator, no group commit between them) take exactly 5", { timeout: 120_000 }, async () => {
    for (let round = 0; round < 10; round++) {
      const r = recipient();
      const outcomes = await Promise.allSettled(
        Array.from({ length: 12 }, () =>
          t.db.orm.em.fork().transactional((tx) => allocateLease(tx, { recipient: r, accountSid: a.accountSid, messageSid: newSid("MG"), now: t.clock.now() })),
        ),
      );
      expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(5);
      for (const o of outcomes) {
        if (o.status === "rejected") {
          expect(o.reason).toBeInstanceOf(ConnectError);
          expect(errorCodeOf(o.reason as ConnectError)).toBe("LeaseLimitReached");
        }
      }
      const live = await liveLeases(r);
      expect(live).toHaveLength(5);
      expect(new Set(live.map((l) => l.pool_number)).size).toBe(5);
    }
  });
});
