import fc from "fast-check";
import { Metadata } from "libphonenumber-js/core";
import { getCountries, getCountryCallingCode, getExampleNumber, type CountryCode } from "libphonenumber-js/max";
import metadataJson from "libphonenumber-js/max/metadata";
import mobileExamples from "libphonenumber-js/mobile/examples";
import { describe, expect, it } from "vitest";
import { countryOfE164, LISTED_BLOCKS } from "../../src/common/number-country.js";
import { parseE164 } from "../../src/common/phone.js";

/**
 * The rule (issue 45), stated from the data rather than from the module: of the countries sharing
 * a calling code, the one whose listed block (its metadata's leadingDigits and LISTED_BLOCKS)
 * the national number starts with; else the code's main country, the first the metadata lists.
 */
const json = metadataJson as unknown as { country_calling_codes: Record<string, string[]> };
const md = new Metadata(metadataJson) as unknown as {
  selectNumberingPlan(c: string): void;
  numberingPlan: { leadingDigits(): string | undefined; possibleLengths(): number[] };
};
const shared = Object.entries(json.country_calling_codes).filter(([, countries]) => countries.length > 1);

function listedBlocks(country: string): RegExp | undefined {
  md.selectNumberingPlan(country);
  const sources = [md.numberingPlan.leadingDigits(), LISTED_BLOCKS[country]].filter(Boolean);
  return sources.length > 0 ? new RegExp(`^(?:${sources.join("|")})`) : undefined;
}
function possibleLengths(country: string): number[] {
  md.selectNumberingPlan(country);
  return md.numberingPlan.possibleLengths();
}

const owners = new Map(shared.map(([code, countries]) => [code, countries.slice(1).map((c) => ({ country: c, blocks: listedBlocks(c) }))]));

/** Every non-main country whose listed block `national` starts with (the test asserts there is at most one). */
function claimants(code: string, national: string): string[] {
  return owners
    .get(code)!
    .filter((o) => o.blocks?.test(national))
    .map((o) => o.country);
}
function expected(code: string, national: string): string {
  return claimants(code, national)[0] ?? json.country_calling_codes[code][0];
}

