/**
 * OpenAPI 3.1 description of the REST API, derived at start-up from the same descriptors the
 * transcoder serves: routes from `restRoutes`, parameters and bodies as the transcoder reads
 * them, schemas from the message descriptors in their JSON form (json_name keys, 64-bit
 * integers as numbers, and in requests also as decimal strings; enums by name). Nothing here is written per endpoint except what the
 * descriptors cannot say (OPERATION_NOTES: the spec's operation names, the Idempotency-Key header).
 */
import { ScalarType, type DescEnum, type DescField, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { ResponseStatusSchema } from "../../gen/switchboard/v2/common_pb.js";
import { isOperatorService } from "../accounts/auth.js";
import { DECIMAL_INTEGER } from "./json-integers.js";
import { is64 } from "./proto-json.js";
import { queryFields, restRoutes, type RestRoute } from "./rest-routes.js";

/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1) or any other OpenAPI object. */
export type OpenApiObject = { [key: string]: unknown };

/** The parts of the document tests and callers look into; the rest stays loosely typed. */
export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description?: string };
  servers: { url: string; description?: string }[];
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: {
    schemas: Record<string, OpenApiObject>;
    responses: Record<string, OpenApiObject>;
    securitySchemes: Record<string, OpenApiObject>;
  };
}

/** One operation of the document. */
export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security: Record<string, string[]>[];
  parameters?: OpenApiParameter[];
  requestBody?: { required: boolean; content: Record<string, { schema: OpenApiObject }> };
  responses: Record<string, OpenApiObject>;
}

/** A path, query or header parameter. */
export interface OpenApiParameter {
  name: string;
  in: "path" | "query" | "header";
  required: boolean;
  description?: string;
  schema: OpenApiObject;
}

/** What buildOpenApi needs besides the services. */
export interface OpenApiOptions {
  version: string;
  title?: string;
  description?: string;
  /** Default: the same origin the document is served from. */
  servers?: { url: string; description?: string }[];
  /**
   * Leading comments of the proto declarations, by full name (`pkg.Message`, `pkg.Message.field`,
   * `pkg.Service`, `pkg.Service.Method`); used as descriptions. Optional: the descriptors
   * protoc-gen-es embeds carry no comments.
   */
  comments?: ReadonlyMap<string, string>;
}

/**
 * What the descriptors cannot say: the names the product spec gives its operations, and the
 * headers a method reads besides its message. Keyed by the method's full name.
 */
const IDEMPOTENCY_KEY: OpenApiParameter = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "1 to 255 characters. The same key with the same request on the same account within 24 hours " +
    "returns the first response (a batch's with every item) and stores nothing; a repeat sent while " +
    "the first is in flight waits for it. The same key with a different request is 422 IdempotencyKeyReused.",
  schema: { type: "string", minLength: 1, maxLength: 255 },
};

const OPERATION_NOTES: Record<string, { summary?: string; headers?: OpenApiParameter[] }> = {
  "switchboard.v2.MessagingService.SendMessage": { summary: "Send SMS", headers: [IDEMPOTENCY_KEY] },
  "switchboard.v2.MessagingService.SendBatch": { headers: [IDEMPOTENCY_KEY] },
  "switchboard.v2.AddressService.CreateAddress": { summary: "Add an address" },
  "switchboard.v2.AddressService.DeleteAddress": { summary: "Remove an address" },
  "switchboard.v2.AddressService.ListAddresses": { summary: "Get Addresses" },
  "switchboard.v2.NumberService.ConfigureNumber": { summary: "Configure Numbers" },
};

const JSON_MEDIA_TYPE = "application/json";
const BASIC_AUTH = "accountBasic";
const BEARER_AUTH = "operatorBearer";

/** The documented error responses, by HTTP status: component name, description, example code. */
const ERROR_RESPONSES = {
  "400": {
    name: "BadRequest",
    description: "Invalid input or a refused business rule. `Errors` has one entry per field problem. A body that is not JSON, or not valid UTF-8, is `MalformedRequest` (the message names the byte offset).",
    example: {
      ErrorCode: "InvalidSchedule",
      Message: "Schedule is more than 14 days in the future.",
      Errors: [{ FieldName: "Schedule", ErrorCode: "InvalidSchedule", Message: "Schedule is more than 14 days in the future." }],
    },
  },
  "401": {
    name: "Unauthorized",
    description: "Missing or wrong credentials.",
    example: { ErrorCode: "Unauthorized", Message: "The AccountSid or token is wrong.", Errors: [] },
  },
  "404": {
    name: "NotFound",
    description: "A Sid in the path that is malformed, unknown, deleted or another account's.",
    example: { ErrorCode: "NotFound", Message: "Message MG0123456789ABCDEFGHIJKLMNOPQRST was not found.", Errors: [] },
  },
  "413": {
    name: "PayloadTooLarge",
    description: "The request body is over the limit (BODY_LIMIT_BYTES, 1 MiB by default).",
    example: { ErrorCode: "PayloadTooLarge", Message: "The request body is larger than the limit of 1048576 bytes.", Errors: [] },
  },
  "415": {
    name: "UnsupportedMediaType",
    description: "A request body that is not sent as `application/json`, or whose Content-Type names a charset other than UTF-8.",
    example: {
      ErrorCode: "UnsupportedMediaType",
      Message: "The request body must be JSON, sent with Content-Type: application/json.",
      Errors: [],
    },
  },
  "429": {
    name: "RateLimited",
    description: "Too many requests.",
    example: { ErrorCode: "RateLimited", Message: "Too many requests.", Errors: [] },
  },
  "503": {
    name: "ServiceUnavailable",
    description: "A dependency (the database) is down; retry later.",
    example: { ErrorCode: "ServiceUnavailable", Message: "The service is temporarily unavailable.", Errors: [] },
  },
  default: {
    name: "Error",
    description: "Any other error (405, 409, 422, 500) in the same body.",
    example: { ErrorCode: "InternalError", Message: "An internal error occurred.", Errors: [] },
  },
} as const;

