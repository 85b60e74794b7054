/**
 * The one rule for integers in request JSON, on every JSON wire (REST bodies and Connect JSON):
 * an integer is a JSON number without a fraction; a 64-bit integer may also be a string of
 * decimal digits with an optional sign (`"1795480000"`, as the protobuf JSON mapping writes
 * them), nothing else (`"12a"`, `"1e3"`, `" 1"`, `"0x10"` are refused). 32-bit integers are
 * JSON numbers only. Answers always carry numbers. Query and path values are text, so any
 * integer field reads a decimal string there.
 */
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import type { FieldProblem } from "../common/errors.js";
import { is64 } from "./proto-json.js";

const INT32_MIN = -0x80000000;
const INT32_MAX = 0x7fffffff;
const UINT32_MAX = 0xffffffff;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/** A decimal integer as text: optional sign, digits only. */
export const DECIMAL_INTEGER = /^[+-]?\d+$/;

/** True for every integer scalar type. */
export function isInteger(scalar: ScalarType): boolean {
  switch (scalar) {
    case ScalarType.STRING:
    case ScalarType.BOOL:
    case ScalarType.BYTES:
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return false;
    default:
      return true;
  }
}

/**
 * What a scalar must look like, for messages. Every 64-bit integer of this API is a time in
 * Unix seconds (docs/api.md#conventions), so the message says so.
 */
function expectation(scalar: ScalarType): string {
  return is64(scalar) ? "an integer (Unix seconds)" : "an integer";
}

function range(scalar: ScalarType): [bigint, bigint] | [number, number] {
  switch (scalar) {
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return [0, UINT32_MAX];
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return [INT64_MIN, INT64_MAX];
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return [0n, UINT64_MAX];
    default:
      return [INT32_MIN, INT32_MAX];
  }
}

/**
 * Reads one integer value: from JSON (`source` "json": a number, or a decimal string for a
 * 64-bit field) or from text (a query or path value: a decimal string). Gives the value, or
 * what the field must be (the message after the field's name).
 */
export function readInteger(scalar: ScalarType, value: unknown, source: "json" | "text"): bigint | { mustBe: string } {
  let n: bigint;
  if (typeof value === "number" && Number.isInteger(value)) n = BigInt(value);
  else if (typeof value === "string" && (source === "text" || is64(scalar)) && DECIMAL_INTEGER.test(value)) n = BigInt(value);
  else if (typeof value === "string" && DECIMAL_INTEGER.test(value)) return { mustBe: `must be ${expectation(scalar)} as a JSON number, not a string.` };
  else return { mustBe: `must be ${expectation(scalar)}.` };
  const [min, max] = range(scalar);
  if (n < BigInt(min) || n > BigInt(max)) return { mustBe: `must be ${expectation(scalar)} between ${min} and ${max}.` };
  return n;
}

/** Checks a parsed JSON value; pushes its problems, named as the client spelled the keys. */
export type IntegerCheck = (json: unknown, problems: FieldProblem[]) => void;

type Walk = (value: unknown, name: string, problems: FieldProblem[]) => void;

/**
 * The integer rule applied to a request message's JSON (for Connect JSON, whose parser,
 * protobuf-es, is laxer: it takes `" 1"` and `"0x10"` for an int64, `"1e3"` for an int32).
 * Only the integer fields are looked at, and only where the JSON has the right shape for them
 * (a wrong shape is protobuf-es's to refuse). Undefined when the message has no integer field
 * at any depth. Compiled once per message type.
 */
export function integerCheck(desc: DescMessage): IntegerCheck | undefined {
  const compiled = new Map<DescMessage, ((obj: Record<string, unknown>, prefix: string, problems: FieldProblem[]) => void) | null>();
  const build = (d: DescMessage): ((obj: Record<string, unknown>, prefix: string, problems: FieldProblem[]) => void) | null => {
    if (compiled.has(d)) return compiled.get(d)!;
    if (d.typeName.startsWith("google.protobuf.")) return null; // special JSON forms: protobuf-es reads them
    const byKey = new Map<string, Walk>();
    const check = (obj: Record<string, unknown>, prefix: string, problems: FieldProblem[]) => {
      for (const key of Object.keys(obj)) {
        const walk = byKey.get(key);
        const value = obj[key];
        if (walk && value !== null) walk(value, prefix + key, problems);
      }
    };
    compiled.set(d, check); // before the fields: recursive messages end here
    for (const field of d.fields) {
      const walk = fieldWalk(field, build);
      if (!walk) continue;
      byKey.set(field.jsonName, walk);
      byKey.set(field.name, walk);
    }
    if (byKey.size === 0) {
      compiled.set(d, null);
      return null;
    }
    return check;
  };
  // Message types whose walks came out empty were set to null after their parents captured
  // them; a parent's walk reads the map at call time, so that is harmless.
  const root = build(desc);
  if (!root) return undefined;
  return (json, problems) => {
    if (isObject(json)) root(json, "", problems);
  };
}

function fieldWalk(
  field: DescField,
  build: (d: DescMessage) => ((obj: Record<string, unknown>, prefix: string, problems: FieldProblem[]) => void) | null,
): Walk | undefined {
  const scalarWalk =
    (scalar: ScalarType): Walk =>
    (value, name, problems) => {
      const r = readInteger(scalar, value, "json");
      if (typeof r !== "bigint") problems.push({ field: name, code: "InvalidParameter", message: `${name} ${r.mustBe}` });
    };
  const messageWalk = (d: DescMessage): Walk | undefined => {
    if (!build(d)) return undefined;
    return (value, name, problems) => {
      const check = build(d);
      if (check && isObject(value)) check(value, `${name}.`, problems);
    };
  };
  let one: Walk | undefined;
  switch (field.fieldKind) {
    case "scalar":
      return isInteger(field.scalar) ? scalarWalk(field.scalar) : undefined;
    case "enum":
      return undefined;
    case "message":
      return messageWalk(field.message);
    case "list":
      if (field.listKind === "scalar") one = isInteger(field.scalar) ? scalarWalk(field.scalar) : undefined;
      else if (field.listKind === "message") one = messageWalk(field.message);
      if (!one) return undefined;
      return (value, name, problems) => {
        if (!Array.isArray(value)) return;
        for (let i = 0; i < value.length; i++) if (value[i] !== null) one!(value[i], `${name}[${i}]`, problems);
      };
    case "map":
      if (field.mapKind === "scalar") one = isInteger(field.scalar) ? scalarWalk(field.scalar) : undefined;
      else if (field.mapKind === "message") one = messageWalk(field.message);
      if (!one) return undefined;
      return (value, name, problems) => {
        if (!isObject(value)) return;
        for (const k of Object.keys(value)) if (value[k] !== null) one!(value[k], `${name}.${k}`, problems);
      };
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