describe("a number's country from its calling code and leading digits (issue 45)", () => {
  it("every shared calling code's non-main country has listed blocks, and no two countries' blocks overlap", () => {
    for (const [, countries] of shared) for (const c of countries.slice(1)) expect(listedBlocks(c), c).toBeDefined();
    fc.assert(
      fc.property(fc.constantFrom(...shared.map(([code]) => code)), fc.stringMatching(/^\d{4,12}$/), (code, national) => {
        expect(claimants(code, national).length).toBeLessThanOrEqual(1);
      }),
      { numRuns: 5000 },
    );
  });

  it("every country's example number: its own country when in one of its blocks, else the calling code's main country", () => {
    const fellBack: string[] = [];
    let checked = 0;
    for (const country of getCountries()) {
      const example = getExampleNumber(country, mobileExamples);
      if (!example) continue;
      const code = getCountryCallingCode(country);
      const national = example.nationalNumber as string;
      const answer = countryOfE164(example.number as string);
      checked++;
      const main = json.country_calling_codes[code][0];
      if (country === main || json.country_calling_codes[code].length === 1) {
        expect(answer, example.number).toBe(country);
        continue;
      }
      expect(answer, example.number).toBe(expected(code, national));
      if (answer !== country) fellBack.push(`${country}:${answer}`);
    }
    expect(checked).toBeGreaterThan(240);
    // The examples whose mobile range their country shares with the code's main country, so the
    // main country's: Cocos' and Christmas Island's (Australia's 04), Åland's (Finland's 04),
    // Svalbard's (Norway's 4), the Vatican's (Italy's 3), Western Sahara's (Morocco's 6),
    // Saint-Barthélemy's and Saint-Martin's (Guadeloupe's 0690). Every other example is in its
    // country's blocks (GG 07781, JE 07797, IM 07924, CA 506, KZ 7, YT 0639, …).
    expect(fellBack.sort()).toEqual(["AX:FI", "BL:GP", "CC:AU", "CX:AU", "EH:MA", "MF:GP", "SJ:NO", "VA:IT"]);
  });

  it("20,000 random numbers in allocated and unallocated blocks of shared calling codes follow the rule, whatever their validity", () => {
    const allocated = fc
      .constantFrom(...shared.flatMap(([code, countries]) => countries.slice(1).map((country) => ({ code, country }))))
      .chain(({ code, country }) =>
        fc
          .tuple(
            fc.stringMatching(new RegExp(`^(?:${listedBlocks(country)!.source.slice(1)})$`)),
            fc.constantFrom(...possibleLengths(country)),
            fc.stringMatching(/^\d{15}$/),
          )
          .map(([prefix, length, tail]) => ({ code, country, national: (prefix + tail).slice(0, Math.max(prefix.length, length)) })),
      );
    const anywhere = fc
      .constantFrom(...shared.map(([code]) => code))
      .chain((code) =>
        fc
          .tuple(fc.integer({ min: 6, max: 12 }), fc.stringMatching(/^\d{12}$/))
          .map(([length, digits]) => ({ code, country: undefined, national: digits.slice(0, length) })),
      );
    let inBlock = 0;
    fc.assert(
      fc.property(fc.oneof(allocated, anywhere), ({ code, country, national }) => {
        const answer = countryOfE164(`+${code}${national}`);
        expect(answer).toBe(expected(code, national));
        if (country !== undefined) {
          expect(answer).toBe(country);
          inBlock++;
        }
      }),
      { numRuns: 20000, seed: 45 },
    );
    expect(inBlock).toBeGreaterThan(5000);
  });

  it("the cases of issue 45: Australia's new mobile block, Christmas Island, Cocos, GB and its crown dependencies, NANP", () => {
    const cases: [string, CountryCode][] = [
      ["+61479489225", "AU"],
      ["+61412345678", "AU"],
      ["+61891641234", "CX"],
      ["+61891649999", "CX"],
      ["+61891621234", "CC"],
      ["+61891601234", "AU"],
      ["+447700900123", "GB"],
      ["+441481256789", "GG"],
      ["+447781123456", "GG"],
      ["+441534123456", "JE"],
      ["+447797123456", "JE"],
      ["+447624123456", "IM"],
      ["+447924123456", "IM"],
      ["+441624123456", "IM"],
      ["+12025550123", "US"],
      ["+14165550123", "CA"],
      ["+16045550123", "CA"],
      ["+18765550123", "JM"],
      ["+17875550123", "PR"],
      ["+18005550123", "US"],
      ["+79123456789", "RU"],
      ["+77012345678", "KZ"],
      ["+390669812345", "VA"],
      ["+393123456789", "IT"],
      ["+262269601234", "YT"],
      ["+262692123456", "RE"],
      ["+590590271234", "BL"],
      ["+590590871234", "MF"],
      ["+590690001234", "GP"],
    ];
    for (const [number, country] of cases) {
      expect(countryOfE164(number), number).toBe(country);
      expect(parseE164(number)?.country, number).toBe(country);
    }
  });

  it("Canada's listed area codes are the ones libphonenumber's CA fixed-line pattern holds, plus its non-geographic 600, 622 and 633", () => {
    const caFixed = new RegExp(
      `^(?:${(metadataJson as unknown as { countries: Record<string, unknown[]> }).countries.CA[11] as unknown as string[][]}`.split(",")[0] + ")$",
    );
    const fromMetadata: string[] = [];
    for (let a = 200; a < 1000; a++) if (caFixed.test(`${a}2345678`)) fromMetadata.push(String(a));
    expect(LISTED_BLOCKS.CA.split("|").sort()).toEqual([...fromMetadata, "600", "622", "633"].sort());
  });
});
