/**
 * The kinds of value a configuration variable takes: each a Zod schema over the variable's text
 * (blank counts as unset) and the words an error uses for what it expects, so that a bad value
 * names its variable and the form it wants ("PORT must be a port number, got "x"").
 */
import { Resolver } from "node:dns";
import { isSupportedCountry } from "libphonenumber-js/max";
import { z } from "zod";

/** One kind of value: its schema (input: the trimmed text, or undefined when unset or blank) and what an error says it expects. */
export interface Kind<T> {
  schema: z.ZodType<T, string | undefined>;
  expected: string;
  /** The default as the docs show it, when the schema has one. */
  shown?: string;
  /** Which part of a bad value is wrong (a list's bad item), when that says more than the whole value. */
  culprit?: (text: string) => string | undefined;
}

/** Whether a string is an ISO 3166-1 alpha-2 code the phone-number library has a numbering plan for. */
export function isKnownCountry(code: string): boolean {
  return /^[A-Z]{2}$/.test(code) && isSupportedCountry(code);
}

const csv = (text: string | undefined): string[] =>
  (text ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** A whole number from `min` (to `max`); with no default, undefined when unset. */
export function whole(def: number, min: number, max?: number, expected?: string): Kind<number>;
export function whole(def: undefined, min: number, max?: number, expected?: string): Kind<number | undefined>;
export function whole(def: number | undefined, min: number, max = Number.MAX_SAFE_INTEGER, expected?: string): Kind<number | undefined> {
  const n = z.coerce.number<string | undefined>().int().min(min).max(max);
  return {
    schema: def === undefined ? n.optional() : n.default(def),
    expected: expected ?? (max === Number.MAX_SAFE_INTEGER ? `a whole number of at least ${min}` : `a whole number from ${min} to ${max}`),
    shown: def === undefined ? undefined : `\`${def}\``,
  };
}

/** A whole number of `unit`s (at least `min`), given in ms. */
export function duration(def: number, min: number, unit: "seconds" | "hours", { positive = false } = {}): Kind<number> {
  const factor = unit === "seconds" ? 1000 : 3_600_000;
  const n = positive ? z.coerce.number<string | undefined>().positive() : z.coerce.number<string | undefined>().min(min);
  return {
    schema: n.default(def).transform((v) => Math.round(v * factor)),
    expected: positive ? `a positive number of ${unit}` : `a number of ${unit}, at least ${min}`,
    shown: `\`${def}\``,
  };
}

/** A rate per second: a number ≥ 0, or `off` (0: no limit). */
export function rate(def: number): Kind<number> {
  return {
    schema: z
      .string()
      .optional()
      .transform((v) => (v !== undefined && /^off$/i.test(v) ? "0" : v))
      .pipe(z.coerce.number<string | undefined>().min(0).default(def)),
    expected: 'a number of messages per second, 0 or "off"',
    shown: def === 0 ? "off" : `\`${def}\``,
  };
}

/** true/false (also 1/0, yes/no, any case). */
export function flag(def: boolean): Kind<boolean> {
  return {
    schema: z
      .string()
      .regex(/^(1|0|true|false|yes|no)$/i)
      .optional()
      .transform((v) => (v === undefined ? def : /^(1|true|yes)$/i.test(v))),
    expected: "true or false",
    shown: `\`${def}\``,
  };
}

/** One of a few words (any case, given in lower case). */
export function oneOf<const W extends string>(words: readonly [W, ...W[]], def: W): Kind<W> {
  return {
    schema: z
      .string()
      .optional()
      .transform((v) => v?.toLowerCase())
      .pipe(z.enum(words).default(def)),
    expected: words.length === 2 ? `${words[0]} or ${words[1]}` : `${words.slice(0, -1).join(", ")} or ${words[words.length - 1]}`,
    shown: `\`${def}\``,
  };
}

/** Any text; `def` when unset. */
export function text(def: string, shown?: string): Kind<string> {
  return { schema: z.string().default(def), expected: "a text", shown: shown ?? (def === "" ? "empty" : `\`${def}\``) };
}

/** Any text, or undefined when unset. */
export function optionalText(shown = "unset"): Kind<string | undefined> {
  return { schema: z.string().optional(), expected: "a text", shown };
}

/** A URL with one of the given schemes (e.g. `redis:`), or undefined when unset. */
export function optionalUrl(schemes: string[], expected: string): Kind<string | undefined> {
  const re = new RegExp(`^(${schemes.map((s) => s.replace(/:$/, "")).join("|")})://\\S+$`, "i");
  return { schema: z.string().regex(re).optional(), expected, shown: "unset" };
}

/** A comma-separated list of ISO 3166-1 alpha-2 codes (any case; given upper case, without repeats). */
export function countries(def: string[], shown?: string): Kind<string[]> {
  return {
    schema: z
      .string()
      .optional()
      .transform((v) => (v === undefined ? def : [...new Set(csv(v).map((c) => c.toUpperCase()))]))
      .refine((list) => list.every(isKnownCountry)),
    expected: "a comma-separated list of ISO 3166-1 alpha-2 country codes such as GB,AU",
    culprit: (text) => csv(text).find((c) => !isKnownCountry(c.toUpperCase())),
    shown: shown ?? (def.length ? `\`${def.join(",")}\`` : "unset"),
  };
}

/**
 * Comma-separated `CC=word` pairs, a country (ISO 3166-1 alpha-2, any case) each with one of
 * `words` (any case), into a map by upper-cased country; `def` when unset; `none` for no country.
 */
export function countryModes<const W extends string>(words: readonly [W, ...W[]], def: Readonly<Record<string, W>>): Kind<ReadonlyMap<string, W>> {
  const pair = (item: string): [string, W] | undefined => {
    const m = /^([A-Za-z]{2})\s*=\s*(\S+)$/.exec(item);
    const country = m?.[1].toUpperCase();
    const word = m?.[2].toLowerCase() as W | undefined;
    return country && isKnownCountry(country) && word && words.includes(word) ? [country, word] : undefined;
  };
  const isNone = (v: string) => v.trim().toLowerCase() === "none";
  const shownDef = Object.entries(def)
    .map(([c, w]) => `${c}=${w}`)
    .join(",");
  return {
    schema: z
      .string()
      .optional()
      .refine((v) => v === undefined || isNone(v) || csv(v).every((item) => pair(item) !== undefined))
      .transform((v) => new Map(v === undefined ? Object.entries(def) : isNone(v) ? [] : csv(v).map((item) => pair(item)!))),
    expected: `a comma-separated list of COUNTRY=${words.join("|")} pairs such as AU=require,GB=label (ISO 3166-1 alpha-2 codes), or none`,
    culprit: (text) => (isNone(text) ? undefined : csv(text).find((item) => pair(item) === undefined)),
    shown: `\`${shownDef}\``,
  };
}

/** One ISO 3166-1 alpha-2 code (any case; given upper case), or undefined when unset. */
export function country(shown = "—"): Kind<string | undefined> {
  return {
    schema: z
      .string()
      .optional()
      .transform((v) => v?.toUpperCase())
      .refine((c) => c === undefined || isKnownCountry(c)),
    expected: "an ISO 3166-1 alpha-2 country code such as GB",
    shown,
  };
}

/** Whether a code is an ISO 4217 currency this runtime knows (ICU's list; any Node with full ICU, the default build). */
export function isKnownCurrency(code: string): boolean {
  return /^[A-Z]{3}$/.test(code) && Intl.supportedValuesOf("currency").includes(code);
}

/** An ISO 4217 currency code: three capital letters, a currency the runtime knows (`AUD`, `USD`). */
export function currency(def: string): Kind<string> {
  return {
    schema: z
      .string()
      .optional()
      .transform((v) => v ?? def)
      .refine(isKnownCurrency),
    expected: "an ISO 4217 currency code of three capital letters such as AUD",
    shown: `\`${def}\``,
  };
}

/** A name matching `re`, or undefined when unset. */
export function optionalName(re: RegExp, expected: string, shown = "unset"): Kind<string | undefined> {
  return { schema: z.string().regex(re).optional(), expected, shown };
}

/** A comma-separated list of E164 prefixes (`+` and digits). */
export function prefixes(): Kind<string[]> {
  return {
    schema: z
      .string()
      .optional()
      .transform((v) => [...new Set(csv(v))])
      .refine((list) => list.every((p) => /^\+[1-9]\d{0,14}$/.test(p))),
    expected: "a comma-separated list of E164 prefixes such as +4470,+882",
    culprit: (text) => csv(text).find((p) => !/^\+[1-9]\d{0,14}$/.test(p)),
    shown: "unset",
  };
}

/** A comma-separated list of lower-cased words (domains); `def` when empty. */
export function domains(def: string[]): Kind<string[]> {
  return {
    schema: z
      .string()
      .optional()
      .transform((v) => {
        const list = csv(v).map((d) => d.toLowerCase());
        return list.length > 0 ? list : [...def];
      }),
    expected: "a comma-separated list of domains",
    shown: `\`${def.join(",")}\``,
  };
}

/** A comma-separated list of DNS servers (`ip`, `ip:port`, `[ipv6]:port`), checked by Node's own parser. */
export function dnsServers(): Kind<string[]> {
  return {
    schema: z
      .string()
      .optional()
      .transform((v) => csv(v))
      .refine((list) => {
        try {
          new Resolver().setServers(list);
          return true;
        } catch {
          return false;
        }
      }),
    expected: "a comma-separated list of IP addresses, each with an optional :port",
    shown: "unset (system resolver)",
  };
}
