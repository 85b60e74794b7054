/**
 * A number's country, from its calling code and leading digits alone (issue 45).
 *
 * Numbering plans assign each country sharing a calling code blocks of leading digits (NANP area
 * codes, Ofcom's blocks for the crown dependencies, ACMA's for Christmas Island and Cocos); every
 * other number of the code belongs to the code's main country (the US for +1, RU for +7, GB for
 * +44, AU for +61). Whether the number is valid under a country's number-type patterns plays no
 * part: those patterns list the ranges known when the metadata was cut, ranges are allocated
 * every month, and a new mobile block of Australia's (+614794…) is still Australia's.
 *
 * The blocks come from libphonenumber-js's metadata where it has them (a country's
 * `leadingDigits`, and the main country for a code is the first the metadata lists). For the
 * countries sharing a code whose metadata has no `leadingDigits` (or leaves a block out),
 * LISTED_BLOCKS below gives theirs, each with its source.
 */
import { Metadata } from "libphonenumber-js/core";
import metadataJson from "libphonenumber-js/max/metadata";

/**
 * National-number prefixes (regular expressions, anchored at the start of the national number)
 * of the non-main countries of a shared calling code whose metadata has no `leadingDigits`, or
 * whose `leadingDigits` leave out a block the numbering plan gives them (added to them).
 * test/common/number-country.test.ts checks the CA list against the metadata's own CA area codes.
 */
export const LISTED_BLOCKS: Readonly<Record<string, string>> = {
  // Canada's NANP area codes (NANPA's area code assignments for Canada, as the Canadian Numbering
  // Administrator lists them; the same list libphonenumber's CA fixed-line pattern holds), plus
  // 600, 622 and 633, NANP codes assigned to Canadian non-geographic services.
  CA:
    "204|226|236|249|250|257|263|273|289|306|343|354|365|367|368|382|403|416|418|428|431|437|438|450|468|474" +
    "|506|514|519|548|579|581|584|587|600|604|613|622|633|639|647|672|683|705|709|742|753|778|780|782" +
    "|807|819|825|867|873|879|902|905|942",
  // Guernsey (Ofcom's National Telephone Numbering Plan: 01481 geographic; mobile blocks 07781,
  // 07839, 079111 and 079117 held by the island's operators).
  GG: "1481|7781|7839|7911[17]",
  // Jersey (Ofcom: 01534 geographic; mobile blocks 07509, 077003, 077007, 077008, 07797, 07829, 07937).
  JE: "1534|7509|7700[378]|7797|7829|7937",
  // The Isle of Man's metadata leadingDigits (01624, 07524, 07624, 074576) leave out its mobile
  // block 07924 (Ofcom; libphonenumber's own IM mobile pattern lists it).
  IM: "7924",
  // Cocos (Keeling) Islands and Christmas Island (ACMA, Telecommunications Numbering Plan 2015:
  // the 08 9162 and 08 9164 geographic blocks; their mobiles are Australia's 04 range).
  CC: "89162",
  CX: "89164",
  // Western Sahara (ANRT: the 0528 8 and 0528 9 geographic blocks, as libphonenumber lists them;
  // mobiles are Morocco's ranges).
  EH: "528[89]",
  // Mayotte (ARCEP: 0269 and 02689 geographic, 0639 and 07093 mobile, and the 09 blocks
  // libphonenumber lists as Mayotte's VoIP: 093980-1, 094780-1, 09769).
  YT: "2689|269|639|7093|9398[01]|9478[01]|9769",
  // Saint-Barthélemy and Saint-Martin (ARCEP: 0590 27 and 0590 29 Saint-Barthélemy; 0590 87 and
  // the other 0590 blocks libphonenumber lists for Saint-Martin and not for Guadeloupe). Their
  // mobiles (0690) are Guadeloupe's range.
  BL: "5902[79]",
  MF: "590(?:0[079]|13|30|43|5[0-268]|7[79]|87)",
};

/** The parts of libphonenumber's Metadata class read here (its typings leave them out). */
interface CodeMetadata {
  hasCallingCode(code: string): boolean | undefined;
  getCountryCodesForCallingCode(code: string): string[] | undefined;
  selectNumberingPlan(country: string): void;
  numberingPlan: { leadingDigits(): string | undefined };
}

interface CodePlan {
  main: string;
  /** The other countries of the code, each with its blocks (undefined: none listed). */
  others: { country: string; blocks: RegExp | undefined }[];
}

const metadata = new Metadata(metadataJson) as unknown as CodeMetadata;
const plans = new Map<string, CodePlan | null>();

