import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { isReflectMessage, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import type { Interceptor } from "@connectrpc/connect";
import { fieldError } from "./errors.js";

/**
 * Sids and numbers are matched against a strict pattern before any use (a bad one is a 404 or a
 * field error of its own), so they never reach the database as they are: they are left to that check.
 */
function isIdentifier(name: string): boolean {
  return name.endsWith("_sid") || name === "number";
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why PostgreSQL cannot store a string as it is, or undefined when it can. */
type Unstorable = "nul" | "surrogate";

function unstorable(value: unknown): Unstorable | undefined {
  if (typeof value !== "string") return undefined;
  if (value.includes("\0")) return "nul";
  // An unpaired UTF-16 surrogate (JSON "\ud800") has no UTF-8 form: PostgreSQL would keep U+FFFD
  // instead, and PGlite's wire encoder miscounts such a string's length and corrupts the query.
  if (UNPAIRED_SURROGATE.test(value)) return "surrogate";
  return undefined;
}

/**
 * Text from outside the API (an SMS from the network) that must be kept whatever it holds:
 * U+0000 and unpaired surrogates become U+FFFD, as a UTF-8 decoder would have made them.
 */
export function storableText(value: string): string {
  return value.replace(/\0/g, "\uFFFD").replace(new RegExp(UNPAIRED_SURROGATE.source, "g"), "\uFFFD");
}

/** A request field (named as clients write it, e.g. `Messages[2].Text`) and why it cannot be stored. */
export interface UnstorableField {
  field: string;
  reason: Unstorable;
}

/** The first string field that holds U+0000 or an unpaired surrogate (the reflective reference for unstorableChecker). */
export function unstorableField(msg: ReflectMessage, prefix = ""): UnstorableField | undefined {
  for (const field of msg.fields) {
    if (!msg.isSet(field) || (prefix === "" && isIdentifier(field.name))) continue;
    const name = prefix + field.jsonName;
    const value: unknown = msg.get(field);
    switch (field.fieldKind) {
      case "scalar":
        if (field.scalar === ScalarType.STRING) {
          const reason = unstorable(value);
          if (reason) return { field: name, reason };
        }
        break;
      case "message":
        if (isReflectMessage(value)) {
          const found = unstorableField(value, `${name}.`);
          if (found) return found;
        }
        break;
      case "list": {
        let i = 0;
        for (const item of value as Iterable<unknown>) {
          const reason = unstorable(item);
          if (reason) return { field: `${name}[${i}]`, reason };
          if (isReflectMessage(item)) {
            const found = unstorableField(item, `${name}[${i}].`);
            if (found) return found;
          }
          i++;
        }
        break;
      }
      case "map":
        for (const [key, item] of value as Iterable<[unknown, unknown]>) {
          const reason = unstorable(key) ?? unstorable(item);
          if (reason) return { field: `${name}.${String(key)}`, reason };
          if (isReflectMessage(item)) {
            const found = unstorableField(item, `${name}.${String(key)}.`);
            if (found) return found;
          }
        }
        break;
    }
  }
  return undefined;
}

/**
 * The interceptor that refuses, before any unary method runs, request strings that PostgreSQL
 * cannot store as sent — holding U+0000, or not well-formed Unicode (an unpaired surrogate) — with
 * a 400 InvalidParameter naming the field: such a value would otherwise fail in the database as a
 * 500, or be stored as something else.
 */
export const rejectUnstorableStrings: Interceptor = (next) => (req) => {
  if (!req.stream) {
    const found = unstorableChecker(req.method.input)(req.message as unknown as Fields, "");
    if (found) {
      const { field, reason } = found;
      const message =
        reason === "nul"
          ? `${field} must not contain NUL (U+0000) characters.`
          : `${field} must be well-formed Unicode: it contains an unpaired UTF-16 surrogate (U+D800 to U+DFFF).`;
      throw fieldError(field, "InvalidParameter", message);
    }
  }
  return next(req);
};

type Fields = Record<string, unknown>;
type Checker = (msg: Fields, prefix: string) => UnstorableField | undefined;

const checkers = new WeakMap<DescMessage, Checker>();

/**
 * unstorableField compiled for one message type: it reads the fields that can hold a string
 * straight from the message object (no reflection per request, which profiling showed on every
 * send) and skips the rest, answering as unstorableField does.
 */
export function unstorableChecker(desc: DescMessage): Checker {
  const known = checkers.get(desc);
  if (known) return known;
  const steps: Checker[] = [];
  const checker: Checker = (msg, prefix) => {
    for (let i = 0; i < steps.length; i++) {
      const found = steps[i](msg, prefix);
      if (found !== undefined) return found;
    }
    return undefined;
  };
  // Registered before the steps are built, so that recursive message types end.
  checkers.set(desc, checker);
  for (const field of desc.fields) {
    const step = fieldStep(field);
    if (!step) continue;
    const top = isIdentifier(field.name);
    steps.push(top ? (msg, prefix) => (prefix === "" ? undefined : step(msg, prefix)) : step);
  }
  return checker;
}

function fieldStep(field: DescField): Checker | undefined {
  const { localName, jsonName } = field;
  const oneof = field.oneof?.localName;
  // A oneof member is set when its group's case names it.
  const read = oneof
    ? (msg: Fields) => {
        const group = msg[oneof] as { case?: string; value?: unknown } | undefined;
        return group?.case === localName ? group.value : undefined;
      }
    : (msg: Fields) => msg[localName];
  const at = (field: string, reason: Unstorable | undefined) => (reason ? { field, reason } : undefined);
  switch (field.fieldKind) {
    case "scalar":
      if (field.scalar !== ScalarType.STRING) return undefined;
      return (msg, prefix) => at(prefix + jsonName, unstorable(read(msg)));
    case "message": {
      const sub = field.message;
      return (msg, prefix) => {
        const value = read(msg);
        return value ? unstorableChecker(sub)(value as Fields, `${prefix}${jsonName}.`) : undefined;
      };
    }
    case "list": {
      if (field.listKind === "enum" || (field.listKind === "scalar" && field.scalar !== ScalarType.STRING)) return undefined;
      const sub = field.listKind === "message" ? field.message : undefined;
      return (msg, prefix) => {
        const list = read(msg) as unknown[] | undefined;
        if (!list) return undefined;
        for (let i = 0; i < list.length; i++) {
          const item = list[i];
          const found = at(`${prefix}${jsonName}[${i}]`, unstorable(item));
          if (found) return found;
          if (sub && item) {
            const nested = unstorableChecker(sub)(item as Fields, `${prefix}${jsonName}[${i}].`);
            if (nested) return nested;
          }
        }
        return undefined;
      };
    }
    case "map": {
      const sub = field.mapKind === "message" ? field.message : undefined;
      return (msg, prefix) => {
        const map = read(msg) as Record<string, unknown> | undefined;
        if (!map) return undefined;
        for (const key of Object.keys(map)) {
          const item = map[key];
          const found = at(`${prefix}${jsonName}.${key}`, unstorable(key) ?? unstorable(item));
          if (found) return found;
          if (sub && item) {
            const nested = unstorableChecker(sub)(item as Fields, `${prefix}${jsonName}.${key}.`);
            if (nested) return nested;
          }
        }
        return undefined;
      };
    }
    default:
      return undefined;
  }
}
