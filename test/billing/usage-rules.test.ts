/**
 * The rules of usage statements without a database: the days and groupings (docs/billing.md#usage),
 * the CSV negotiation, and the recipient prefixes the statements group by, which must decide the
 * country as the whole number does.
 */
import { describe, expect, it } from "vitest";
import { countryOfE164, countryPrefixLengths, longestMatch } from "../../src/common/number-country.js";
import { groupByOf, usageDays } from "../../src/billing/usage-rules.js";
import { acceptsCsv } from "../../src/rest/rest-csv.js";

describe("usage days", () => {
  it("are UTC days, EndDate included, at most 366 days apart", () => {
    expect(usageDays("2026-11-01", "2026-11-30")).toStrictEqual({ startDay: new Date("2026-11-01T00:00:00Z"), endDay: new Date("2026-12-01T00:00:00Z") });
    expect(usageDays(" 2024-02-29 ", "2024-02-29")).toStrictEqual({ startDay: new Date("2024-02-29T00:00:00Z"), endDay: new Date("2024-03-01T00:00:00Z") });
    expect(usageDays("2026-01-01", "2027-01-02")).not.toBeInstanceOf(Array);
    for (const [start, end, field] of [
      ["2025-02-29", "2025-03-01", "StartDate"],
      ["2026-11-01", "2026-11-01T00:00:00Z", "EndDate"],
      ["20261101", "2026-11-02", "StartDate"],
      ["2026-11-02", "2026-11-01", "EndDate"],
      ["2026-01-01", "2027-01-03", "EndDate"],
      ["", "2026-11-01", "StartDate"],
    ]) {
      const got = usageDays(start, end);
      expect(Array.isArray(got) && got.map((p) => p.field), `${start} ${end}`).toStrictEqual([field]);
    }
  });

  it("GroupBy is exact, its first value by default", () => {
    expect(groupByOf("", ["Day", "Country"])).toBe("Day");
    expect(groupByOf("Country", ["Day", "Country"])).toBe("Country");
    expect(groupByOf("country", ["Day", "Country"])).toMatchObject({ field: "GroupBy", code: "InvalidParameter" });
  });
});

describe("CSV negotiation", () => {
  it("answers CSV when text/csv is preferred", () => {
    expect(acceptsCsv("text/csv")).toBe(true);
    expect(acceptsCsv("text/csv, */*;q=0.1")).toBe(true);
    expect(acceptsCsv("text/csv;q=0.9, application/json;q=0.5")).toBe(true);
    expect(acceptsCsv(undefined)).toBe(false);
    expect(acceptsCsv("*/*")).toBe(false);
    expect(acceptsCsv("application/json, text/csv")).toBe(false);
    expect(acceptsCsv("text/csv;q=0")).toBe(false);
  });
});

describe("the recipient prefixes usage groups by", () => {
  it("read the longest block of each shared calling code", () => {
    expect(longestMatch("7911[17]|1481")).toBe(5);
    expect(longestMatch("590(?:0[079]|13|30)")).toBe(5);
    expect(longestMatch("8\\d{3}")).toBeUndefined();
    expect(Object.fromEntries(countryPrefixLengths())).toMatchObject({ "1": 6, "44": 8, "61": 8, "262": 9, "590": 9 });
  });

  it("decide the country as the whole number does (random numbers of every shared code and others)", () => {
    const lengths = countryPrefixLengths();
    let seed = 20261205;
    const digit = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % 10).toString();
    const codes = [...lengths.keys(), "33", "49", "64", "81", "353", "886", "800"];
    let checked = 0;
    for (const code of codes) {
      for (let i = 0; i < 3000; i++) {
        const n = `+${code}${Array.from({ length: 12 - code.length }, digit).join("")}`;
        const key = n.slice(0, lengths.get(code) ?? 4);
        expect(countryOfE164(key), n).toBe(countryOfE164(n));
        checked++;
      }
    }
    // The listed blocks themselves, at their exact prefixes.
    for (const n of ["+14165550100", "+447797123456", "+447911712345", "+447911112345", "+61891620000", "+262269612345", "+590590871234"]) {
      expect(countryOfE164(n.slice(0, lengths.get(n.startsWith("+1") ? "1" : n.slice(1, n.startsWith("+44") || n.startsWith("+61") ? 3 : 4))!)), n).toBe(
        countryOfE164(n),
      );
    }
    expect(checked).toBe(codes.length * 3000);
  });
});