/** The blocks of `country` (a non-main country of a shared code): its metadata's leadingDigits and its LISTED_BLOCKS. */
export function blocksOf(country: string): string | undefined {
  metadata.selectNumberingPlan(country);
  const blocks = [metadata.numberingPlan.leadingDigits(), LISTED_BLOCKS[country]].filter(Boolean);
  return blocks.length > 0 ? blocks.join("|") : undefined;
}

function codePlan(code: string): CodePlan | null {
  let plan = plans.get(code);
  if (plan !== undefined) return plan;
  const countries = metadata.getCountryCodesForCallingCode(code);
  if (!countries || countries.length === 0) plan = null;
  else {
    plan = {
      main: countries[0],
      others: countries.slice(1).map((country) => {
        const blocks = blocksOf(country);
        return { country, blocks: blocks ? new RegExp(`^(?:${blocks})`) : undefined };
      }),
    };
  }
  plans.set(code, plan);
  return plan;
}

/**
 * The calling code of an E164 string (`+` and digits) and its national number; undefined when it
 * starts with no calling code the metadata knows. Calling codes are prefix-free, so the first
 * known prefix is the code.
 */
export function splitCallingCode(value: string): { code: string; national: string } | undefined {
  for (let k = 1; k <= 3; k++) {
    const code = value.slice(1, 1 + k);
    if (metadata.hasCallingCode(code)) return { code, national: value.slice(1 + k) };
  }
  return undefined;
}

/** The main country of a calling code (the first the metadata lists); undefined for a non-geographic or unknown code. */
export function mainCountryOf(code: string): string | undefined {
  return codePlan(code)?.main;
}

/**
 * The country (ISO alpha-2) of a number written in canonical E164: the country sharing its
 * calling code whose listed block its national number starts with, else the code's main country;
 * undefined for a non-geographic calling code (+800, +882, …) or none at all.
 */
export function countryOfE164(value: string): string | undefined {
  const split = splitCallingCode(value);
  if (split === undefined) return undefined;
  const plan = codePlan(split.code);
  if (!plan) return undefined;
  for (const other of plan.others) if (other.blocks?.test(split.national)) return other.country;
  return plan.main;
}

/**
 * The longest string a block pattern can match: blocks are alternations of digits, character
 * classes and non-capturing groups (`7911[17]`, `590(?:0[079]|13)`); undefined for anything else
 * (a quantifier), which then needs the whole number.
 */
export function longestMatch(pattern: string): number | undefined {
  let i = 0;
  const alternation = (): number | undefined => {
    let best = 0;
    let current = 0;
    while (i < pattern.length && pattern[i] !== ")") {
      const c = pattern[i];
      if (c === "|") {
        best = Math.max(best, current);
        current = 0;
        i++;
      } else if (/\d/.test(c)) {
        current++;
        i++;
      } else if (c === "[") {
        const end = pattern.indexOf("]", i);
        if (end < 0) return undefined;
        current++;
        i = end + 1;
      } else if (pattern.startsWith("(?:", i)) {
        i += 3;
        const inner = alternation();
        if (inner === undefined || pattern[i] !== ")") return undefined;
        current += inner;
        i++;
      } else return undefined;
      if (i < pattern.length && "*+?{".includes(pattern[i])) return undefined;
    }
    return Math.max(best, current);
  };
  const n = alternation();
  return i === pattern.length ? n : undefined;
}

/**
 * How many leading characters of an E164 number decide its country, per calling code shared by
 * several countries (`+1` → 5: the NANP area code, `+44` → 9): `+`, the code, and the longest block
 * of its other countries. A number of any other code is decided by its first 4 characters (`+` and
 * at most 3 digits hold the whole code). Grouping numbers by these prefixes before asking
 * countryOfE164 keeps a usage statement to a few thousand groups, whatever the traffic.
 */
export function countryPrefixLengths(): Map<string, number> {
  const lengths = new Map<string, number>();
  for (const code of Object.keys((metadataJson as { country_calling_codes: Record<string, unknown> }).country_calling_codes)) {
    const plan = codePlan(code);
    if (!plan || plan.others.length === 0) continue;
    let longest = 0;
    for (const other of plan.others) {
      const blocks = blocksOf(other.country);
      const n = blocks === undefined ? 0 : longestMatch(blocks);
      longest = Math.max(longest, n ?? 15);
    }
    lengths.set(code, Math.max(4, 1 + code.length + longest));
  }
  return lengths;
}
