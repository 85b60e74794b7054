/**
 * This process's copies of the rate cards (src/billing/rate-cache.ts, docs/billing.md#rate-lookup-per-send):
 * the lookup rule on a card in memory is sb_rate_for's (longest prefix in effect, the latest
 * EffectiveFrom not after the send, to the millisecond); a card is loaded on first use and checked
 * again after recheckMs; and a send is priced exactly even while the copy is stale, because the
 * statement takes a copy's price only where the card is still at the copy's version.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateCache, lookupRate, type RateCache } from "../../src/billing/rate-cache.js";
import { replaceRates } from "../../src/billing/rate-card-store.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type TestApp } from "../support/harness.js";

const T = 1_800_000_000;

describe("lookupRate: sb_rate_for's rule on a card in memory", () => {
  const card = new Map([
    ["+61", { from: [0], price: [70_000n] }],
    // +614: 0.0525 from the start, 0.06 from T (exactly).
    ["+614", { from: [0, T * 1000], price: [52_500n, 60_000n] }],
    // +6141: only a future rate: until T it does not price anything, and the shorter +614 does.
    ["+6141", { from: [T * 1000], price: [10_000n] }],
  ]);

  it("takes the longest prefix with a rate in effect, and of it the latest EffectiveFrom not after the send, to the millisecond", () => {
    expect(lookupRate(card, "+61298765432", T * 1000)).toBe(70_000n);
    expect(lookupRate(card, "+61412345678", T * 1000 - 1)).toBe(52_500n);
    expect(lookupRate(card, "+61412345678", T * 1000)).toBe(10_000n);
    expect(lookupRate(card, "+61422345678", T * 1000)).toBe(60_000n);
    expect(lookupRate(card, "+447700900123", T * 1000)).toBeNull();
    // A prefix is at least "+" and a digit; the destination itself is the longest one tried.
    expect(lookupRate(card, "+61", 0)).toBe(70_000n);
    // Probing only the lengths the card has (longest first) gives the same answers.
    const lengths = [5, 4, 3];
    expect(lookupRate(card, "+61412345678", T * 1000 - 1, lengths)).toBe(52_500n);
    expect(lookupRate(card, "+61412345678", T * 1000, lengths)).toBe(10_000n);
    expect(lookupRate(card, "+61", 0, lengths)).toBe(70_000n);
    expect(lookupRate(card, "+447700900123", T * 1000, lengths)).toBeNull();
  });
});

describe(`the rate cache on a database (${dbKind()})`, () => {
  let db: TestOrm;
  let t: TestApp;
  let clock = 0;
  let cache: RateCache;

  beforeAll(async () => {
    db = await createTestOrm();
    cache = createRateCache({ orm: db.orm, recheckMs: 1000, now: () => clock });
    t = await createTestApp({ db, rates: cache });
  });
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  const em = () => db.orm.em.fork();
  const rate = (prefix: string, price: bigint) => ({ prefix, pricePerSegment: price, effectiveFrom: 0 });
  /** The cache's answer once it has loaded `card` (it loads in the background). */
  async function loaded(card: string, destination: string) {
    await expect.poll(() => cache.rateFor(card, destination, t.clock.now()), { timeout: 5000, interval: 20 }).toBeDefined();
    return cache.rateFor(card, destination, t.clock.now())!;
  }
  const version = async (card: string) =>
    (await executeBound<{ version: string }>(em(), "select version::text as version from rate_cards where name = ?", [card]))[0].version;

  it("loads a card on first use, answers from memory with its version, and sees a new version only after recheckMs", async () => {
    await em().transactional((tx) => replaceRates(tx, "mem", [rate("+614", 52_500n), rate("+61", 70_000n)], t.clock.now()));
    expect(cache.rateFor("mem", "+61412345678", t.clock.now())).toBeUndefined();
    const first = await loaded("mem", "+61412345678");
    expect(first).toEqual({ version: await version("mem"), perSegment: 52_500n });
    expect(cache.rateFor("mem", "+447700900123", t.clock.now())).toEqual({ version: first.version, perSegment: null });

    await em().transactional((tx) => replaceRates(tx, "mem", [rate("+614", 40_000n)], t.clock.now()));
    const replaced = await version("mem");
    expect(replaced).not.toBe(first.version);
    // Before recheckMs the copy is kept (and the statement will not take it: see below).
    expect(cache.rateFor("mem", "+61412345678", t.clock.now())).toEqual(first);
    clock += 1000;
    await expect.poll(() => cache.rateFor("mem", "+61412345678", t.clock.now())?.version, { timeout: 5000, interval: 20 }).toBe(replaced);
    expect(cache.rateFor("mem", "+61412345678", t.clock.now())).toEqual({ version: replaced, perSegment: 40_000n });
  });

  it("a card that does not exist is not asked for again before recheckMs", async () => {
    expect(cache.rateFor("absent", "+61412345678", t.clock.now())).toBeUndefined();
    await new Promise((r) => setTimeout(r, 100));
    expect(cache.rateFor("absent", "+61412345678", t.clock.now())).toBeUndefined();
  });

  it("a send is priced by the card as it is now, even while this process's copy is of an older version", async () => {
    const op = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const put = (price: string) =>
      t.app.inject({ method: "PUT", url: "/admin/v1/RateCards/live", headers: op, payload: { Rates: [{ Prefix: "+614", PricePerSegment: price }] } });
    expect((await put("0.0525")).statusCode).toBe(200);
    const tn = await createTenant(t.app);
    const set = await t.app.inject({ method: "POST", url: `/admin/v1/Accounts/${tn.accountSid}`, headers: op, payload: { RateCard: "live" } });
    expect(set.statusCode, set.body).toBe(200);
    const send = async () => {
      const res = await t.app.inject({
        method: "POST",
        url: `/v2/Properties/${tn.propertySid}/Messages`,
        headers: { authorization: tn.auth },
        payload: { From: tn.ownedNumber, To: "+61412345678", Text: "hi" },
      });
      expect(res.statusCode, res.body).toBe(200);
      const [row] = await executeBound<{ price: string }>(em(), "select price::text as price from messages where sid = ?", [res.json().MessageSid]);
      return row.price;
    };
    expect(await send()).toBe("52500");
    const copy = await loaded("live", "+61412345678");
    expect(copy.perSegment).toBe(52_500n);
    // From memory, at the card's version.
    expect(await send()).toBe("52500");

    // The card changes; this process's copy is now stale (recheckMs has not passed) and still says 0.0525.
    expect((await put("0.0800")).statusCode).toBe(200);
    expect(cache.rateFor("live", "+61412345678", t.clock.now())).toEqual(copy);
    expect(await send()).toBe("80000");

    // The account moves to another card (its cached account may still name "live"): that card prices it.
    expect(
      (await t.app.inject({ method: "PUT", url: "/admin/v1/RateCards/other", headers: op, payload: { Rates: [{ Prefix: "+61", PricePerSegment: "0.01" }] } }))
        .statusCode,
    ).toBe(200);
    expect((await t.app.inject({ method: "POST", url: `/admin/v1/Accounts/${tn.accountSid}`, headers: op, payload: { RateCard: "other" } })).statusCode).toBe(
      200,
    );
    expect(await send()).toBe("10000");
  });
});
