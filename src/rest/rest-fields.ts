/**
 * REST request decoding, field by field: JSON values (bodies) and strings (path and query) into
 * the init shape of protobuf-es `create`, with every problem named as the client wrote the key.
 * Readers are compiled once per message type and field.
 */
import { fromJson, ScalarType, type DescEnum, type DescField, type DescMessage, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import type { FieldProblem } from "../common/errors.js";
import { DECIMAL_INTEGER, readInteger } from "./json-integers.js";
import { is64, isJsonObject, isWellKnown } from "./proto-json.js";

/** What a reader returns for a value it refused (the problem is recorded). */
export const INVALID: unique symbol = Symbol("invalid");
export type Converted = unknown; // a value for the init shape of `create`, or INVALID

/** Converts one field's value. */
export interface FieldReader {
  field: DescField;
  /** Converts one given (non-null) value; on a problem pushes it, named `name`, and returns INVALID. */
  read(value: unknown, name: string, problems: FieldProblem[]): Converted;
}

/** Converts a JSON object into a message's init shape. */
export interface MessageConverter {
  /** Reads a JSON object into an init object for `create`; unknown keys and nulls are skipped. */
  read(obj: JsonObject, prefix: string, problems: FieldProblem[]): Record<string, unknown>;
}

const messageConverters = new WeakMap<DescMessage, MessageConverter>();

/** The converter of a message type (built once, shared). */
export function messageConverter(desc: DescMessage): MessageConverter {
  let conv = messageConverters.get(desc);
  if (conv) return conv;
  // Registered before the readers are built, which resolve nested types lazily (recursive messages).
  const byKey = new Map<string, FieldReader>();
  // Proto name → json_name of the fields whose two names differ: a body giving both is ambiguous.
  const twinOf = new Map<string, string>();
  conv = {
    read(obj, prefix, problems) {
      const init: Record<string, unknown> = {};
      for (const key of Object.keys(obj)) {
        const reader = byKey.get(key);
        const value = obj[key];
        if (!reader || value === null) continue; // unknown keys are ignored; null means "not given"
        const twin = twinOf.get(key);
        if (twin !== undefined && obj[twin] !== undefined && obj[twin] !== null) {
          // Which one a reader takes (the last key, the json_name) differs between readers: refused.
          problem(problems, prefix + twin, `is given twice, as ${twin} and ${key}: send it under one name.`);
          continue;
        }
        const converted = reader.read(value, prefix + key, problems);
        if (converted !== INVALID) assign(init, reader.field, converted);
      }
      return init;
    },
  };
  messageConverters.set(desc, conv);
  for (const field of desc.fields) {
    const reader = fieldReader(field);
    byKey.set(field.jsonName, reader);
    byKey.set(field.name, reader);
    if (field.name !== field.jsonName) twinOf.set(field.name, field.jsonName);
  }
  return conv;
}

/** Sets a converted value on an init object (oneof members under their group). */
export function assign(init: Record<string, unknown>, field: DescField, value: unknown): void {
  if (field.oneof) init[field.oneof.localName] = { case: field.localName, value };
  else init[field.localName] = value;
}

function problem(problems: FieldProblem[], name: string, message: string): typeof INVALID {
  problems.push({ field: name, code: "InvalidParameter", message: `${name} ${message}` });
  return INVALID;
}

/** Reads a JSON value for a field of any kind. */
export function fieldReader(field: DescField): FieldReader {
  switch (field.fieldKind) {
    case "scalar": {
      const scalar = field.scalar;
      const asString = field.longAsString;
      return { field, read: (v, name, p) => jsonScalar(scalar, asString, v, name, p) };
    }
    case "enum": {
      const e = field.enum;
      return { field, read: (v, name, p) => jsonEnum(e, v, name, p) };
    }
    case "message": {
      const desc = field.message;
      if (isWellKnown(desc)) return fallbackReader(field);
      return { field, read: (v, name, p) => jsonMessage(desc, v, name, p) };
    }
    case "list": {
      let element: (v: unknown, name: string, p: FieldProblem[]) => Converted;
      switch (field.listKind) {
        case "scalar": {
          const scalar = field.scalar;
          const asString = field.longAsString;
          element = (v, name, p) => jsonScalar(scalar, asString, v, name, p);
          break;
        }
        case "enum": {
          const e = field.enum;
          element = (v, name, p) => jsonEnum(e, v, name, p);
          break;
        }
        case "message": {
          const desc = field.message;
          if (isWellKnown(desc)) return fallbackReader(field);
          element = (v, name, p) => jsonMessage(desc, v, name, p);
          break;
        }
      }
      return {
        field,
        read(value, name, problems) {
          if (!Array.isArray(value)) return problem(problems, name, "must be a JSON array.");
          return convertAll(value as unknown[], (item, i) => {
            const itemName = `${name}[${i}]`;
            return item === null ? problem(problems, itemName, "must not be null.") : element(item, itemName, problems);
          });
        },
      };
    }
    case "map":
      return fallbackReader(field);
  }
}

/** Converts every item (all of them, so that every problem is reported); INVALID if any was refused. */
function convertAll(values: unknown[], convert: (value: unknown, index: number) => Converted): Converted {
  const out: unknown[] = [];
  let ok = true;
  for (let i = 0; i < values.length; i++) {
    const converted = convert(values[i], i);
    if (converted === INVALID) ok = false;
    else out.push(converted);
  }
  return ok ? out : INVALID;
}

/** Lets protobuf-es read the field (maps, well-known types): the value alone, keyed by json_name. */
function fallbackReader(field: DescField): FieldReader {
  const parent = field.parent;
  return {
    field,
    read(value, name, problems) {
      try {
        const msg = fromJson(parent, { [field.jsonName]: value as JsonValue }, { ignoreUnknownFields: true });
        const own = msg as unknown as Record<string, unknown>;
        if (field.oneof) return (own[field.oneof.localName] as { value: unknown }).value;
        return own[field.localName];
      } catch {
        // protobuf-es throws a plain Error ("cannot decode field x.y.z from JSON: ...") that names
        // the proto field, not the key the client wrote; the message here does.
        const expected = field.fieldKind === "map" ? "a JSON object" : `a valid ${jsonTypeName(field)}`;
        return problem(problems, name, `must be ${expected}.`);
      }
    },
  };
}

function jsonTypeName(field: DescField): string {
  return field.message?.name ?? field.enum?.name ?? "value";
}

function jsonMessage(desc: DescMessage, value: unknown, name: string, problems: FieldProblem[]): Converted {
  if (!isJsonObject(value)) return problem(problems, name, "must be a JSON object.");
  const before = problems.length;
  const init = messageConverter(desc).read(value, `${name}.`, problems);
  return problems.length > before ? INVALID : init;
}

function jsonEnum(e: DescEnum, value: unknown, name: string, problems: FieldProblem[]): Converted {
  if (typeof value === "string") {
    const v = e.values.find((ev) => ev.name === value);
    if (v) return v.number;
  } else if (typeof value === "number" && Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX) {
    return value;
  }
  return problem(problems, name, `must be one of ${e.values.map((v) => v.name).join(", ")}.`);
}

const INT32_MIN = -0x80000000;
const INT32_MAX = 0x7fffffff;

/** An integer by the one rule of src/rest/json-integers.ts, as the init shape wants it. */
function integer(
  scalar: ScalarType,
  longAsString: boolean,
  value: unknown,
  name: string,
  problems: FieldProblem[],
  source: "json" | "text" = "json",
): Converted {
  const n = readInteger(scalar, value, source);
  if (typeof n !== "bigint") return problem(problems, name, n.mustBe);
  if (is64(scalar)) return longAsString ? n.toString() : n;
  return Number(n);
}

function jsonScalar(scalar: ScalarType, longAsString: boolean, value: unknown, name: string, problems: FieldProblem[]): Converted {
  switch (scalar) {
    case ScalarType.STRING:
      return typeof value === "string" ? value : problem(problems, name, "must be a string.");
    case ScalarType.BOOL:
      return typeof value === "boolean" ? value : problem(problems, name, "must be true or false.");
    case ScalarType.BYTES:
      return bytes(value, name, problems);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      if (typeof value === "number") return value;
      return floatString(value, name, problems);
    default:
      return integer(scalar, longAsString, value, name, problems);
  }
}

function bytes(value: unknown, name: string, problems: FieldProblem[]): Converted {
  if (typeof value === "string") {
    try {
      return base64Decode(value);
    } catch {
      // fall through
    }
  }
  return problem(problems, name, "must be base64-encoded bytes.");
}

function floatString(value: unknown, name: string, problems: FieldProblem[]): Converted {
  if (typeof value === "string") {
    if (value === "NaN") return NaN;
    if (value === "Infinity") return Infinity;
    if (value === "-Infinity") return -Infinity;
    const n = value.trim() === "" ? NaN : Number(value);
    if (Number.isFinite(n)) return n;
  }
  return problem(problems, name, "must be a number.");
}

/** Reads path and query values (strings) for scalar, enum and repeated scalar/enum fields. */
export function queryReader(field: DescField): FieldReader | undefined {
  const scalarFromString =
    (scalar: ScalarType, longAsString: boolean) =>
    (v: string, name: string, p: FieldProblem[]): Converted => {
      switch (scalar) {
        case ScalarType.STRING:
          return v;
        case ScalarType.BOOL: {
          const lower = v.toLowerCase();
          if (lower === "true" || lower === "1") return true;
          if (lower === "false" || lower === "0") return false;
          return problem(p, name, "must be true or false.");
        }
        case ScalarType.BYTES:
          return bytes(v, name, p);
        case ScalarType.DOUBLE:
        case ScalarType.FLOAT:
          return floatString(v, name, p);
        default:
          return integer(scalar, longAsString, v.trim(), name, p, "text");
      }
    };
  const enumFromString =
    (e: DescEnum) =>
    (v: string, name: string, p: FieldProblem[]): Converted =>
      jsonEnum(e, DECIMAL_INTEGER.test(v) ? Number(v) : v, name, p);

  let one: ((v: string, name: string, p: FieldProblem[]) => Converted) | undefined;
  if (field.fieldKind === "scalar") one = scalarFromString(field.scalar, field.longAsString);
  else if (field.fieldKind === "enum") one = enumFromString(field.enum);
  else if (field.fieldKind === "list" && field.listKind === "scalar") {
    one = scalarFromString(field.scalar, field.longAsString);
  } else if (field.fieldKind === "list" && field.listKind === "enum") one = enumFromString(field.enum);
  if (!one) return undefined;
  const convert = one;

  if (field.fieldKind !== "list") {
    return { field, read: (v, name, p) => convert(String(v), name, p) };
  }
  return {
    field,
    read(value, name, problems) {
      const values = Array.isArray(value) ? (value as unknown[]) : [value];
      return convertAll(values, (v) => convert(String(v), name, problems));
    },
  };
}
