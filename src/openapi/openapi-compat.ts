/**
 * The OpenAPI schemas of the Fone Dynamics compatible REST format, derived from the descriptors by
 * the same rule the response writer applies (src/rest/rest-compat.ts): a compat_resource is
 * wrapped under its key, a compat_unwrap list is answered bare with flat failed items, and a
 * compat_alias field is repeated under its alias; a compat_omit field is left out.
 */
import { getOption, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { compat_alias, compat_omit } from "../../gen/switchboard/v2/rest_compat_pb.js";
/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1) or any other OpenAPI object. */
export type OpenApiObject = { [key: string]: unknown };
import { isOperatorService } from "../accounts/auth.js";
import { compatPlan } from "../rest/rest-compat.js";

/** What the schema builder lends: response schemas of messages and fields, and named components. */
export interface CompatSchemaParts {
  message(desc: DescMessage): OpenApiObject;
  /** The message's response schema inline, with only the fields `include` keeps. */
  object(desc: DescMessage, include: (f: DescField) => boolean): OpenApiObject;
  field(field: DescField): OpenApiObject;
  /** A component built once under a unique name; answers its $ref. */
  component(name: string, owner: string, build: () => OpenApiObject): OpenApiObject;
}

/** The 200 body schema a FoneDynamics account gets from a method; undefined when it is the ordinary one. */
export function compatResponseSchema(rpc: DescMethod, parts: CompatSchemaParts): OpenApiObject | undefined {
  // The format is an account's setting: operator calls (no account) are always answered in the
  // ordinary shapes, message records included (src/rest/rest.ts reshapes only for an account).
  if (isOperatorService(rpc.parent)) return undefined;
  const plan = compatPlan(rpc);
  if (plan?.wrap !== undefined) {
    return { type: "object", required: [plan.wrap], properties: { [plan.wrap]: aliased(rpc.output, parts) } };
  }
  if (plan?.unwrap) {
    const { item, status, echoes } = plan.unwrap;
    const sent = parts.component(`${item.name}Sent`, `${item.typeName}#compat-sent`, () => ({
      type: "object",
      description: "A sent item: the message's fields.",
      properties: Object.fromEntries(item.fields.filter((f) => f !== status).map((f) => [f.jsonName, parts.field(f)])),
    }));
    const failed = parts.component(`${item.name}Failed`, `${item.typeName}#compat-failed`, () => ({
      type: "object",
      description: `A failed item: its ErrorCode and Message, and the item's ${echoes.map((f) => f.jsonName).join(", ")} as the request sent them ("" where omitted).`,
      required: ["ErrorCode", "Message", ...echoes.map((f) => f.jsonName)],
      properties: {
        ErrorCode: { type: "string" },
        Message: { type: "string" },
        ...Object.fromEntries(echoes.map((f) => [f.jsonName, { type: "string" }])),
      },
    }));
    return { type: "array", description: "One item per request item, in request order.", items: { anyOf: [sent, failed] } };
  }
  return hasAliases(rpc.output) ? aliased(rpc.output, parts) : undefined;
}

/** A message's response schema with its aliased fields (and those of the messages below it) added and its omitted ones left out. */
function aliased(desc: DescMessage, parts: CompatSchemaParts): OpenApiObject {
  if (!hasAliases(desc)) return parts.message(desc);
  const omits = desc.fields.some((f) => getOption(f, compat_omit));
  return parts.component(`${desc.name}FoneDynamics`, `${desc.typeName}#compat`, () => {
    const properties: Record<string, OpenApiObject> = {};
    for (const f of desc.fields) {
      const alias = getOption(f, compat_alias);
      if (alias !== "") properties[alias] = { ...parts.field(f), description: `The same value as ${f.jsonName}.` };
      if (f.message && hasAliases(f.message)) {
        const schema = aliased(f.message, parts);
        properties[f.jsonName] = f.fieldKind === "list" ? { type: "array", items: schema } : schema;
      }
    }
    const base = omits ? parts.object(desc, (f) => !getOption(f, compat_omit)) : parts.message(desc);
    return { allOf: [base, { type: "object", properties }] };
  });
}

function hasAliases(desc: DescMessage, seen = new Set<DescMessage>()): boolean {
  if (seen.has(desc)) return false;
  seen.add(desc);
  return desc.fields.some((f) => getOption(f, compat_alias) !== "" || getOption(f, compat_omit) || (f.message !== undefined && hasAliases(f.message, seen)));
}