type ErrorStatus = keyof typeof ERROR_RESPONSES;

/** Builds the OpenAPI 3.1 document of every REST route the transcoder serves for these services. */
export function buildOpenApi(services: DescService[], opts: OpenApiOptions): OpenApiDocument {
  const routes = restRoutes(services);
  const comments = opts.comments ?? new Map<string, string>();
  const schemas = new SchemaBuilder(routes, comments);
  const errorSchema = schemas.errorBody();

  const paths: OpenApiDocument["paths"] = {};
  const operationIds = operationIdsOf(routes);
  const usedTags = new Map<string, DescService>();
  for (const [i, route] of routes.entries()) {
    const path = openApiPath(route);
    const tag = tagName(route.service);
    usedTags.set(tag, route.service);
    const method = route.rpc;
    const notes = OPERATION_NOTES[`${route.service.typeName}.${method.name}`] ?? {};

    const parameters: OpenApiParameter[] = [];
    for (const field of route.pathFields) {
      parameters.push({
        name: field.jsonName,
        in: "path",
        required: true,
        ...describe(fieldDescription(field, comments)),
        schema: schemas.field(field, "request", true, "text"),
      });
    }
    for (const field of queryFields(route)) {
      parameters.push({
        name: field.jsonName,
        in: "query",
        required: false,
        ...describe(fieldDescription(field, comments)),
        schema: schemas.field(field, "request", true, "text"),
      });
    }
    parameters.push(...(notes.headers ?? []));

    const operation: OpenApiOperation = {
      operationId: operationIds[i],
      summary: notes.summary ?? words(method.name),
      ...describe(comments.get(`${route.service.typeName}.${method.name}`)),
      tags: [tag],
      security: [{ [isOperatorService(route.service) ? BEARER_AUTH : BASIC_AUTH]: [] }],
      ...(parameters.length > 0 ? { parameters } : {}),
      responses: {},
    };

    // An empty body is read as {}: no body is ever required (missing fields are reported by name).
    const body = schemas.body(route);
    if (body) operation.requestBody = { required: false, content: { [JSON_MEDIA_TYPE]: { schema: body } } };

    operation.responses["200"] = {
      description: "OK",
      content: { [JSON_MEDIA_TYPE]: { schema: schemas.response(route) } },
    };
    const errors: ErrorStatus[] = ["400", "401"];
    if (route.pathFields.length > 0) errors.push("404");
    if (route.body !== "") errors.push("413", "415"); // a body is read, even where no field is left for it
    errors.push("429", "503", "default"); // any call may meet a rate limit or a dead dependency (docs/errors.md#errors)
    for (const status of errors) operation.responses[status] = { $ref: `#/components/responses/${ERROR_RESPONSES[status].name}` };

    (paths[path] ??= {})[route.method.toLowerCase()] = operation;
  }

  const responses: Record<string, OpenApiObject> = {};
  for (const [status, r] of Object.entries(ERROR_RESPONSES)) {
    responses[r.name] = {
      description: r.description,
      ...(status === "401"
        ? {
            headers: {
              "WWW-Authenticate": {
                description: '`Basic realm="switchboard"` on /v2, `Bearer realm="switchboard-admin"` on /admin/v1.',
                schema: { type: "string" },
              },
            },
          }
        : {}),
      content: { [JSON_MEDIA_TYPE]: { schema: errorSchema, example: { ResponseStatus: r.example } } },
    };
  }

  return {
    openapi: "3.1.0",
    info: {
      title: opts.title ?? "Switchboard API",
      version: opts.version,
      ...(opts.description ? { description: opts.description } : {}),
    },
    servers: opts.servers ?? [{ url: "/", description: "This server" }],
    tags: [...usedTags].map(([name, service]) => ({
      name,
      description: comments.get(service.typeName) ?? `The REST bindings of ${service.typeName}.`,
    })),
    paths,
    components: {
      schemas: schemas.components(),
      responses,
      securitySchemes: {
        [BASIC_AUTH]: {
          type: "http",
          scheme: "basic",
          description: "/v2: user = AccountSid, password = the account's token.",
        },
        [BEARER_AUTH]: {
          type: "http",
          scheme: "bearer",
          description: "/admin/v1: the operator token (SWITCHBOARD_ADMIN_TOKEN).",
        },
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Names

/** `/v2/Properties/{property_sid}/Messages` → `/v2/Properties/{PropertySid}/Messages`: params by JSON name. */
function openApiPath(route: RestRoute): string {
  const byName = new Map(route.pathFields.map((f) => [f.name, f]));
  return route.template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)(?:=\*)?\}/g, (_, name: string) => `{${byName.get(name)!.jsonName}}`);
}

/**
 * The method name, unless two services share it (then Service_Method); extra bindings get _2,
 * _3… A /v2 method keeps its bare name when only operator methods share it, so adding an
 * operator method never renames a public operation.
 */
function operationIdsOf(routes: RestRoute[]): string[] {
  const sharing = new Map<string, Set<DescService>>();
  for (const r of routes) {
    const services = sharing.get(r.rpc.name) ?? new Set<DescService>();
    services.add(r.service);
    sharing.set(r.rpc.name, services);
  }
  const seen = new Map<string, number>();
  return routes.map((r) => {
    const services = [...sharing.get(r.rpc.name)!];
    const publicOnes = services.filter((s) => !isOperatorService(s));
    const bare = services.length === 1 || (publicOnes.length === 1 && publicOnes[0] === r.service);
    const base = bare ? r.rpc.name : `${r.service.name}_${r.rpc.name}`;
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return n === 1 ? base : `${base}_${n}`;
  });
}

/** `MessagingService` → `Messaging`. */
function tagName(service: DescService): string {
  return service.name.replace(/Service$/, "") || service.name;
}

/** `ListHandsetMessages` → `List handset messages`. */
function words(name: string): string {
  const parts = name.split(/(?<=[a-z0-9])(?=[A-Z])/);
  return parts.map((p, i) => (i === 0 ? p : p.toLowerCase())).join(" ");
}

function fieldKey(field: DescField): string {
  return `${field.parent.typeName}.${field.name}`;
}

function describe(text: string | undefined): { description?: string } {
  return text ? { description: text } : {};
}

// ---------------------------------------------------------------------------------------------
// Schemas

type Direction = "request" | "response";

/**
 * Collects the component schemas the operations refer to. A message gets one schema per
 * direction it is used in: responses list every field that is always present (implicit
 * presence: `alwaysEmitImplicit`), requests list none as required (missing means default).
 */
class SchemaBuilder {
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
      return this.field(route.rpc.input.fields.find((f) => f.name === route.body)!, "request", true);
    }
    if (route.pathFields.length === 0) return this.message(route.rpc.input, "request");
    const bound = new Set(route.pathFields.map((f) => f.name));
    if (route.rpc.input.fields.every((f) => bound.has(f.name))) return undefined;
    const name = this.claim(`${route.rpc.name}Body`, `${route.service.typeName}.${route.rpc.name}#body`);
    if (!this.out.has(name)) {
      this.out.set(name, {}); // reserved before the fields are built (recursive types)
      this.out.set(name, this.object(route.rpc.input, "request", (f) => !bound.has(f.name)));
    }
    return { $ref: ref(name) };
  }

  /** The 200 schema of a route: the response message, or the response_body field. */
  response(route: RestRoute): OpenApiObject {
    if (route.responseBody === "") return this.message(route.rpc.output, "response");
    return this.field(route.rpc.output.fields.find((f) => f.name === route.responseBody)!, "response", true);
  }

  /** `{"ResponseStatus": {...}}`, the body of every error. */
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
          field.listKind === "scalar"
            ? scalarSchema(field.scalar)
            : field.listKind === "enum"
              ? this.enumRef(field.enum)
              : this.message(field.message, dir);
        schema = { type: "array", items };
        break;
      }
      case "map": {
        const values =
          field.mapKind === "scalar"
            ? scalarSchema(field.scalar)
            : field.mapKind === "enum"
              ? this.enumRef(field.enum)
              : this.message(field.message, dir);
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
      this.out.set(name, this.object(desc, dir, () => true));
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
 * integer of this API is a time in Unix seconds (docs/api.md#conventions), as rest.ts also assumes.
 */
function fieldDescription(field: DescField, comments: ReadonlyMap<string, string>): string | undefined {
  const text = comments.get(fieldKey(field));
  if (text) return text;
  return field.scalar !== undefined && is64(field.scalar) ? "Unix seconds (UTC)." : undefined;
}

/**
 * A scalar in request JSON: what the answers carry, and for a 64-bit integer also a string of
 * decimal digits (the one integer rule, src/transport/json-integers.ts).
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
