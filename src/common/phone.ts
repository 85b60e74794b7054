import { Metadata } from "libphonenumber-js/core";
import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import metadataJson from "libphonenumber-js/max/metadata";
import addressparser from "nodemailer/lib/addressparser";
import { createBoundedMemo } from "./bounded-memo.js";
import { countryOfE164 } from "./number-country.js";

/** What is known about an E164 number: its country (ISO alpha-2, from its calling code and leading digits). */
export interface E164Info {
  readonly number: string;
  /** ISO alpha-2; "" only for a stored recipient that is no longer a number (service-sends' forward of a reply). */
  readonly country: string;
}

/**
 * Parses a strict E164 string (`+` and 8 to 15 digits) that is a possible number of a known
 * country, written in its one canonical form; undefined otherwise. A spelling libphonenumber
 * rewrites (a trunk prefix after the calling code: `+610412345678`, `+114155550123`) is refused:
 * it names the same handset as the canonical one, and every check compares the string
 * (docs/decisions.md, "One spelling per number"). suggestE164 finds the spelling to ask for.
 * The country comes from countryOfE164 (calling code and leading digits, never the number-type
 * patterns: docs/decisions.md, "A number's country from its prefix").
 */
export function parseE164(value: string): E164Info | undefined {
  if (!/^\+[1-9]\d{7,14}$/.test(value)) return undefined;
  const known = parsed.get(value);
  if (known !== undefined) return known ?? undefined;
  const country = (plainLengthAnswer(value) ?? isPossibleWithMetadata(value)) ? countryOfE164(value) : undefined;
  const info = country === undefined ? undefined : Object.freeze({ number: value, country });
  // The answer depends only on the string and the bundled metadata.
  parsed.set(value, info ?? null);
  return info;
}

// Senders (and many recipients) repeat.
const parsed = createBoundedMemo<string, E164Info | null>(10_000);

/**
 * libphonenumber's own answer to "a possible number, written canonically": parse (which drops a
 * trunk prefix after the calling code), then isPossible(); false unless the number it read is
 * written exactly as `value` (the canonical spelling). plainLengthAnswer gives the same answer
 * without a parse for most numbers; test/common/phone.test.ts checks they agree.
 */
export function isPossibleWithMetadata(value: string): boolean {
  const phone = parsePhoneNumberFromString(value);
  return phone !== undefined && phone.number === value && phone.isPossible();
}

/**
 * The canonical spelling of a number a carrier gave (`+` and digits, or `+00`/`00` and digits):
 * libphonenumber's reading, repeated until it no longer changes (`+6100412345678` loses one `0`
 * per reading), when that is a number parseE164 accepts; undefined for anything else (an
 * alphanumeric sender, a short code, an impossible number), which is then no number at all.
 */
export function canonicalE164(value: string): string | undefined {
  const trimmed = value.trim();
  if (!/^(\+|\+?00)\d{1,17}$/.test(trimmed)) return undefined;
  let number = trimmed.replace(/^\+?00/, "+");
  if (parseE164(number)) return number;
  for (let i = 0; i < 3; i++) {
    const read = parsePhoneNumberFromString(number)?.number;
    if (read === undefined || read === number) return undefined;
    number = read;
    if (parseE164(number)) return number;
  }
  return undefined;
}

/**
 * For a number field's refusal: the canonical E164 spelling of what the client wrote, when it is
 * one with spaces, dashes, dots or brackets, an international prefix (`00`, `+00`) or a trunk
 * prefix after the calling code; undefined when there is none or it was already written so.
 */
export function suggestE164(value: string): string | undefined {
  const compact = value.trim().replace(/[\s\-.()]/g, "");
  const canonical = canonicalE164(compact);
  return canonical !== undefined && canonical !== value.trim() ? canonical : undefined;
}

/** " Write it +61412345678." when suggestE164 has a spelling for `value`, else "". */
export function writeItAs(value: string): string {
  const suggestion = suggestE164(value);
  return suggestion === undefined
    ? ""
    : ` Write it ${suggestion} (E164: + and the country code, then the number without its trunk prefix such as 0, no spaces).`;
}

/** Per geographic calling code: its national prefix pattern and each country's possible lengths. */
interface CallingCodePlan {
  prefix: RegExp | undefined;
  lengths: (readonly number[] | undefined)[];
}

/** The parts of libphonenumber's Metadata class read here (its typings leave them out). */
interface PlanMetadata {
  hasCallingCode(code: string): boolean | undefined;
  getCountryCodesForCallingCode(code: string): string[] | undefined;
  selectNumberingPlan(country: string): void;
  numberingPlan: { nationalPrefixForParsing(): string | undefined; possibleLengths(): number[] | undefined };
}

const newMetadata = () => new Metadata(metadataJson) as unknown as PlanMetadata;
const metadata = newMetadata();
const plans = new Map<string, CallingCodePlan | null>();

function callingCodePlan(code: string): CallingCodePlan | null {
  let plan = plans.get(code);
  if (plan !== undefined) return plan;
  const countries = metadata.getCountryCodesForCallingCode(code);
  if (!countries || countries.length === 0) plan = null;
  else {
    const m = newMetadata();
    m.selectNumberingPlan(countries[0]);
    const npfp = m.numberingPlan.nationalPrefixForParsing();
    plan = {
      prefix: npfp ? new RegExp(`^(?:${npfp})`) : undefined,
      lengths: countries.map((c) => {
        m.selectNumberingPlan(c);
        return m.numberingPlan.possibleLengths();
      }),
    };
  }
  plans.set(code, plan);
  return plan;
}

