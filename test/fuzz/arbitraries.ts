/**
 * fast-check generators for hostile input, built from the protobuf descriptors, and the run
 * settings of the fuzz tests (FUZZ_RUNS, FUZZ_SEED, FUZZ_RANDOM, FUZZ_SUMMARY).
 */
import { appendFileSync } from "node:fs";
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import fc from "fast-check";
import { dbKind } from "../support/db.js";

// ---------------------------------------------------------------------------------------------
// Run settings

/** Runs of each property (one property per route or method): FUZZ_RUNS, default `fallback`. */
export function fuzzRuns(fallback: number): number {
  const n = Number(process.env.FUZZ_RUNS ?? "");
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

const DEFAULT_SEED = 20261122;

/**
 * The base seed: FUZZ_SEED, else a fixed one so that runs are reproducible; FUZZ_RANDOM=1
 * draws a new one (printed in the summary line and in any failure).
 */
export const baseSeed: number = (() => {
  if (process.env.FUZZ_SEED && Number.isInteger(Number(process.env.FUZZ_SEED))) return Number(process.env.FUZZ_SEED);
  if (process.env.FUZZ_RANDOM === "1" || process.env.FUZZ_RANDOM === "true") return (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  return DEFAULT_SEED;
})();

/** fast-check parameters for the property numbered `index` (its own seed, derived from the base). */
export function propertyParams(index: number | string, numRuns: number): fc.Parameters<unknown> {
  return { seed: (baseSeed + seedOffset(index) * 7919) | 0, numRuns, endOnFailure: false };
}

/** A number per property: its index, or for a name (e.g. a method's), a stable hash of it, so adding a method leaves the others' cases as they were. */
function seedOffset(index: number | string): number {
  if (typeof index === "number") return index;
  let h = 0;
  for (let i = 0; i < index.length; i++) h = (Math.imul(h, 31) + index.charCodeAt(i)) | 0;
  return h & 0xffff;
}

/** Counts the cases run and their outcomes, and prints one summary line (quoted in docs/reliability.md). */
export class FuzzTally {
  private readonly started = performance.now();
  private readonly outcomes = new Map<string, number>();
  cases = 0;

  constructor(private readonly label: string) {}

  add(outcome: string | number): void {
    this.cases++;
    const key = String(outcome);
    this.outcomes.set(key, (this.outcomes.get(key) ?? 0) + 1);
  }

  /** `[fuzz] label (pglite): N cases in S s, seed X, runs R; outcomes: 200×n, 400×n, ...` */
  line(runs: number): string {
    const seconds = ((performance.now() - this.started) / 1000).toFixed(1);
    const outcomes = [...this.outcomes.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}×${v}`)
      .join(", ");
    return `[fuzz] ${this.label} (${dbKind()}): ${this.cases} cases in ${seconds} s, seed ${baseSeed}, FUZZ_RUNS ${runs}; outcomes: ${outcomes}`;
  }

  /** Prints the summary line, and appends it to the file named by FUZZ_SUMMARY when set. */
  report(runs: number): string {
    const line = this.line(runs);
    console.log(line);
    if (process.env.FUZZ_SUMMARY) appendFileSync(process.env.FUZZ_SUMMARY, `${line}\n`);
    return line;
  }
}

// ---------------------------------------------------------------------------------------------
// Strings

/** Strings that have broken parsers, databases and renderers before. */
const SPECIAL_STRINGS = [
  "",
  " ",
  "\t\n",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "\udfff",
  "x\ud83d",
  "\ude00y",
  "\udc00\ud800",
  "\u202eevil\u202c",
  "\u200f\u05e9\u05dc\u05d5\u05dd",
  "\u0627\u0644\u0633\u0644\u0627\u0645",
  "e\u0301\u0302\u0303\u0304",
  "Z\u0351\u0352\u0353\u0354\u0355\u0356",
  "🦄",
  "👩‍👩‍👧‍👦",
  "𝕏𝕐𝕫",
  "\ufeff",
  "\ufffd",
  "\uffff",
  "\u2028\u2029",
  "\r\n",
  "%00",
  "%zz",
  "../..",
  "' or 1=1 --",
  "\\",
  '"',
  "null",
  "true",
  "0",
  "-1",
  "1e309",
  "NaN",
  "__proto__",
  "constructor",
  "<script>alert(1)</script>",
  "${jndi:ldap://x}",
  "ß",
  "İ",
  "ﬀ",
  "\u0085",
  "\u00a0",
];

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));

/** One unit of a hostile string: graphemes of every script, any code point, lone surrogates, combining marks, bidi controls. */
const hostileUnit = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }) },
  { weight: 3, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: loneSurrogate },
  { weight: 1, arbitrary: fc.constantFrom("\u0000", "\u0301", "\u200f", "\u202e", "\ufeff", "\u0085", "%", "/", "?", "#", "&", "=") },
);

/** A hostile string: special values, random unicode (astral, combining, RTL, lone surrogates) or huge. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...SPECIAL_STRINGS) },
  { weight: 5, arbitrary: fc.string({ unit: hostileUnit, maxLength: 40 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom("x", "é", "🦄", "e\u0301", "\ud800", " ", "9"), fc.integer({ min: 256, max: 70_000 }))
      .map(([c, n]) => c.repeat(Math.ceil(n / c.length))),
  },
);

/** Percent-encodes every code point (lone surrogates as their 3-byte WTF-8 form, which is not UTF-8). */
export function percentEncode(s: string): string {
  let out = "";
  for (const ch of s) {
    if (/^[A-Za-z0-9\-._~]$/.test(ch)) {
      out += ch;
      continue;
    }
    const cp = ch.codePointAt(0)!;
    const bytes =
      cp < 0x80
        ? [cp]
        : cp < 0x800
          ? [0xc0 | (cp >> 6), 0x80 | (cp & 63)]
          : cp < 0x10000
            ? [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)]
            : [0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)];
    out += bytes.map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("");
  }
  return out;
}

/** Percent sequences that are not valid (or not UTF-8, or decode to separators). */
export const BAD_ENCODINGS = [
  "%",
  "%z",
  "%zz",
  "%E0%A4%A",
  "%C0%AF",
  "%ED%A0%80",
  "%FF",
  "%00",
  "%2F",
  "%2e%2e",
  "+",
  "%20",
  "a%2Fb",
  "%%",
  "%u0041",
  ".",
  "..",
];

// ---------------------------------------------------------------------------------------------
// JSON values

/** A JSON value of any type (the wrong one for most fields). */
export const junkJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom([], {}, [null], [[]], { a: { b: { c: [] } } }, -0, 1e308, 2 ** 53 + 1, -(2 ** 63), 0.1),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
  hostileString,
);

/** Valid or plausible values per request field (proto name), so that some requests succeed. */
export type Hints = Record<string, readonly unknown[]>;

/** Decimal strings around every integer boundary of the API. */
export const INTEGER_STRINGS = [
  "0",
  "1",
  "-1",
  "5",
  "200",
  "1000",
  "1001",
  "2147483647",
  "2147483648",
  "-2147483648",
  "-2147483649",
  "9223372036854775807",
  "9223372036854775808",
  "-9223372036854775808",
  "99999999999999999999",
  "1e3",
  "0x10",
  " 5",
  "5 ",
  "+5",
  "1.5",
  "NaN",
  "Infinity",
  "",
  "00",
  "-0",
  "1_000",
];

function isInteger(scalar: ScalarType): boolean {
  return (
    scalar !== ScalarType.STRING && scalar !== ScalarType.BOOL && scalar !== ScalarType.BYTES && scalar !== ScalarType.DOUBLE && scalar !== ScalarType.FLOAT
  );
}

function is64(scalar: ScalarType): boolean {
  return [ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64].includes(scalar);
}

function integerRange(scalar: ScalarType): [bigint, bigint] {
  switch (scalar) {
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return [0n, 2n ** 32n - 1n];
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return [0n, 2n ** 64n - 1n];
    default:
      return is64(scalar) ? [-(2n ** 63n), 2n ** 63n - 1n] : [-(2n ** 31n), 2n ** 31n - 1n];
  }
}

function hinted(field: DescField, hints: Hints): fc.Arbitrary<unknown> | undefined {
  const values = hints[field.name];
  return values && values.length > 0 ? fc.constantFrom(...values) : undefined;
}

/** A JSON value for one field, as a REST client might send it: mostly plausible, often hostile, sometimes of the wrong type. */
export function jsonValueFor(field: DescField, hints: Hints, depth = 0): fc.Arbitrary<unknown> {
  const hint = hinted(field, hints);
  const options: { weight: number; arbitrary: fc.Arbitrary<unknown> }[] = [];
  if (hint) options.push({ weight: 5, arbitrary: hint });
  options.push({ weight: 1, arbitrary: junkJson });
  switch (field.fieldKind) {
    case "scalar":
      options.push({ weight: 3, arbitrary: jsonScalar(field.scalar) });
      break;
    case "enum":
      options.push({ weight: 3, arbitrary: fc.oneof(fc.constantFrom(...field.enum.values.map((v) => v.name)), fc.integer()) });
      break;
    case "message":
      if (depth < 3) options.push({ weight: 4, arbitrary: jsonObjectFor(field.message, hints, depth + 1) });
      break;
    case "list": {
      const element =
        field.listKind === "message"
          ? depth < 3
            ? jsonObjectFor(field.message, hints, depth + 1)
            : junkJson
          : field.listKind === "enum"
            ? fc.constantFrom(...field.enum.values.map((v) => v.name))
            : jsonScalar(field.scalar);
      options.push({ weight: 5, arbitrary: fc.array(element, { maxLength: 4 }) });
      // Around the batch limits: 0, 100 and 101 copies of one element.
      options.push({ weight: 1, arbitrary: fc.tuple(element, fc.constantFrom(0, 1, 100, 101)).map(([e, n]) => new Array(n).fill(e)) });
      options.push({ weight: 1, arbitrary: fc.array(junkJson, { minLength: 1, maxLength: 3 }) });
      break;
    }
    case "map":
      options.push({ weight: 3, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), junkJson, { maxKeys: 3 }) });
      break;
  }
  return fc.oneof(...options);
}

function jsonScalar(scalar: ScalarType): fc.Arbitrary<unknown> {
  if (scalar === ScalarType.STRING) return hostileString;
  if (scalar === ScalarType.BOOL) return fc.oneof(fc.boolean(), fc.constantFrom("true", "false", 1, 0));
  if (scalar === ScalarType.BYTES) return fc.oneof(fc.base64String(), hostileString);
  if (scalar === ScalarType.DOUBLE || scalar === ScalarType.FLOAT) return fc.oneof(fc.double(), fc.constantFrom("NaN", "Infinity", "1e999"));
  const [min, max] = integerRange(scalar);
  return fc.oneof(
    fc.bigInt({ min, max }).map((n) => (n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n.toString())),
    fc.constantFrom(...INTEGER_STRINGS),
    fc.integer({ min: -1000, max: 1000 }),
    fc.double(),
  );
}

/** A JSON object for a message: each field present or not (under its JSON or proto name), plus unknown keys. */
export function jsonObjectFor(desc: DescMessage, hints: Hints, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const entries = desc.fields.map((f) =>
    fc.oneof(
      { weight: hints[f.name] ? 1 : 3, arbitrary: fc.constant(null) },
      { weight: hints[f.name] ? 4 : 2, arbitrary: fc.tuple(fc.constantFrom(f.jsonName, f.jsonName, f.name), jsonValueFor(f, hints, depth)) },
    ),
  );
  const extra = fc.oneof(
    { weight: 4, arbitrary: fc.constant({}) },
    { weight: 1, arbitrary: fc.dictionary(fc.oneof(hostileString, fc.constantFrom("__proto__", "constructor", "prototype")), junkJson, { maxKeys: 3 }) },
  );
  return fc.tuple(fc.tuple(...entries), extra).map(([present, more]) => {
    const obj: Record<string, unknown> = {};
    for (const e of present) if (e) obj[e[0]] = e[1];
    for (const [k, v] of Object.entries(more)) if (!(k in obj)) obj[k] = v;
    return obj;
  });
}

// ---------------------------------------------------------------------------------------------
// Request bodies as raw text

const deepArray = (n: number) => "[".repeat(n) + "]".repeat(n);
const deepObject = (n: number) => '{"a":'.repeat(n) + "1" + "}".repeat(n);
/** Over the 1 MiB body limit. */
const OVERSIZED = JSON.stringify({ Text: "x".repeat(1024 * 1024 + 16) });

/** A body as sent on the wire: the JSON of `obj` or a corruption of it, raw bytes, nothing at all. */
export function bodyText(obj: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<string | Buffer | undefined> {
  return fc.oneof(
    { weight: 14, arbitrary: obj.map((o) => JSON.stringify(o)) },
    {
      weight: 2,
      // Duplicate keys (JSON.parse keeps the last): a first value the client did not mean to send.
      arbitrary: fc.tuple(obj, fc.nat(), junkJson, fc.boolean()).map(([o, i, v, first]) => {
        const keys = Object.keys(o);
        const text = JSON.stringify(o);
        if (keys.length === 0) return `{"Text":1,"Text":"x"}`;
        const dup = `${JSON.stringify(keys[i % keys.length])}:${JSON.stringify(v) ?? "null"}`;
        return first ? `{${dup},${text.slice(1)}` : `${text.slice(0, -1)},${dup}}`;
      }),
    },
    {
      weight: 1,
      arbitrary: fc
        .jsonValue({ maxDepth: 2 })
        .filter((v) => typeof v !== "object" || v === null || Array.isArray(v))
        .map((v) => JSON.stringify(v)),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(obj, fc.nat()).map(([o, i]) => {
        const t = JSON.stringify(o);
        return t.slice(0, i % t.length);
      }),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)) },
    { weight: 1, arbitrary: fc.string({ unit: "binary-ascii", maxLength: 100 }) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(deepArray(1000), deepArray(50_000), deepObject(1000), `{"Text":${deepArray(5000)}}`, `{"Messages":[${deepObject(2000)}]}`),
    },
    { weight: 1, arbitrary: obj.map((o) => `\ufeff${JSON.stringify(o)}`) },
    {
      weight: 1,
      // Bytes that are not UTF-8 inside a JSON string.
      arbitrary: fc
        .tuple(
          obj,
          fc.uint8Array({ minLength: 1, maxLength: 4 }).map((b) => b.map((x) => x | 0x80)),
        )
        .map(([o, bad]) => {
          const text = JSON.stringify({ ...o, Text: "@@" });
          const [head, tail] = text.split("@@");
          return Buffer.concat([Buffer.from(head), Buffer.from(bad), Buffer.from(tail)]);
        }),
    },
    { weight: 1, arbitrary: fc.constantFrom(undefined, "", " ", "null", "{}", "[]") },
    { weight: 1, arbitrary: fc.constant(OVERSIZED) },
  );
}

/** Content-Type headers: JSON mostly, and every near miss. */
export const jsonContentType: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 12, arbitrary: fc.constant("application/json") },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      undefined,
      "application/json; charset=utf-8",
      "APPLICATION/JSON",
      "application/merge-patch+json",
      "application/json; charset=utf-16",
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/xml",
      "text/json",
      "application/jsonx",
      "application/octet-stream",
      "application/proto",
      "application/grpc",
      "",
      ";",
      "application/",
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme-ascii", maxLength: 30 }) },
);

// ---------------------------------------------------------------------------------------------
// Paths, query strings, headers

const SID_CHARS = fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abc-_".split(""));

/** Sid-shaped strings: right or wrong prefix, length, case and alphabet. */
export const sidLike: fc.Arbitrary<string> = fc
  .tuple(fc.constantFrom("AC", "PR", "MG", "AD", "PN", "LS", "XX", "ac", "", "A"), fc.string({ unit: SID_CHARS, minLength: 28, maxLength: 32 }))
  .map(([p, rest]) => p + rest);

/** A path segment (already encoded): a real Sid of the caller's or someone else's, a near miss, hostile text, a bad escape. */
export function pathSegment(own: readonly string[], others: readonly string[]): fc.Arbitrary<string> {
  const options: { weight: number; arbitrary: fc.Arbitrary<string> }[] = [
    { weight: 2, arbitrary: sidLike },
    { weight: 2, arbitrary: hostileString.map(percentEncode) },
    { weight: 1, arbitrary: fc.constantFrom(...BAD_ENCODINGS) },
    { weight: 1, arbitrary: fc.integer({ min: 90, max: 3000 }).map((n) => "A".repeat(n)) },
    { weight: 1, arbitrary: fc.string({ unit: "grapheme-ascii", maxLength: 20 }).map((s) => s.replace(/[/?#%]/g, "")) },
  ];
  if (own.length > 0) options.push({ weight: 8, arbitrary: fc.constantFrom(...own) });
  if (others.length > 0) options.push({ weight: 2, arbitrary: fc.constantFrom(...others) });
  return fc.oneof(...options);
}

/** A raw query string (`""` or `?…`): the request's own parameters with junk values, junk keys, repeats, bad escapes. */
export function queryString(names: readonly string[], hints: Hints, fieldOf: (name: string) => string | undefined): fc.Arbitrary<string> {
  const key = fc.oneof(
    ...(names.length > 0 ? [{ weight: 6, arbitrary: fc.constantFrom(...names) }] : []),
    { weight: 1, arbitrary: fc.constantFrom("__proto__", "constructor", "toString", "hasOwnProperty", "Results_Count[]", "a[b]", "", "=") },
    { weight: 1, arbitrary: hostileString.map(percentEncode) },
  );
  const value = (k: string) => {
    const hint = hints[fieldOf(k) ?? ""];
    return fc.oneof(
      ...(hint && hint.length > 0 ? [{ weight: 4, arbitrary: fc.constantFrom(...hint).map((v) => percentEncode(String(v))) }] : []),
      { weight: 3, arbitrary: fc.constantFrom(...INTEGER_STRINGS).map(percentEncode) },
      { weight: 3, arbitrary: hostileString.map(percentEncode) },
      { weight: 1, arbitrary: fc.constantFrom(...BAD_ENCODINGS) },
    );
  };
  const pair = key.chain((k) => fc.tuple(fc.constant(k), value(k), fc.nat(9)).map(([kk, v, r]) => (r === 0 ? kk : `${kk}=${v}`)));
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant("") },
    { weight: 8, arbitrary: fc.array(pair, { minLength: 1, maxLength: 6 }).map((ps) => `?${ps.join("&")}`) },
    { weight: 1, arbitrary: fc.constantFrom("?", "?&&", "?=", "?;", "?a=1;b=2", "?%", `?Results_Count=${"9".repeat(5000)}`) },
  );
}

const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");

/**
 * Whether the server takes this Authorization as the operator's `token` (src/accounts/auth.ts: the
 * scheme in any case, blanks around the token): a mutation such as lowercasing `Bearer <token>`
 * can still be the operator's, whose answers may show every tenant's data.
 */
export function isOperatorAuthOf(token: string, authorization: string | undefined): boolean {
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1] === token;
}

/** Authorization headers: the right one mostly, another valid one, and every way to garble it. */
export function authorization(valid: readonly string[], otherValid: readonly string[], sids: readonly string[]): fc.Arbitrary<string | undefined> {
  const credentialText = fc.string({ unit: "grapheme", maxLength: 30 });
  const bad = fc.oneof(
    fc.constantFrom(
      undefined,
      "",
      "Basic",
      "Basic ",
      "Basic    ",
      "Basic %%%%",
      "Basic ====",
      "Basic a",
      "Bearer",
      "Bearer ",
      "Digest username=x",
      "Negotiate abc",
      "basic",
      "NTLM x",
      "Basic Og==",
    ),
    fc.tuple(credentialText, credentialText).map(([u, p]) => `Basic ${b64(`${u}:${p}`)}`),
    credentialText.map((s) => `Basic ${b64(s)}`),
    fc.constantFrom(...(sids.length > 0 ? sids : ["AC"])).map((sid) => `Basic ${b64(`${sid}:`)}`),
    fc.constantFrom(...(sids.length > 0 ? sids : ["AC"])).map((sid) => `Basic ${b64(`${sid.toLowerCase()}:x`)}`),
    fc.string({ unit: "grapheme-ascii", maxLength: 60 }).map((s) => `Bearer ${s}`),
    fc.string({ unit: "grapheme-ascii", maxLength: 60 }),
    fc
      .constantFrom(...valid)
      .chain((v) =>
        fc.constantFrom(
          v.slice(0, -4),
          `${v}x`,
          `${v}==`,
          v.replace("Basic ", "Bearer "),
          v.replace("Basic ", "Basic\t"),
          `${v} extra`,
          v.toLowerCase(),
          v.replace(/[A-Za-z]$/, "!"),
        ),
      ),
  );
  return fc.oneof(
    { weight: 14, arbitrary: fc.constantFrom(...valid) },
    ...(otherValid.length > 0 ? [{ weight: 2, arbitrary: fc.constantFrom(...otherValid) }] : []),
    { weight: 5, arbitrary: bad },
  );
}

/** An Idempotency-Key header or none: blank, at and over the 255 limit, odd characters. */
export const idempotencyKey: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 8, arbitrary: fc.constant(undefined) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 40 }) },
  { weight: 1, arbitrary: fc.constantFrom("", " ", "k".repeat(255), "k".repeat(256), "k".repeat(5000), "\u00e9\u00ff") },
);

// ---------------------------------------------------------------------------------------------
// Typed (protobuf) messages and broken binary

/** A value for one field of a protobuf message init (as typed clients send it). */
function typedValueFor(field: DescField, hints: Hints, depth: number): fc.Arbitrary<unknown> | undefined {
  const typedHint = (scalar: ScalarType): fc.Arbitrary<unknown> | undefined => {
    const values = (hints[field.name] ?? []).flatMap((v): unknown[] => {
      if (scalar === ScalarType.STRING) return typeof v === "string" ? [v] : [];
      if (scalar === ScalarType.BOOL) return typeof v === "boolean" ? [v] : [];
      if (isInteger(scalar) && typeof v === "number" && Number.isInteger(v)) return [is64(scalar) ? BigInt(v) : v];
      return [];
    });
    return values.length > 0 ? fc.constantFrom(...values) : undefined;
  };
  const scalar = (s: ScalarType): fc.Arbitrary<unknown> => {
    const hint = typedHint(s);
    let base: fc.Arbitrary<unknown>;
    if (s === ScalarType.STRING) base = hostileString;
    else if (s === ScalarType.BOOL) base = fc.boolean();
    else if (s === ScalarType.BYTES) base = fc.uint8Array({ maxLength: 64 });
    else if (s === ScalarType.DOUBLE || s === ScalarType.FLOAT) base = fc.double();
    else {
      const [min, max] = integerRange(s);
      const big = fc.oneof(
        fc.bigInt({ min, max }),
        fc.constantFrom(min, max, 0n, -1n, 1n).filter((n) => n >= min && n <= max),
      );
      base = is64(s) ? big : big.map(Number);
    }
    return hint ? fc.oneof({ weight: 3, arbitrary: hint }, { weight: 2, arbitrary: base }) : base;
  };
  switch (field.fieldKind) {
    case "scalar":
      return scalar(field.scalar);
    case "enum":
      return fc.constantFrom(...field.enum.values.map((v) => v.number));
    case "message":
      return depth < 3 && !field.message.typeName.startsWith("google.protobuf.") ? typedInitFor(field.message, hints, depth + 1) : undefined;
    case "list":
      if (field.listKind === "message") {
        if (depth >= 3 || field.message.typeName.startsWith("google.protobuf.")) return undefined;
        const element = typedInitFor(field.message, hints, depth + 1);
        return fc.oneof(
          { weight: 5, arbitrary: fc.array(element, { maxLength: 4 }) },
          { weight: 1, arbitrary: fc.tuple(element, fc.constantFrom(0, 100, 101)).map(([e, n]) => new Array(n).fill(e)) },
        );
      }
      return fc.array(field.listKind === "enum" ? fc.constantFrom(...field.enum.values.map((v) => v.number)) : scalar(field.scalar), { maxLength: 4 });
    case "map":
      return undefined; // the API has no map fields
  }
}

/** An init object for `create(desc, init)`: each field set or not (fields of a oneof are left unset). */
export function typedInitFor(desc: DescMessage, hints: Hints, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const entries = desc.fields.flatMap((f) => {
    const value = f.oneof ? undefined : typedValueFor(f, hints, depth);
    if (!value) return [];
    return [
      fc.oneof(
        { weight: hints[f.name] ? 1 : 3, arbitrary: fc.constant(undefined) },
        { weight: hints[f.name] ? 4 : 2, arbitrary: value.map((v) => [f.localName, v] as const) },
      ),
    ];
  });
  return fc.tuple(...entries).map((present) => {
    const init: Record<string, unknown> = {};
    for (const e of present) if (e) init[e[0]] = e[1];
    return init;
  });
}

/** Byte sequences that are not valid protobuf, or valid in surprising ways. */
const BAD_FIELDS: number[][] = [
  [0x0a, 0x02, 0xff, 0xfe], // field 1, a string that is not UTF-8
  [0x0a, 0x03, 0xed, 0xa0, 0x80], // field 1, a lone surrogate in WTF-8
  [0x0a, 0x7f], // length past the end
  [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f], // a 4 GiB length
  [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], // an overlong varint
  [0x08, 0x80], // a truncated varint
  [0x08, 0x01], // field 1 (a string) as a varint: wrong wire type
  [0x0b], // start group, never ended
  [0x0c], // end group without a start
  [0x00], // field number 0
  [0x0f], // wire type 7
  [0xf8, 0xff, 0xff, 0xff, 0x0f, 0x00], // the largest field number
  [0x0d, 0x01], // truncated fixed32
  [0x09, 0x01, 0x02], // truncated fixed64
  [0x12, 0x01, 0x00], // field 2 with a NUL byte
];

/** A protobuf binary body: valid, truncated, bit-flipped, with junk or a bad field around it, or random bytes. */
export function brokenBinary(valid: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  return fc.oneof(
    { weight: 3, arbitrary: valid },
    { weight: 2, arbitrary: fc.tuple(valid, fc.nat()).map(([b, i]) => (b.length === 0 ? b : b.slice(0, i % b.length))) },
    {
      weight: 2,
      arbitrary: fc.tuple(valid, fc.nat(), fc.integer({ min: 1, max: 255 })).map(([b, i, x]) => {
        if (b.length === 0) return new Uint8Array([x]);
        const c = b.slice();
        c[i % c.length] ^= x;
        return c;
      }),
    },
    { weight: 1, arbitrary: fc.tuple(valid, fc.uint8Array({ minLength: 1, maxLength: 20 })).map(([b, j]) => concat(b, j)) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(valid, fc.constantFrom(...BAD_FIELDS), fc.boolean())
        .map(([b, f, before]) => (before ? concat(new Uint8Array(f), b) : concat(b, new Uint8Array(f)))),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 120 }) },
  );
}

/** Bytes joined. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength))));
}

/** One gRPC length-prefixed frame: flags, a 4-byte big-endian length (possibly a lie), data. */
export function frame(flags: number, data: Uint8Array, declared = data.length): Uint8Array {
  const head = Buffer.alloc(5);
  head[0] = flags & 0xff;
  head.writeUInt32BE(Math.max(0, Math.min(0xffffffff, declared)), 1);
  return concat(head, data);
}

/** A gRPC / gRPC-Web request body: one honest frame mostly, or odd flags, lying lengths, extra or no frames, a partial header. */
export function framedBody(payload: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  return fc.oneof(
    { weight: 8, arbitrary: payload.map((p) => frame(0, p)) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom(1, 2, 0x80, 0x81, 0xff, 0x7f), payload).map(([f, p]) => frame(f, p)) },
    { weight: 1, arbitrary: fc.tuple(payload, fc.constantFrom(1, 5, 1000, -1, -3, 0xffffffff)).map(([p, d]) => frame(0, p, p.length + d)) },
    { weight: 1, arbitrary: fc.tuple(payload, payload).map(([a, b]) => concat(frame(0, a), frame(0, b))) },
    { weight: 1, arbitrary: fc.constantFrom(new Uint8Array(0), new Uint8Array([0]), new Uint8Array([0, 0, 0]), new Uint8Array([0, 0, 0, 0, 1])) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 60 }) },
  );
}
