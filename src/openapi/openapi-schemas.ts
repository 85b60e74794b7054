/**
 * The JSON Schemas of the OpenAPI document, from the message descriptors in the JSON form the
 * REST transcoder reads and writes: json_name keys, 64-bit integers as numbers, enums by name.
 */
import { ScalarType, type DescEnum, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { ResponseStatusSchema } from "../../gen/switchboard/v2/common_pb.js";
import { isOperatorService } from "../accounts/auth.js";
import { DECIMAL_INTEGER } from "../rest/json-integers.js";
import { compatResponseSchema, type OpenApiObject } from "./openapi-compat.js";
import { is64 } from "../rest/proto-json.js";
import type { RestRoute } from "../rest/rest-routes.js";

function fieldKey(field: DescField): string {
  return `${field.parent.typeName}.${field.name}`;
}

type Direction = "request" | "response";

/**
 * Collects the component schemas the operations refer to. A message gets one schema per
 * direction it is used in: responses list every field that is always present (implicit
 * presence: `alwaysEmitImplicit`), requests list none as required (missing means default).
 */
export class SchemaBuilder {
  private readonly out = new Map<string, OpenApiObject>();
  /** Component name → the type it was given to, so two types never share a name. */
  private readonly owners = new Map<string, string>();
  /** Short name → the full names of the reachable types that have it. */
  private readonly shortNames = new Map<string, Set<string>>();
  /** Full message name → the directions it is used in. */
  private readonly directions = new Map<string, Set<Direction>>();
  /** Packages of the operator services, and the reachable types declared in them. */
  private readonly operatorPackages: Set<string>;
  private readonly operatorTypes = new Set<string>();

  constructor(
    routes: RestRoute[],
    private readonly comments: ReadonlyMap<string, string>,
  ) {
    this.operatorPackages = new Set(routes.filter((r) => isOperatorService(r.service)).map((r) => r.service.file.proto.package));
    // Names depend on every type in the document (short-name clashes, both directions), so
    // walk everything the operations reach before naming anything.
    const visit = (desc: DescMessage, dir: Direction) => {
      if (wellKnownSchema(desc.typeName)) return;
      const dirs = this.directions.get(desc.typeName) ?? new Set<Direction>();
      if (dirs.has(dir)) return;
      dirs.add(dir);
      this.directions.set(desc.typeName, dirs);
      this.noteShortName(desc);
      for (const f of desc.fields) {
        if (f.message) visit(f.message, dir);
        if (f.enum) this.noteShortName(f.enum);
      }
    };
    for (const route of routes) {
      visit(route.rpc.input, "request");
      visit(route.rpc.output, "response");
    }
    visit(ResponseStatusSchema, "response");
  }

  /**
   * The body schema of a route: the request message without the path fields (the path wins),
   * or the body field; undefined when there is no body or no field is left for it.
   */
  body(route: RestRoute): OpenApiObject | undefined {
    if (route.body === "") return undefined;
    if (route.body !== "*") {
      return this.field(
        route.rpc.input.fields.find((f) => f.name === route.body)!,
        "request",
        true,
      );
    }
    if (route.pathFields.length === 0) return this.message(route.rpc.input, "request");
    const bound = new Set(route.pathFields.map((f) => f.name));
    if (route.rpc.input.fields.every((f) => bound.has(f.name))) return undefined;
    const name = this.claim(`${route.rpc.name}Body`, `${route.service.typeName}.${route.rpc.name}#body`);
    if (!this.out.has(name)) {
      this.out.set(name, {}); // reserved before the fields are built (recursive types)
      this.out.set(
        name,
        this.object(route.rpc.input, "request", (f) => !bound.has(f.name)),
      );
    }
    return { $ref: ref(name) };
  }

  /** The 200 schema of a route: the response message, or the response_body field. */
  response(route: RestRoute): OpenApiObject {
    if (route.responseBody === "") return this.message(route.rpc.output, "response");
    return this.field(
      route.rpc.output.fields.find((f) => f.name === route.responseBody)!,
      "response",
      true,
    );
  }

  /** `{"ResponseStatus": {...}}`, the body of every error. */
  /** The 200 body a RestCompatibility FoneDynamics account gets (src/openapi/openapi-compat.ts); undefined when the same. */
  compatResponse(rpc: DescMethod): OpenApiObject | undefined {
    return compatResponseSchema(rpc, {
      message: (d) => this.message(d, "response"),
      object: (d, include) => this.object(d, "response", include),
      field: (f) => this.field(f, "response"),
      component: (name, owner, build) => {
        const claimed = this.claim(name, owner);
        if (!this.out.has(claimed)) {
          this.out.set(claimed, {}); // reserved before it is built (recursive types)
          this.out.set(claimed, build());
        }
        return { $ref: ref(claimed) };
      },
    });
  }

  errorBody(): OpenApiObject {
    const name = this.claim("Error", "#error");
    if (!this.out.has(name)) {
      this.out.set(name, {
        type: "object",
        description: "The body of every error response.",
        required: ["ResponseStatus"],
        properties: { ResponseStatus: this.message(ResponseStatusSchema, "response") },
      });
    }
    return { $ref: ref(name) };
  }

  components(): Record<string, OpenApiObject> {
    return Object.fromEntries([...this.out].sort(([a], [b]) => a.localeCompare(b)));
  }

  /**
   * The schema of one field's JSON value; `bare` leaves out its description (for a whole body).
   * `wire` "text" is a path or query value, where any integer is written as digits anyway.
   */
  field(field: DescField, dir: Direction, bare = false, wire: "json" | "text" = "json"): OpenApiObject {
    const scalarSchema = dir === "request" && wire === "json" ? requestScalarSchema : responseScalarSchema;
    let schema: OpenApiObject;
    switch (field.fieldKind) {
      case "scalar":
        schema = scalarSchema(field.scalar);
        break;
      case "enum":
        schema = this.enumRef(field.enum);
        break;
      case "message":
        schema = this.message(field.message, dir);
        break;
      case "list": {
        const items =
          field.listKind === "scalar" ? scalarSchema(field.scalar) : field.listKind === "enum" ? this.enumRef(field.enum) : this.message(field.message, dir);
        schema = { type: "array", items };
        break;
      }
      case "map": {
        const values =
          field.mapKind === "scalar" ? scalarSchema(field.scalar) : field.mapKind === "enum" ? this.enumRef(field.enum) : this.message(field.message, dir);
        schema = { type: "object", additionalProperties: values };
        break;
      }
    }
    if (bare) return schema;
    const text = fieldDescription(field, this.comments);
    return text ? { ...schema, description: text } : schema;
  }

  /** A $ref to the message's component (built on first use), or the JSON form of a well-known type. */
  private message(desc: DescMessage, dir: Direction): OpenApiObject {
    const wkt = wellKnownSchema(desc.typeName);
    if (wkt) return wkt;
    const name = this.claim(this.messageName(desc, dir), `${desc.typeName}#${dir}`);
    if (!this.out.has(name)) {
      this.out.set(name, {}); // reserved before the fields are built (recursive types)
      this.out.set(
        name,
        this.object(desc, dir, () => true),
      );
    }
    return { $ref: ref(name) };
  }

  private object(desc: DescMessage, dir: Direction, include: (f: DescField) => boolean): OpenApiObject {
    const properties: Record<string, OpenApiObject> = {};
    const required: string[] = [];
    for (const f of desc.fields) {
      if (!include(f)) continue;
      properties[f.jsonName] = this.field(f, dir);
      if (dir === "response" && alwaysEmitted(f)) required.push(f.jsonName);
    }
    const text = this.comments.get(desc.typeName);
    return {
      type: "object",
      ...(text ? { description: text } : {}),
      ...(required.length > 0 ? { required } : {}),
      properties,
    };
  }

  private enumRef(desc: DescEnum): OpenApiObject {
    const name = this.claim(this.shortName(desc.typeName, desc.name), desc.typeName);
    if (!this.out.has(name)) {
      const text = this.comments.get(desc.typeName);
      this.out.set(name, { type: "string", ...(text ? { description: text } : {}), enum: desc.values.map((v) => v.name) });
    }
    return { $ref: ref(name) };
  }

  /** A message's component name; `…Input` for the request form of a type that is also a response. */
  private messageName(desc: DescMessage, dir: Direction): string {
    const base = this.shortName(desc.typeName, desc.name);
    return dir === "request" && this.directions.get(desc.typeName)?.has("response") ? `${base}Input` : base;
  }

  /**
   * The short name, or the full name when two packages use the same short name. A /v2 type
   * keeps its short name when only operator types share it, so adding an operator type never
   * renames a public schema.
   */
  private shortName(typeName: string, name: string): string {
    const owners = [...(this.shortNames.get(name) ?? [])];
    if (owners.length <= 1) return name;
    const publicOnes = owners.filter((t) => !this.operatorTypes.has(t));
    return publicOnes.length === 1 && publicOnes[0] === typeName ? name : typeName;
  }

  private noteShortName(desc: DescMessage | DescEnum): void {
    const owners = this.shortNames.get(desc.name) ?? new Set<string>();
    owners.add(desc.typeName);
    this.shortNames.set(desc.name, owners);
    if (this.operatorPackages.has(desc.file.proto.package)) this.operatorTypes.add(desc.typeName);
  }

  /** Reserves a component name for one owner; a different owner asking for it is a bug in the naming. */
  private claim(name: string, owner: string): string {
    const current = this.owners.get(name);
    if (current !== undefined && current !== owner) {
      throw new Error(`OpenAPI component name ${name} is wanted by ${current} and by ${owner}`);
    }
    this.owners.set(name, owner);
    return name;
  }
}

function ref(name: string): string {
  return `#/components/schemas/${name}`;
}

/** True when the transcoder's response always has the field (toJson with alwaysEmitImplicit). */
function alwaysEmitted(field: DescField): boolean {
  if (field.fieldKind === "list" || field.fieldKind === "map") return true;
  if (field.fieldKind === "message" || field.oneof) return false;
  return field.presence === FeatureSet_FieldPresence.IMPLICIT;
}

/**
 * The field's proto comment; without one, for a 64-bit integer, what it is: every 64-bit
 * integer of this API is a time in Unix seconds (docs/api.md#conventions), as the REST transcoder also assumes.
 */
export function fieldDescription(field: DescField, comments: ReadonlyMap<string, string>): string | undefined {
  const text = comments.get(fieldKey(field));
  if (text) return text;
  return field.scalar !== undefined && is64(field.scalar) ? "Unix seconds (UTC)." : undefined;
}

/**
 * A scalar in request JSON: what the answers carry, and for a 64-bit integer also a string of
 * decimal digits (the one integer rule, src/rest/json-integers.ts).
 */
function requestScalarSchema(scalar: ScalarType): OpenApiObject {
  const schema = responseScalarSchema(scalar);
  if (!is64(scalar)) return schema;
  return { oneOf: [schema, { type: "string", pattern: DECIMAL_INTEGER.source, description: "The same integer as a string of decimal digits." }] };
}

/** The JSON form the transcoder writes: 64-bit integers as numbers (not proto JSON strings). */
function responseScalarSchema(scalar: ScalarType): OpenApiObject {
  switch (scalar) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.DOUBLE:
      return { type: "number", format: "double" };
    case ScalarType.FLOAT:
      return { type: "number", format: "float" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", minimum: 0, maximum: 4294967295 };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: "integer", minimum: 0 };
    default:
      return { type: "integer", format: "int64" };
  }
}

/** Proto JSON of the well-known types (none is used by the API today; kept for completeness). */
function wellKnownSchema(typeName: string): OpenApiObject | undefined {
  switch (typeName) {
    case "google.protobuf.Timestamp":
      return { type: "string", format: "date-time" };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$" };
    case "google.protobuf.FieldMask":
      return { type: "string" };
    case "google.protobuf.Empty":
      return { type: "object" };
    case "google.protobuf.Struct":
      return { type: "object", additionalProperties: true };
    case "google.protobuf.ListValue":
      return { type: "array" };
    case "google.protobuf.Value":
      return {};
    case "google.protobuf.Any":
      return { type: "object", required: ["@type"], properties: { "@type": { type: "string" } } };
    case "google.protobuf.StringValue":
      return { type: "string" };
    case "google.protobuf.BytesValue":
      return { type: "string", contentEncoding: "base64" };
    case "google.protobuf.BoolValue":
      return { type: "boolean" };
    case "google.protobuf.DoubleValue":
    case "google.protobuf.FloatValue":
      return { type: "number" };
    case "google.protobuf.Int32Value":
    case "google.protobuf.UInt32Value":
    case "google.protobuf.Int64Value":
    case "google.protobuf.UInt64Value":
      return { type: "integer" };
    default:
      return typeName.startsWith("google.protobuf.") ? {} : undefined;
  }
}