/** true / false when every country of the number's calling code gives that answer; undefined: ask the full parse. */
function plainLengthAnswer(value: string): boolean | undefined {
  for (let k = 1; k <= 3; k++) {
    const code = value.slice(1, 1 + k);
    if (!metadata.hasCallingCode(code)) continue;
    const plan = callingCodePlan(code);
    if (!plan) return undefined; // a non-geographic calling code
    const national = value.slice(1 + k);
    if (plan.prefix?.test(national)) return undefined;
    let yes = 0;
    for (const lengths of plan.lengths) if (!lengths || lengths.includes(national.length)) yes++;
    if (yes === plan.lengths.length) return true;
    if (yes === 0) return false;
    return undefined;
  }
  return undefined; // no calling code: the full parse refuses it
}

/** A number's type as libphonenumber's 'max' metadata classifies it (PREMIUM_RATE, MOBILE, …); "" when it cannot tell. */
export function numberType(value: string): string {
  let known = types.get(value);
  if (known === undefined) {
    known = parsePhoneNumberFromString(value)?.getType() ?? "";
    types.set(value, known);
  }
  return known;
}

// The full parse costs tens of µs; recipients repeat.
const types = createBoundedMemo<string, string>(10_000);

/** getType()'s order of the types it tries (libphonenumber-js getNumberType): fixed-line first. */
const TYPE_ORDER = ["FIXED_LINE", "MOBILE", "PREMIUM_RATE", "TOLL_FREE", "SHARED_COST", "VOIP", "PERSONAL_NUMBER", "PAGER", "UAN", "VOICEMAIL"] as const;

interface TypePlan {
  general: RegExp;
  leadingDigits: RegExp | undefined;
  types: { type: string; pattern: RegExp; lengths: readonly number[] | undefined }[];
}
const typePlans = new Map<string, TypePlan>();

type TypeMetadata = PlanMetadata & {
  numberingPlan: {
    nationalNumberPattern(): string;
    leadingDigits(): string | undefined;
    type(t: string): { pattern(): string; possibleLengths(): number[] | undefined } | undefined;
  };
};

function typePlan(country: string): TypePlan {
  let plan = typePlans.get(country);
  if (plan === undefined) {
    const m = newMetadata() as TypeMetadata;
    m.selectNumberingPlan(country);
    const types = TYPE_ORDER.flatMap((type) => {
      const t = m.numberingPlan.type(type);
      const source = t?.pattern();
      return source ? [{ type, pattern: new RegExp(`^(?:${source})$`), lengths: t!.possibleLengths() }] : [];
    });
    const leading = m.numberingPlan.leadingDigits();
    plan = {
      general: new RegExp(`^(?:${m.numberingPlan.nationalNumberPattern()})$`),
      leadingDigits: leading ? new RegExp(`^(?:${leading})`) : undefined,
      types,
    };
    typePlans.set(country, plan);
  }
  return plan;
}

/** getType()'s answer for a national number under one country's plan ("" when none applies). */
function typeIn(plan: TypePlan, national: string): string {
  if (!plan.general.test(national)) return "";
  return plan.types.find((t) => (!t.lengths || t.lengths.includes(national.length)) && t.pattern.test(national))?.type ?? "";
}

/**
 * numberType()'s answer from the metadata's patterns for the number's calling code, without a full
 * parse (which was ~13 % of a send's CPU when every recipient is classified, and recipients rarely
 * repeat). Of the countries sharing a calling code, the one parsing picks: the first whose leading
 * digits match or under whose plan the number has a type. What a full parse would rewrite first (a
 * national prefix after the calling code, a non-geographic code) takes the full parse.
 */
export function leadingNumberType(value: string): string {
  const split = plainSplit(value);
  if (split === undefined) return numberType(value);
  for (const country of split.countries) {
    const p = typePlan(country);
    const type = typeIn(p, split.national);
    if (p.leadingDigits?.test(split.national) || type !== "") return type;
  }
  return "";
}

/**
 * The number's geographic calling code's countries and its national number; undefined when it has
 * none, or when what follows the code reads as a national prefix (a full parse would rewrite it).
 */
function plainSplit(value: string): { countries: readonly string[]; national: string } | undefined {
  for (let k = 1; k <= 3; k++) {
    const code = value.slice(1, 1 + k);
    if (!metadata.hasCallingCode(code)) continue;
    const countries = metadata.getCountryCodesForCallingCode(code);
    const national = value.slice(1 + k);
    const plan = callingCodePlan(code);
    if (!countries || countries.length === 0 || !plan || plan.prefix?.test(national)) return undefined;
    return { countries, national };
  }
  return undefined;
}

/** Whether a string follows the alphanumeric sender ID rules: 1–11 of A-Z a-z 0-9 space, at least one letter. */
export function isAlphanumericSender(value: string): boolean {
  return /^[A-Za-z0-9 ]{1,11}$/.test(value) && /[A-Za-z]/.test(value);
}

/** Control characters (C0, DEL, C1, U+0085 among them) and the Unicode line and paragraph separators. */
const CONTROL_OR_SEPARATOR = /[\p{Cc}\u2028\u2029]/u;

/**
 * Whether a string is one plausible e-mail address: one @, a dotted domain, no spaces, no control
 * character or line separator (a mail header line break in disguise, e.g. `a@b.c\u0085Bcc:x`), and
 * nodemailer's address parser, which builds the mail's headers, reads it back as exactly that one
 * address (not a list, a group or a display name; it drops characters it does not want).
 */
export function isEmail(value: string): boolean {
  if (value.length > 254 || CONTROL_OR_SEPARATOR.test(value) || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value)) return false;
  const parsed = addressparser(value, { flatten: true });
  return parsed.length === 1 && parsed[0].address === value && parsed[0].name === "";
}
