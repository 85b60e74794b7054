/**
 * OpenAPI 3.1 description of the REST API, derived at start-up from the same descriptors the
 * transcoder serves: routes from `restRoutes`, parameters and bodies as the transcoder reads
 * them, schemas from the message descriptors in their JSON form (json_name keys, 64-bit
 * integers as numbers, and in requests also as decimal strings; enums by name). Nothing here is written per endpoint except what the
 * descriptors cannot say (OPERATION_NOTES: the spec's operation names, the Idempotency-Key header).
 */
import { STATUS_CODES } from "node:http";
import type { DescService } from "@bufbuild/protobuf";
import { isOperatorService } from "../accounts/auth.js";
import { ERRORS, type ErrorCode } from "../common/errors.js";
import { fieldDescription, SchemaBuilder } from "./openapi-schemas.js";
import type { OpenApiObject } from "./openapi-compat.js";
import { queryFields, restRoutes, type RestRoute } from "../rest/rest-routes.js";
import { CSV_MEDIA_TYPE, csvWriter } from "../rest/rest-csv.js";

export type { OpenApiObject } from "./openapi-compat.js";

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
const COMPAT_NOTE =
  "The shape depends on the account's RestCompatibility: None (the default) or FoneDynamics, the shapes Fone Dynamics' SDKs read (docs/fone-dynamics.md).";
const BASIC_AUTH = "accountBasic";
const BEARER_AUTH = "operatorBearer";

/** The HTTP statuses an operation documents one by one (which ones depends on the route); the rest share `default`. */
const DOCUMENTED_STATUSES = ["400", "401", "404", "413", "415", "429", "503"] as const;
type ErrorStatus = (typeof DOCUMENTED_STATUSES)[number] | "default";

/** What a status adds to the list of its codes. */
const STATUS_NOTES: Partial<Record<ErrorStatus, string>> = {
  "400": "`Errors` has one entry per field problem.",
};

/**
 * The documented error responses, from the error table (src/common/errors.ts): per status, its
 * component name, the ErrorCodes that answer with it and when, and an example body.
 */
function errorResponses(): Record<ErrorStatus, { name: string; description: string; example: object }> {
  const byStatus = new Map<string, ErrorCode[]>();
  for (const code of Object.keys(ERRORS) as ErrorCode[]) {
    const status = String(ERRORS[code].http);
    const key = (DOCUMENTED_STATUSES as readonly string[]).includes(status) ? status : "default";
    byStatus.set(key, [...(byStatus.get(key) ?? []), code]);
  }
  const out = {} as Record<ErrorStatus, { name: string; description: string; example: object }>;
  for (const status of [...DOCUMENTED_STATUSES, "default"] as const) {
    const codes = byStatus.get(status) ?? [];
    // The table's words, without their links into docs/.
    const when = (c: ErrorCode) => ERRORS[c].when.replace(/\[([^\]]+)\]\([^)]*\)/g, "$1");
    const list = codes.map((c) => `\`${c}\`${status === "default" ? ` (${ERRORS[c].http})` : ""}: ${when(c)}.`).join(" ");
    const shown = codes.find((c) => "example" in ERRORS[c]) ?? codes[0];
    const spec: { when: string; example?: string } = ERRORS[shown];
    out[status] = {
      name: status === "default" ? "Error" : STATUS_CODES[Number(status)]!.replaceAll(" ", ""),
      description: [status === "default" ? "Any other error, in the same body." : "", list, STATUS_NOTES[status] ?? ""].filter(Boolean).join(" "),
      example: { ErrorCode: shown, Message: spec.example ?? `${spec.when[0].toUpperCase()}${spec.when.slice(1)}.`, Errors: [] },
    };
  }
  // A field problem shows the Errors array filled in.
  const field = ERRORS.InvalidSchedule.example;
  out["400"].example = { ErrorCode: "InvalidSchedule", Message: field, Errors: [{ FieldName: "Schedule", ErrorCode: "InvalidSchedule", Message: field }] };
  return out;
}

/** Builds the OpenAPI 3.1 document of every REST route the transcoder serves for these services. */
export function buildOpenApi(services: DescService[], opts: OpenApiOptions): OpenApiDocument {
  const routes = restRoutes(services);
  const comments = opts.comments ?? new Map<string, string>();
  const schemas = new SchemaBuilder(routes, comments);
  const errorSchema = schemas.errorBody();
  const errorResponse = errorResponses();

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

    // The account's RestCompatibility picks the shape; both are derived by the writer's own rule.
    const compat = route.responseBody === "" ? schemas.compatResponse(route.rpc) : undefined;
    operation.responses["200"] = {
      description: compat ? `OK. ${COMPAT_NOTE}` : "OK",
      content: {
        [JSON_MEDIA_TYPE]: {
          schema: compat
            ? {
                anyOf: [
                  { title: "RestCompatibility None", ...schemas.response(route) },
                  { title: "RestCompatibility FoneDynamics", ...compat },
                ],
              }
            : schemas.response(route),
        },
        // A table's rows as CSV, for `Accept: text/csv` (src/rest/rest-csv.ts).
        ...(csvWriter(route.rpc) ? { [CSV_MEDIA_TYPE]: { schema: { type: "string", description: "A header line, then one line per row (RFC 4180)." } } } : {}),
      },
    };
    const errors: ErrorStatus[] = ["400", "401"];
    if (route.pathFields.length > 0) errors.push("404");
    if (route.body !== "") errors.push("413", "415"); // a body is read, even where no field is left for it
    errors.push("429", "503", "default"); // any call may meet a rate limit or a dead dependency (docs/errors.md#errors)
    for (const status of errors) operation.responses[status] = { $ref: `#/components/responses/${errorResponse[status].name}` };

    (paths[path] ??= {})[route.method.toLowerCase()] = operation;
  }

  const responses: Record<string, OpenApiObject> = {};
  for (const [status, r] of Object.entries(errorResponse)) {
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

function describe(text: string | undefined): { description?: string } {
  return text ? { description: text } : {};
}
