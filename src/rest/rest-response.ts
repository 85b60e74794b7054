/**
 * REST response writing: proto JSON with every implicit field, 64-bit integers as JSON numbers
 * (Unix seconds, docs/api.md#conventions), or only the `response_body` field. Compiled once per route.
 */
import { create, isMessage, toJson, type DescField, type DescMessage, type DescMethod, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { is64, isJsonObject, isWellKnown } from "./proto-json.js";
import { compatShaper } from "./rest-compat.js";

/**
 * The writer of one route's response: the method's output (a message or its init shape) as the
 * JSON body text; with `requestBody` (the request as the client sent it), in the Fone Dynamics
 * compatible shape (src/rest/rest-compat.ts) where the method has one.
 */
export type ResponseWriter = (response: unknown, compatible?: { requestBody: unknown }) => string;

/** Compiles the writer of one route's response. */
export function responseWriter(rpc: DescMethod, responseBody: string): ResponseWriter {
  const desc = rpc.output;
  const fix = int64Fixer(desc);
  const pick = responseBody === "" ? undefined : desc.fields.find((f) => f.name === responseBody)!.jsonName;
  // Only a whole-message response can be reshaped (a response_body picks a field of it).
  const compat = pick === undefined ? compatShaper(rpc) : undefined;
  return (response, compatible) => {
    const message = isMessage(response, desc) ? response : create(desc, response as never);
    const json = toJson(desc, message, { alwaysEmitImplicit: true }) as JsonObject;
    if (fix) fix(json);
    if (compat && compatible) return JSON.stringify(compat(json, compatible.requestBody));
    return JSON.stringify(pick === undefined ? json : (json[pick] ?? null));
  };
}

/** Compiles a method's response as the JSON object the answer is written from (for CSV answers, rest-csv.ts). */
export function responseJson(rpc: DescMethod): (response: unknown) => JsonObject {
  const desc = rpc.output;
  const fix = int64Fixer(desc);
  return (response) => {
    const message = isMessage(response, desc) ? response : create(desc, response as never);
    const json = toJson(desc, message, { alwaysEmitImplicit: true }) as JsonObject;
    if (fix) fix(json);
    return json;
  };
}

type Fixer = (json: JsonObject) => void;

const INT64_WRAPPERS = new Set(["google.protobuf.Int64Value", "google.protobuf.UInt64Value"]);

function toNumber(v: JsonValue | undefined): JsonValue | undefined {
  return typeof v === "string" ? Number(v) : v;
}

/**
 * A function that rewrites, in place, every 64-bit integer of a message's proto JSON from its
 * string form into a JSON number; undefined when the message (transitively) has none. Built
 * once per message type, so a response walks only the paths that can hold such values.
 */
export function int64Fixer(root: DescMessage): Fixer | undefined {
  // Which reachable message types hold a 64-bit integer somewhere below them (a fixpoint, so
  // recursive messages are handled).
  const reachable: DescMessage[] = [];
  const seen = new Set<DescMessage>();
  const visit = (d: DescMessage) => {
    if (seen.has(d) || isWellKnown(d)) return;
    seen.add(d);
    reachable.push(d);
    for (const f of d.fields) if (f.message) visit(f.message);
  };
  visit(root);
  const needs = new Set<DescMessage>();
  const direct = (f: DescField): boolean => (f.scalar !== undefined && is64(f.scalar)) || (f.message !== undefined && INT64_WRAPPERS.has(f.message.typeName));
  for (let changed = true; changed;) {
    changed = false;
    for (const d of reachable) {
      if (needs.has(d)) continue;
      if (d.fields.some((f) => direct(f) || (f.message !== undefined && needs.has(f.message)))) {
        needs.add(d);
        changed = true;
      }
    }
  }
  if (!needs.has(root)) return undefined;

  const fixers = new Map<DescMessage, Fixer>();
  const build = (d: DescMessage): Fixer => {
    const existing = fixers.get(d);
    if (existing) return existing;
    const ops: Fixer[] = [];
    const fixer: Fixer = (json) => {
      for (const op of ops) op(json);
    };
    fixers.set(d, fixer);
    for (const f of d.fields) {
      const key = f.jsonName;
      const nested = f.message !== undefined && needs.has(f.message) ? f.message : undefined;
      if (direct(f)) {
        if (f.fieldKind === "map") {
          ops.push((json) => {
            const m = json[key];
            if (isJsonObject(m)) for (const k of Object.keys(m)) m[k] = toNumber(m[k])!;
          });
        } else if (f.fieldKind === "list") {
          ops.push((json) => {
            const l = json[key];
            if (Array.isArray(l)) for (let i = 0; i < l.length; i++) l[i] = toNumber(l[i])!;
          });
        } else {
          ops.push((json) => {
            const v = json[key];
            if (typeof v === "string") json[key] = Number(v);
          });
        }
      } else if (nested) {
        const sub = build(nested); // registered before its ops are built, so recursion ends
        if (f.fieldKind === "map") {
          ops.push((json) => {
            const m = json[key];
            if (isJsonObject(m)) for (const k of Object.keys(m)) if (isJsonObject(m[k])) sub(m[k] as JsonObject);
          });
        } else if (f.fieldKind === "list") {
          ops.push((json) => {
            const l = json[key];
            if (Array.isArray(l)) for (const item of l) if (isJsonObject(item)) sub(item);
          });
        } else {
          ops.push((json) => {
            const v = json[key];
            if (isJsonObject(v)) sub(v);
          });
        }
      }
    }
    return fixer;
  };
  return build(root);
}
