import { parsePhoneNumberFromString } from "libphonenumber-js/max";

/** What is known about an E164 number: its possible countries (ISO alpha-2). */
export interface E164Info {
  number: string;
  countries: string[];
}

/**
 * Parses a strict E164 string (`+` and 8 to 15 digits) that is a possible number of a known
 * country; undefined otherwise.
 */
export function parseE164(value: string): E164Info | undefined {
  if (!/^\+[1-9]\d{7,14}$/.test(value)) return undefined;
  const known = parsed.get(value);
  if (known !== undefined) return known ?? undefined;
  const info = parseWithMetadata(value);
  // A plain bounded memo: the answer depends only on the string and the bundled metadata.
  if (parsed.size >= PARSED_MAX) parsed.delete(parsed.keys().next().value!);
  parsed.set(value, info ?? null);
  return info;
}

// Parsing with libphonenumber's metadata costs tens of µs; senders (and many recipients) repeat.
const PARSED_MAX = 10_000;
const parsed = new Map<string, Readonly<E164Info> | null>();

function parseWithMetadata(value: string): E164Info | undefined {
  const phone = parsePhoneNumberFromString(value);
  if (!phone || !phone.isPossible()) return undefined;
  const countries = phone.country ? [phone.country] : phone.getPossibleCountries();
  if (countries.length === 0) return undefined;
  return Object.freeze({ number: value, countries: Object.freeze(countries) as string[] });
}

/** Whether a string follows the alphanumeric sender ID rules: 1–11 of A-Z a-z 0-9 space, at least one letter. */
export function isAlphanumericSender(value: string): boolean {
  return /^[A-Za-z0-9 ]{1,11}$/.test(value) && /[A-Za-z]/.test(value);
}

/** Whether a string is a plausible e-mail address (one @, a dotted domain, no spaces). */
export function isEmail(value: string): boolean {
  return value.length <= 254 && /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value);
}
