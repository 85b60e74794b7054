/**
 * The Fone Dynamics compatible REST format (account setting RestCompatibility "FoneDynamics"):
 * the shapes Fone Dynamics' SDKs read. One rule, driven by the options in
 * proto/switchboard/v2/rest_compat.proto, serves every method and the OpenAPI document alike:
 * - a response message with `compat_resource` is wrapped under that key: {"Message": {...}};
 * - a response whose list field has `compat_unwrap` is that list itself; a failed item (one whose
 *   ResponseStatus is set) becomes {"ErrorCode", "Message"} plus the request item's `compat_echo`
 *   fields as received;
 * - a field with `compat_alias` is repeated under the alias, wherever it appears in the response.
 * - a field with `compat_omit` (Switchboard's own, e.g. SenderIdRegistered) is left out.
 * Methods whose messages carry none of these options answer exactly as for any other account.
 */
import { getOption, type DescField, type DescMessage, type DescMethod, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ResponseStatusSchema } from "../../gen/switchboard/v2/common_pb.js";
import { compat_alias, compat_echo, compat_omit, compat_resource, compat_unwrap } from "../../gen/switchboard/v2/rest_compat_pb.js";

/** Reshapes a method's proto JSON response; `requestBody` is the JSON body the client sent, when any. */
export type CompatShaper = (json: JsonObject, requestBody: unknown) => JsonValue;

/** What a compatible response of one method looks like, read from the descriptors. */
export interface CompatPlan {
  /** The key the resource is wrapped under (compat_resource of the output message). */
  wrap?: string;
  /** The output's list field that is answered bare (compat_unwrap), with its item's layout. */
  unwrap?: { list: DescField & { fieldKind: "list" }; item: DescMessage; status: DescField; echoes: DescField[] };
}

/** The compatible layout of a method's response; undefined when it is the same as the ordinary one. */
export function compatPlan(rpc: DescMethod): CompatPlan | undefined {
  const out = rpc.output;
  const wrap = getOption(out, compat_resource);
  if (wrap !== "") return { wrap };
  for (const list of out.fields) {
    if (list.fieldKind !== "list" || list.listKind !== "message" || !getOption(list, compat_unwrap)) continue;
    const item = list.message;
    const status = item.fields.find((f) => f.message?.typeName === ResponseStatusSchema.typeName);
    if (!status) throw new Error(`${item.typeName}: compat_unwrap needs a ResponseStatus field on the item`);
    return { unwrap: { list, item, status, echoes: item.fields.filter((f) => getOption(f, compat_echo)) } };
  }
  return undefined;
}

/** The function that reshapes a method's responses for a compatible account; undefined when none is needed. */
export function compatShaper(rpc: DescMethod): CompatShaper | undefined {
  const plan = compatPlan(rpc);
  const alias = aliaser(rpc.output);
  if (plan?.wrap !== undefined) {
    const key = plan.wrap;
    return (json) => {
      alias?.(json);
      return { [key]: json };
    };
  }
  if (plan?.unwrap) {
    const { list, status, echoes } = plan.unwrap;
    const itemAlias = aliaser(plan.unwrap.item);
    return (json, requestBody) => {
      const items = Array.isArray(json[list.jsonName]) ? (json[list.jsonName] as JsonObject[]) : [];
      const sent = requestItems(requestBody, list.jsonName);
      return items.map((item, i) => {
        const failed = item[status.jsonName] as JsonObject | undefined;
        if (failed === undefined || failed === null) {
          itemAlias?.(item);
          return item;
        }
        const flat: JsonObject = { ErrorCode: failed.ErrorCode ?? "", Message: failed.Message ?? "" };
        for (const f of echoes) flat[f.jsonName] = asReceived(sent[i]?.[f.jsonName]);
        return flat;
      });
    };
  }
  return alias === undefined ? undefined : (json) => (alias(json), json);
}

function requestItems(body: unknown, key: string): Record<string, unknown>[] {
  const items = body !== null && typeof body === "object" ? (body as Record<string, unknown>)[key] : undefined;
  return Array.isArray(items) ? items.map((i) => (i !== null && typeof i === "object" ? (i as Record<string, unknown>) : {})) : [];
}

/** A request value echoed back as the SDK's string: as sent, "" when omitted, JSON text otherwise. */
function asReceived(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === undefined || value === null) return "";
  return JSON.stringify(value);
}

type Aliaser = (json: JsonObject) => void;

/**
 * Copies every `compat_alias` field of a message (and of the messages below it) to its alias, in
 * place; undefined when no field below `root` has one. Built once per message type.
 */
export function aliaser(root: DescMessage, seen = new Map<DescMessage, Aliaser | undefined | null>()): Aliaser | undefined {
  if (seen.has(root)) return seen.get(root) ?? undefined;
  seen.set(root, null); // in progress: a recursive reference adds nothing new
  const ops: Aliaser[] = [];
  for (const f of root.fields) {
    const alias = getOption(f, compat_alias);
    const key = f.jsonName;
    if (alias !== "") ops.push((json) => void (key in json && (json[alias] = json[key])));
    // Switchboard's own fields (compat_omit) are not in the format the SDKs read.
    if (getOption(f, compat_omit)) ops.push((json) => void delete json[key]);
    const sub = f.message ? aliaser(f.message, seen) : undefined;
    if (!sub) continue;
    if (f.fieldKind === "list") {
      ops.push((json) => {
        const l = json[key];
        if (Array.isArray(l)) for (const item of l) if (item !== null && typeof item === "object" && !Array.isArray(item)) sub(item as JsonObject);
      });
    } else if (f.fieldKind === "message") {
      ops.push((json) => {
        const v = json[key];
        if (v !== null && typeof v === "object" && !Array.isArray(v)) sub(v as JsonObject);
      });
    }
  }
  const result = ops.length === 0 ? undefined : (json: JsonObject) => ops.forEach((op) => op(json));
  seen.set(root, result);
  return result;
}
