import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { formatMoney, MAX_MICROS, moneyOrProblem, parseMoney, sumMoney, timesSegments } from "../../src/common/money.js";

/** A micro-unit amount written as a client might: any number of decimals from 0 to 6 that holds it exactly, leading zeros sometimes. */
function written(micros: bigint, decimals: number, leadingZeros: number): string {
  const negative = micros < 0n;
  const m = negative ? -micros : micros;
  const whole = (m / 1_000_000n).toString();
  const fraction = (m % 1_000_000n).toString().padStart(6, "0");
  // Drop only zeros: the text still names exactly m.
  const kept = fraction.slice(0, Math.max(decimals, fraction.replace(/0+$/, "").length));
  return `${negative ? "-" : ""}${"0".repeat(leadingZeros)}${whole}${kept ? `.${kept}` : ""}`;
}

describe("parseMoney and formatMoney", () => {
  it("read and write exact micro-units", () => {
    expect(parseMoney("Amount", "0.0525")).toBe(52_500n);
    expect(parseMoney("Amount", "12")).toBe(12_000_000n);
    expect(parseMoney("Amount", "0.000001")).toBe(1n);
    expect(parseMoney("Amount", "007.5")).toBe(7_500_000n);
    expect(parseMoney("Amount", "-3.25", { signed: true })).toBe(-3_250_000n);
    expect(parseMoney("Amount", "999999999999.999999")).toBe(MAX_MICROS);
    expect(parseMoney("Amount", "-999999999999.999999", { signed: true })).toBe(-MAX_MICROS);
    expect(formatMoney(52_500n)).toBe("0.0525");
    expect(formatMoney(12_000_000n)).toBe("12.00");
    expect(formatMoney(12_500_000n)).toBe("12.50");
    expect(formatMoney(1n)).toBe("0.000001");
    expect(formatMoney(0n)).toBe("0.00");
    expect(formatMoney(-1_230_000n)).toBe("-1.23");
    expect(formatMoney(MAX_MICROS)).toBe("999999999999.999999");
  });

  it("round-trips every storable amount, however it is written", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -MAX_MICROS, max: MAX_MICROS }), fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 3 }), (micros, d, z) => {
        expect(parseMoney("Amount", written(micros, d, z), { signed: true })).toBe(micros);
        expect(parseMoney("Amount", formatMoney(micros), { signed: true })).toBe(micros);
      }),
      { numRuns: 3000 },
    );
  });

  const bad: [string, string, boolean, string][] = [
    ["more than 6 decimals", "0.0000001", false, 'Amount has more than 6 decimal places; got "0.0000001".'],
    ["an exponent", "1e-3", false, 'Amount must be written without an exponent, such as "0.0525"; got "1e-3".'],
    ["an upper-case exponent", "5E2", true, 'Amount must be written without an exponent, such as "12.50" or "-0.0525"; got "5E2".'],
    ["a minus where none is allowed", "-1.00", false, 'Amount takes no sign; got "-1.00".'],
    ["a plus sign", "+1.00", false, 'Amount takes no sign; got "+1.00".'],
    ["a plus sign where a minus is allowed", "+1.00", true, "Amount takes no sign but a leading '-'; got \"+1.00\"."],
    ["past the range", "1000000000000", false, 'Amount is past the largest amount, 999999999999.999999; got "1000000000000".'],
    ["past the range, negative", "-1000000000000.5", true, 'Amount is past the largest amount, 999999999999.999999; got "-1000000000000.5".'],
    ["a leading space", " 1.00", false, 'Amount must not contain spaces; got " 1.00".'],
    ["an inner space", "1. 00", false, 'Amount must not contain spaces; got "1. 00".'],
    ["a trailing point", "1.", false, 'Amount must be a decimal string such as "0.0525"; got "1.".'],
    ["a leading point", ".5", false, 'Amount must be a decimal string such as "0.0525"; got ".5".'],
    ["a comma", "1,50", false, 'Amount must be a decimal string such as "0.0525"; got "1,50".'],
    ["a word", "NaN", false, 'Amount must be a decimal string such as "0.0525"; got "NaN".'],
    ["a hex number", "0x10", false, 'Amount must be a decimal string such as "0.0525"; got "0x10".'],
    ["a lone minus", "-", true, 'Amount must be a decimal string such as "12.50" or "-0.0525"; got "-".'],
  ];
  it.each(bad)("refuses %s with a 400 naming the field", (_what, text, signed, message) => {
    expect(moneyOrProblem("Amount", text, { signed })).toEqual({ field: "Amount", code: "InvalidParameter", message });
    let err: unknown;
    try {
      parseMoney("Amount", text, { signed });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).rawMessage).toBe(message);
  });

  it("refuses an empty amount as missing", () => {
    expect(moneyOrProblem("PricePerSegment", "")).toEqual({
      field: "PricePerSegment",
      code: "MissingParameter",
      message: 'PricePerSegment is required: a decimal string such as "0.0525".',
    });
  });
});

describe("arithmetic", () => {
  it("multiplies a price by segments exactly", () => {
    expect(timesSegments(52_500n, 3)).toBe(157_500n);
    expect(formatMoney(timesSegments(parseMoney("P", "0.1"), 3))).toBe("0.30");
    expect(timesSegments(52_500n, 0)).toBe(0n);
    expect(() => timesSegments(1n, -1)).toThrow(RangeError);
    expect(() => timesSegments(1n, 1.5)).toThrow(RangeError);
    expect(() => timesSegments(MAX_MICROS, 2)).toThrow(RangeError);
  });

  it("sums any sequence of charges, refunds and top-ups exactly (a bigint reference)", () => {
    const entry = fc.record({
      type: fc.constantFrom("Charge", "Refund", "TopUp", "Adjustment"),
      // Up to a million units, any micro-unit.
      micros: fc.bigInt({ min: 0n, max: 1_000_000n * 1_000_000n }),
      decimals: fc.integer({ min: 0, max: 6 }),
    });
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 200 }), (entries) => {
        let reference = 0n;
        const signed: bigint[] = [];
        for (const e of entries) {
          // A charge takes money away; a refund and a top-up give it; an adjustment goes either way.
          const sign = e.type === "Charge" || (e.type === "Adjustment" && e.micros % 2n === 1n) ? -1n : 1n;
          reference += sign * e.micros;
          const text = written(e.micros, e.decimals, 0);
          signed.push(sign * parseMoney("Amount", text));
        }
        const total = sumMoney(signed);
        expect(total).toBe(reference);
        expect(parseMoney("Balance", formatMoney(total), { signed: true })).toBe(reference);
      }),
      { numRuns: 2000 },
    );
  });

  it("ten charges of 0.1 make exactly 1.00 (where doubles make 0.9999999999999999)", () => {
    const tenth = parseMoney("Amount", "0.1");
    expect(formatMoney(sumMoney(Array.from({ length: 10 }, () => tenth)))).toBe("1.00");
  });

  it("refuses a sum past the storable range", () => {
    expect(() => sumMoney([MAX_MICROS, 1n])).toThrow(RangeError);
    expect(sumMoney([MAX_MICROS, 1n, -1n])).toBe(MAX_MICROS);
  });
});
