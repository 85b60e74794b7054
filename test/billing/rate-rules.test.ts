import { describe, expect, it } from "vitest";
import { cardNameProblem, checkRate, firstDuplicate, MAX_EFFECTIVE_FROM } from "../../src/billing/rate-rules.js";

describe("rate rules", () => {
  it("takes a rate: prefix, exact price, EffectiveFrom", () => {
    expect(checkRate({ prefix: "+614", pricePerSegment: "0.0525", effectiveFrom: 1_900_000_000n }, "Rates[0].")).toEqual({
      prefix: "+614",
      pricePerSegment: 52_500n,
      effectiveFrom: 1_900_000_000,
    });
    expect(checkRate({ prefix: "+1", pricePerSegment: "0", effectiveFrom: MAX_EFFECTIVE_FROM }, "")).toEqual({
      prefix: "+1",
      pricePerSegment: 0n,
      effectiveFrom: MAX_EFFECTIVE_FROM,
    });
  });

  const badPrefixes = ["614", "+", "+0614", "+61-4", "+1234567890123456", " +614", "+61 4", "+６１"];
  it.each(badPrefixes)("refuses the prefix %j naming Rates[i].Prefix", (prefix) => {
    expect(checkRate({ prefix, pricePerSegment: "0.05", effectiveFrom: 0 }, "Rates[2].")).toEqual([
      {
        field: "Rates[2].Prefix",
        code: "InvalidParameter",
        message: `Rates[2].Prefix must be "+" and 1 to 15 digits (the first not 0), such as "+614"; got ${JSON.stringify(prefix)}.`,
      },
    ]);
  });

  it("names every bad field of a rate at once", () => {
    expect(checkRate({ prefix: "", pricePerSegment: "1e-3", effectiveFrom: -1 }, "Rates[0].")).toEqual([
      { field: "Rates[0].Prefix", code: "MissingParameter", message: 'Rates[0].Prefix is required: "+" and digits, such as "+614".' },
      {
        field: "Rates[0].PricePerSegment",
        code: "InvalidParameter",
        message: 'Rates[0].PricePerSegment must be written without an exponent, such as "0.0525"; got "1e-3".',
      },
      {
        field: "Rates[0].EffectiveFrom",
        code: "InvalidParameter",
        message: `Rates[0].EffectiveFrom must be Unix seconds from 0 to ${MAX_EFFECTIVE_FROM} (0 or absent: in effect from the start); got -1.`,
      },
    ]);
    expect(checkRate({ prefix: "+61", pricePerSegment: "-0.05", effectiveFrom: MAX_EFFECTIVE_FROM + 1 }, "")).toEqual([
      { field: "PricePerSegment", code: "InvalidParameter", message: 'PricePerSegment takes no sign; got "-0.05".' },
      {
        field: "EffectiveFrom",
        code: "InvalidParameter",
        message: `EffectiveFrom must be Unix seconds from 0 to ${MAX_EFFECTIVE_FROM} (0 or absent: in effect from the start); got ${MAX_EFFECTIVE_FROM + 1}.`,
      },
    ]);
  });

  it("finds the first repeated (Prefix, EffectiveFrom)", () => {
    expect(
      firstDuplicate([
        { prefix: "+61", effectiveFrom: 0 },
        { prefix: "+61", effectiveFrom: 5 },
        { prefix: "+44", effectiveFrom: 0 },
      ]),
    ).toBeUndefined();
    expect(
      firstDuplicate([
        { prefix: "+61", effectiveFrom: 0 },
        { prefix: "+44", effectiveFrom: 0 },
        { prefix: "+61", effectiveFrom: 5 },
        { prefix: "+44", effectiveFrom: 0 },
        { prefix: "+61", effectiveFrom: 0 },
      ]),
    ).toEqual({ first: 1, again: 3 });
  });

  it("checks a card's name", () => {
    expect(cardNameProblem("retail-2027.v1")).toBeUndefined();
    expect(cardNameProblem("")).toEqual({ field: "Name", code: "MissingParameter", message: "Name is required: the rate card's name." });
    expect(cardNameProblem("a b")).toEqual({
      field: "Name",
      code: "InvalidParameter",
      message: `Name must be 1 to 64 letters, digits, '.', '_' or '-'; got "a b".`,
    });
    expect(cardNameProblem("x".repeat(65))?.code).toBe("InvalidParameter");
  });
});
