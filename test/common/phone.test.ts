import fc from "fast-check";
import metadataJson from "libphonenumber-js/max/metadata";
import { describe, expect, it } from "vitest";
import { countryOfE164 } from "../../src/common/number-country.js";
import { canonicalE164, isPossibleWithMetadata, leadingNumberType, numberType, parseE164, suggestE164 } from "../../src/common/phone.js";

/** The answer as a plain value: undefined, or the number and its country. */
function answer(info: ReturnType<typeof parseE164>) {
  return info === undefined ? undefined : { number: info.number, country: info.country };
}

/** libphonenumber's full parse (possible, canonical), with the E164 shape check parseE164 makes first; the country from its calling code and leading digits. */
function reference(value: string) {
  if (!/^\+[1-9]\d{7,14}$/.test(value) || !isPossibleWithMetadata(value)) return undefined;
  const country = countryOfE164(value);
  return country === undefined ? undefined : { number: value, country };
}

const callingCodes = Object.keys((metadataJson as unknown as { country_calling_codes: Record<string, string[]> }).country_calling_codes);
const nonGeographic = Object.keys((metadataJson as unknown as { nonGeographic?: Record<string, unknown> }).nonGeographic ?? {});

describe("parseE164 (possible numbers, and their country from the prefix)", () => {
  it("gives libphonenumber's answer (possible or not) for any E164-shaped string", () => {
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

  it("names one country for the shared +44 and +1 calling codes, and none for a non-geographic code", () => {
    expect(parseE164("+447700900123")?.country).toBe("GB");
    expect(parseE164("+441534123456")?.country).toBe("JE");
    expect(parseE164("+441624123456")?.country).toBe("IM");
    expect(parseE164("+441481123456")?.country).toBe("GG");
    expect(parseE164("+12025550123")?.country).toBe("US");
    expect(parseE164("+14165550123")?.country).toBe("CA");
    expect(parseE164("+18005550123")?.country).toBe("US");
    expect(parseE164("+80012345678")).toBeUndefined();
    for (const value of ["+44770090012", "+4477009001234", "+447700900", "+4407700900123"]) {
      expect(answer(parseE164(value)), value).toEqual(reference(value));
    }
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
