import { ScalarType, type DescService, type Message } from "@bufbuild/protobuf";
import { isReflectMessage, reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import type { HandlerContext } from "@connectrpc/connect";
import { fieldError } from "./errors.js";

/**
 * Sids and numbers are matched against a strict pattern before any use (a bad one is a 404 or a
 * field error of its own), so a NUL in them never reaches the database: they are left to that check.
 */
function isIdentifier(name: string): boolean {
  return name.endsWith("_sid") || name === "number";
}

function hasNul(value: unknown): boolean {
  return typeof value === "string" && value.includes("\0");
}

/** The first string field (named as clients write it, e.g. `Messages[2].Text`) that holds U+0000. */
export function nulField(msg: ReflectMessage, prefix = ""): string | undefined {
  for (const field of msg.fields) {
    if (!msg.isSet(field) || (prefix === "" && isIdentifier(field.name))) continue;
    const name = prefix + field.jsonName;
    const value: unknown = msg.get(field);
    switch (field.fieldKind) {
      case "scalar":
        if (field.scalar === ScalarType.STRING && hasNul(value)) return name;
        break;
      case "message":
        if (isReflectMessage(value)) {
          const found = nulField(value, `${name}.`);
          if (found) return found;
        }
        break;
      case "list": {
        let i = 0;
        for (const item of value as Iterable<unknown>) {
          if (hasNul(item)) return `${name}[${i}]`;
          if (isReflectMessage(item)) {
            const found = nulField(item, `${name}[${i}].`);
            if (found) return found;
          }
          i++;
        }
        break;
      }
      case "map":
        for (const [key, item] of value as Iterable<[unknown, unknown]>) {
          if (hasNul(key) || hasNul(item)) return `${name}.${String(key)}`;
          if (isReflectMessage(item)) {
            const found = nulField(item, `${name}.${String(key)}.`);
            if (found) return found;
          }
        }
        break;
    }
  }
  return undefined;
}

/**
 * Wraps a service implementation so that every unary method first refuses request strings that
 * contain U+0000 with a 400 InvalidParameter naming the field: PostgreSQL text cannot hold that
 * character, so such a value would otherwise fail in the database as a 500. One wrapper serves
 * every transport, since REST and Connect/gRPC call the same implementation.
 */
export function rejectNulStrings<T extends object>(service: DescService, impl: T): T {
  const wrapped: Record<string, unknown> = { ...(impl as Record<string, unknown>) };
  for (const method of service.methods) {
    const fn = (impl as Record<string, unknown>)[method.localName];
    if (method.methodKind !== "unary" || typeof fn !== "function") continue;
    wrapped[method.localName] = (req: Message, ctx: HandlerContext) => {
      const field = nulField(reflect(method.input, req));
      if (field) throw fieldError(field, "InvalidParameter", `${field} must not contain NUL (U+0000) characters.`);
      return (fn as (req: Message, ctx: HandlerContext) => unknown).call(impl, req, ctx);
    };
  }
  return wrapped as T;
}
