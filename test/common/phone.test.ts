import fc from "fast-check";
import mobileExamples from "libphonenumber-js/mobile/examples";
import metadataJson from "libphonenumber-js/max/metadata";
import { describe, expect, it } from "vitest";
import { canonicalE164, leadingNumberType, numberType, parseE164, parseWithMetadata, suggestE164 } from "../../src/common/phone.js";

/** The answer as a plain value: undefined, or the number and its countries. */
function answer(info: ReturnType<typeof parseE164>) {
  return info === undefined ? undefined : { number: info.number, countries: [...info.countries] };
}

/** libphonenumber's full parse, with the E164 shape check parseE164 makes first. */
function reference(value: string) {
  return /^\+[1-9]\d{7,14}$/.test(value) ? answer(parseWithMetadata(value)) : undefined;
}

const callingCodes = Object.keys((metadataJson as unknown as { country_calling_codes: Record<string, string[]> }).country_calling_codes);
const nonGeographic = Object.keys((metadataJson as unknown as { nonGeographic?: Record<string, unknown> }).nonGeographic ?? {});

describe("parseE164 (country found only when read)", () => {
  it("gives libphonenumber's answer (possible, countries) for any E164-shaped string", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^\+[1-9]\d{7,14}$/), (value) => {
        expect(answer(parseE164(value))).toEqual(reference(value));
      }),
      { numRuns: 5000 },
    );
  });

  it("gives libphonenumber's answer for every calling code, at every length", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...callingCodes, ...nonGeographic),
        fc.integer({ min: 5, max: 14 }),
        fc.stringMatching(/^\d{14}$/),
        (code, length, digits) => {
          const value = `+${code}${digits}`.slice(0, 1 + Math.min(15, code.length + length));
          expect(answer(parseE164(value))).toEqual(reference(value));
        },
      ),
      { numRuns: 10000 },
    );
  });

  it("finds the country of shared calling codes (+1, +7, +44, +47, +262, +590, …) as the full parse does", () => {
    const shared = Object.entries((metadataJson as unknown as { country_calling_codes: Record<string, string[]> }).country_calling_codes)
      .filter(([, countries]) => countries.length > 1)
      .map(([code]) => code);
    const examples = Object.values(mobileExamples as Record<string, string>).map((national) => national);
    fc.assert(
      fc.property(fc.constantFrom(...shared), fc.integer({ min: 6, max: 12 }), fc.stringMatching(/^\d{12}$/), (code, length, digits) => {
        const value = `+${code}${digits}`.slice(0, 1 + Math.min(15, code.length + length));
        expect(answer(parseE164(value))).toEqual(reference(value));
      }),
      { numRuns: 20000 },
    );
    for (const [country, national] of Object.entries(mobileExamples as Record<string, string>)) {
      const code = (metadataJson as unknown as { countries: Record<string, [string]> }).countries[country]?.[0];
      if (code === undefined) continue;
      const value = `+${code}${national}`;
      expect(answer(parseE164(value)), value).toEqual(reference(value));
    }
    expect(examples.length).toBeGreaterThan(200);
  });

  it("answers for the shared +44 calling code as the full parse does", () => {
    for (const value of [
      "+447700900123",
      "+441534123456",
      "+441624123456",
      "+441481123456",
      "+44770090012",
      "+4477009001234",
      "+447700900",
      "+4407700900123",
      "+12025550123",
      "+18005550123",
    ]) {
      expect(answer(parseE164(value)), value).toEqual(reference(value));
    }
    expect(parseE164("+441534123456")?.countries).toEqual(["JE"]);
    expect(parseE164("+12025550123")?.countries).toEqual(["US"]);
  });

  it("refuses what is not E164", () => {
    for (const value of ["447700900123", "+0447700900123", "+4477", "+4477009001234567", " +447700900123", "+44 7700900123"]) {
      expect(parseE164(value)).toBeUndefined();
    }
  });
});

describe("one spelling per number (issue 41, defect 2)", () => {
  it("parseE164 refuses a spelling libphonenumber rewrites; canonicalE164 and suggestE164 give the one spelling", () => {
    for (const [written, canonical] of [
      ["+610412345679", "+61412345679"],
      ["+6100412345679", "+61412345679"],
      ["+610491234567", "+61491234567"],
      ["+114155559101", "+14155559101"],
      ["+330612345678", "+33612345678"],
      ["+4407700900123", "+447700900123"],
      ["0061412345679", "+61412345679"],
      ["+0061412345679", "+61412345679"],
    ]) {
      expect(parseE164(written), written).toBeUndefined();
      expect(canonicalE164(written), written).toBe(canonical);
      expect(suggestE164(written), written).toBe(canonical);
      expect(parseE164(canonical)?.number).toBe(canonical);
    }
    expect(suggestE164(" +61 (0)412-345.679 ")).toBe("+61412345679");
    for (const kept of ["+78001234567", "+3906123456", "+5491112345678", "+61412345679"]) {
      expect(parseE164(kept)?.number, kept).toBe(kept);
      expect(canonicalE164(kept)).toBe(kept);
      expect(suggestE164(kept)).toBeUndefined();
    }
    for (const none of ["Vodafone", "+12345", "12345", "", "+", "+0", "+61 412345679"]) expect(canonicalE164(none), none).toBeUndefined();
  });

  it("canonicalE164 is a number parseE164 takes, read once is read twice, and a canonical number is its own", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^(\+|\+00|00)[1-9]\d{0,2}(0|00|1|8)?\d{5,12}$/), (value) => {
        const canonical = canonicalE164(value);
        if (canonical === undefined) return;
        expect(parseE164(canonical)?.number).toBe(canonical);
        expect(canonicalE164(canonical)).toBe(canonical);
        if (parseE164(value)) expect(canonical).toBe(value);
      }),
      { numRuns: 5000 },
    );
  });
});

describe("leadingNumberType: numberType's answer without a full parse", () => {
  it("agrees with the full parse on 6,000 random numbers across geographic, shared and non-geographic calling codes", () => {
    const codes = ["+44", "+1", "+61", "+49", "+33", "+39", "+81", "+234", "+7", "+64", "+882", "+800"];
    let seed = 20261125;
    const digit = () => (seed = (seed * 1103515245 + 12345) % 2147483648) % 10;
    const differ: string[][] = [];
    for (let i = 0; i < 6000; i++) {
      let n = codes[i % codes.length];
      const length = 6 + (i % 7);
      for (let j = 0; j < length; j++) n += digit();
      const full = numberType(n);
      const fast = leadingNumberType(n);
      const plain = (t: string) => (t === "FIXED_LINE" || t === "MOBILE" || t === "FIXED_LINE_OR_MOBILE" ? "" : t);
      if (plain(full) !== plain(fast)) differ.push([n, full, fast]);
    }
    expect(differ).toEqual([]);
    for (const n of ["+449098790000", "+19002001234", "+611900123456", "+499001234567"]) expect(leadingNumberType(n)).toBe("PREMIUM_RATE");
    expect(leadingNumberType("+447012345678")).toBe("PERSONAL_NUMBER");
  });
});
