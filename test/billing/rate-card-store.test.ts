/**
 * The rate card store and its lookup on the database: the longest prefix, an
 * EffectiveFrom at its exact second, the batch form, the lateral join a facts statement uses, a
 * replace that is whole, a staged import committed whole or not at all, and a 100,000-rate card
 * read through the primary key.
 */
import { describe, expect, it } from "vitest";
import { dbKind, useTestOrm } from "../support/db.js";
import { executeBound } from "../../src/db/bound-sql.js";
import {
  commitImport,
  findRateCard,
  listRateCards,
  pageRates,
  priceSends,
  RATE_LOOKUP,
  rateFor,
  replaceRates,
  stageRates,
} from "../../src/billing/rate-card-store.js";
import type { Rate } from "../../src/billing/rate-rules.js";
import { formatMoney, parseMoney } from "../../src/common/money.js";

const T = 1_900_000_000; // a future EffectiveFrom, Unix seconds
const at = (s: number) => new Date(s * 1000);
const rate = (prefix: string, price: string, effectiveFrom = 0): Rate => ({ prefix, pricePerSegment: parseMoney("P", price), effectiveFrom });
const NOW = new Date("2026-12-04T00:00:00Z");

describe(`rate cards (${dbKind()})`, () => {
  const db = useTestOrm();
  const em = () => db.orm.em.fork();

  it("replaces a card's rates whole and reads them back exactly, by prefix then EffectiveFrom", async () => {
    await em().transactional((tx) => replaceRates(tx, "retail", [rate("+61", "0.05"), rate("+999", "9")], NOW));
    const card = await em().transactional((tx) =>
      replaceRates(
        tx,
        "retail",
        [rate("+614", "0.07", T), rate("+61", "0.05"), rate("+614", "0.0525"), rate("+6141", "0.000001"), rate("+1", "999999999999.999999")],
        NOW,
      ),
    );
    expect(card).toEqual({ name: "retail", rateCount: 5, createdAt: NOW, updatedAt: NOW });
    const rates = await pageRates(em(), "retail", 10, 0);
    expect(rates.map((r) => [r.prefix, formatMoney(r.pricePerSegment), r.effectiveFrom])).toEqual([
      ["+1", "999999999999.999999", 0],
      ["+61", "0.05", 0],
      ["+614", "0.0525", 0],
      ["+614", "0.07", T],
      ["+6141", "0.000001", 0],
    ]);
    expect((await pageRates(em(), "retail", 2, 3)).map((r) => r.prefix)).toEqual(["+614", "+6141"]);
    await em().transactional((tx) => replaceRates(tx, "wholesale", [rate("+44", "0.03")], NOW));
    expect(await listRateCards(em(), 10, 0)).toEqual({
      cards: [
        { name: "retail", rateCount: 5, createdAt: NOW, updatedAt: NOW },
        { name: "wholesale", rateCount: 1, createdAt: NOW, updatedAt: NOW },
      ],
      total: 2,
    });
    expect((await listRateCards(em(), 1, 1)).cards.map((c) => c.name)).toEqual(["wholesale"]);
  });

  it("finds the longest matching prefix; none for a destination the card has no prefix of", async () => {
    const price = async (destination: string, s = 0) => {
      const r = await rateFor(em(), { card: "retail", destination, at: at(s) });
      return r && [r.prefix, formatMoney(r.pricePerSegment)];
    };
    expect(await price("+61412345678", 1)).toEqual(["+6141", "0.000001"]);
    expect(await price("+61422345678", 1)).toEqual(["+614", "0.0525"]);
    expect(await price("+61312345678", 1)).toEqual(["+61", "0.05"]);
    expect(await price("+14155550100", 1)).toEqual(["+1", "999999999999.999999"]);
    expect(await price("+447700900123", 1)).toBeNull();
    expect(await rateFor(em(), { card: "no-such-card", destination: "+61412345678", at: at(1) })).toBeNull();
  });

  it("takes a future EffectiveFrom at its exact second, and the latest one not in the future", async () => {
    const price = async (s: number) => formatMoney((await rateFor(em(), { card: "retail", destination: "+61422345678", at: at(s) }))!.pricePerSegment);
    expect(await price(T - 1)).toBe("0.0525");
    expect(await price(T)).toBe("0.07");
    expect(await price(T + 1)).toBe("0.07");
    // Sub-second: 999 ms before the second is still the old rate.
    expect(formatMoney((await rateFor(em(), { card: "retail", destination: "+61422345678", at: new Date(T * 1000 - 1) }))!.pricePerSegment)).toBe("0.0525");
  });

  it("prices a batch in one statement, in order, null where there is no rate", async () => {
    const rates = await priceSends(em(), [
      { card: "retail", destination: "+61422345678", at: at(T) },
      { card: "wholesale", destination: "+447700900123", at: at(1) },
      { card: "retail", destination: "+447700900123", at: at(1) },
      { card: "retail", destination: "+61422345678", at: at(T - 1) },
    ]);
    expect(rates.map((r) => r && [r.prefix, formatMoney(r.pricePerSegment)])).toEqual([["+614", "0.07"], ["+44", "0.03"], null, ["+614", "0.0525"]]);
    expect(await priceSends(em(), [])).toEqual([]);
  });

  it("serves a facts statement as a lateral join over per-send arrays", async () => {
    const rows = await executeBound<{ i: number; price: string | null; segments: number }>(
      em(),
      `select f.i::int as i, (rate.price_per_segment * f.segments)::text as price, f.segments
         from unnest(?::text[], ?::text[], ?::timestamptz[], ?::int[]) with ordinality as f(card, destination, at, segments, i)
         left join lateral ${RATE_LOOKUP}(f.card, f.destination, f.at) as rate on true
        order by f.i`,
      [
        ["retail", "retail", "wholesale"],
        ["+61422345678", "+447700900123", "+447700900123"],
        [at(T), at(T), at(T)],
        [3, 1, 2],
      ],
    );
    // Segments × rate, exact: 3 × 0.07 and 2 × 0.03.
    expect(rows.map((r) => [r.i, r.price && formatMoney(BigInt(r.price))])).toEqual([
      [1, "0.21"],
      [2, null],
      [3, "0.06"],
    ]);
  });

  it("commits a staged import whole, or (a repeated Prefix and EffectiveFrom) not at all", async () => {
    const before = await pageRates(em(), "wholesale", 10, 0);
    await em().transactional(async (tx) => {
      expect(await stageRates(tx, "RIA", "wholesale", [{ line: 2, rate: rate("+33", "0.04", 5) }], NOW)).toBe(true);
      expect(
        await stageRates(
          tx,
          "RIA",
          "wholesale",
          [
            { line: 3, rate: rate("+49", "0.04") },
            { line: 4, rate: rate("+33", "0.09", 5) },
          ],
          NOW,
        ),
      ).toBe(true);
    });
    const dup = await em().transactional((tx) => commitImport(tx, "RIA", "wholesale", NOW));
    expect(dup).toEqual({ kind: "duplicate", line: 4, firstLine: 2, prefix: "+33", effectiveFrom: 5 });
    expect(await pageRates(em(), "wholesale", 10, 0)).toEqual(before);

    await em().transactional(async (tx) => {
      expect(await stageRates(tx, "RIB", "wholesale", [{ line: 2, rate: rate("+33", "0.04", 5) }], NOW)).toBe(true);
      // A line staged twice: refused.
      expect(await stageRates(tx, "RIB", "wholesale", [{ line: 2, rate: rate("+49", "0.04") }], NOW)).toBe(false);
    });
    expect(await em().transactional((tx) => commitImport(tx, "RIB", "retail", NOW))).toEqual({ kind: "missing" });
    const later = new Date(NOW.getTime() + 1000);
    const done = await em().transactional((tx) => commitImport(tx, "RIB", "wholesale", later));
    expect(done).toEqual({ kind: "committed", card: { name: "wholesale", rateCount: 1, createdAt: NOW, updatedAt: later } });
    expect(await pageRates(em(), "wholesale", 10, 0)).toEqual([{ prefix: "+33", pricePerSegment: 40_000n, effectiveFrom: 5 }]);
    expect(await em().transactional((tx) => commitImport(tx, "RIB", "wholesale", later))).toEqual({ kind: "missing" });
    expect(await findRateCard(em(), "nope")).toBeNull();
  });

  it("looks a send up in a 100,000-rate card through the primary key, never a scan", async () => {
    const rates: Rate[] = [];
    for (let i = 0; i < 100_000; i++) rates.push({ prefix: `+${100000 + i}`, pricePerSegment: BigInt(1000 + i), effectiveFrom: i % 3 });
    await em().transactional((tx) => replaceRates(tx, "big", rates, NOW));
    await executeBound(em(), "analyze rates", []);
    const r = await rateFor(em(), { card: "big", destination: "+1234567890123", at: at(1) });
    // +123456 is i = 23456: effective from 23456 % 3 = 2 > 1, so none of that prefix is in effect.
    expect(r).toBeNull();
    expect(await rateFor(em(), { card: "big", destination: "+1234567890123", at: at(2) })).toEqual({
      prefix: "+123456",
      pricePerSegment: 24_456n,
      effectiveFrom: 2,
    });
    const plan = await executeBound<{ "QUERY PLAN": string }>(em(), `explain select * from ${RATE_LOOKUP}('big', '+1234567890123', now())`, []);
    const text = plan.map((p) => p["QUERY PLAN"]).join("\n");
    // Each prefix is one probe of the whole key, the newest rate in effect first.
    expect(text).toMatch(/Index Scan Backward using rates_pkey/);
    expect(text).toMatch(/Index Cond: .*prefix.*= "left"/);
    expect(text).not.toMatch(/Seq Scan on rates/);
  });
});
