/**
 * REST transcoder: serves every method that carries a `google.api.http` option as a JSON
 * REST endpoint, calling the same service implementation the Connect router serves.
 *
 * Everything comes from the descriptors: the path template gives the route and the path
 * fields, the remaining top-level scalar fields come from the query string, and `body: "*"`
 * fills the request message from a JSON object. Field tables and response fix-ups are
 * compiled once at registration; a request is a few Map lookups, one `create` and one
 * `toJson`. No business logic lives here.
 */
import {
  create,
  fromJson,
  getOption,
  isMessage,
  ScalarType,
  toJson,
  type DescEnum,
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescMethodUnary,
  type DescService,
  type JsonObject,
  type JsonValue,
} from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import {
  Code,
  ConnectError,
  createContextValues,
  type ContextValues,
  createHandlerContext,
  type HandlerContext,
  type ServiceImpl,
} from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { http } from "../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../gen/google/api/http_pb.js";
import {
  apiError,
  errorBody,
  fieldErrors,
  isClientError,
  toConnectError,
  type FieldProblem,
} from "../common/errors.js";
import { CALL_COMPLETE } from "../common/context.js";
import { jsonBodyText } from "./body-charset.js";
import { DECIMAL_INTEGER, is64, readInteger } from "./json-integers.js";

// ---------------------------------------------------------------------------------------------
// Public API

export interface RestService {
  service: DescService;
  /** The same implementation object the Connect router serves. */
  impl: Partial<ServiceImpl<DescService>>;
}

export interface RestOptions {
  services: RestService[];
  /**
   * Called once per request before the method, with the handler context: authentication etc.
   * sets context values here. Throws ConnectError to refuse.
   */
  edge: (ctx: HandlerContext) => Promise<void> | void;
  /** Largest accepted request body in bytes; default 1 MiB. */
  bodyLimit?: number;
  /** The handler context's values for a request (as connect-fastify's option); default empty. */
  contextValues?: (request: FastifyRequest) => ContextValues;
}

export type HttpVerb = "GET" | "PUT" | "POST" | "DELETE" | "PATCH";

/** One REST binding found in the descriptors. */
export interface RestRoute {
  /** HTTP method. */
  method: HttpVerb;
  /** Fastify route path, e.g. `/v2/Properties/:property_sid/Messages`. */
  path: string;
  /** The `google.api.http` path template, e.g. `/v2/Properties/{property_sid}/Messages`. */
  template: string;
  /** `""` (no body), `"*"` (the whole request message) or the proto name of the body field. */
  body: string;
  /** `""` (the whole response message) or the proto name of the response field to return. */
  responseBody: string;
  service: DescService;
  /** The RPC method descriptor this route calls. */
  rpc: DescMethodUnary;
  /** Request fields bound by the path, in template order; the Fastify param is `field.name`. */
  pathFields: DescField[];
}

/** Helper with full type checking of the implementation against its service. */
export function restService<T extends DescService>(service: T, impl: Partial<ServiceImpl<T>>): RestService {
  return { service, impl: impl as Partial<ServiceImpl<DescService>> };
}

const DEFAULT_BODY_LIMIT = 1024 * 1024;
const JSON_CONTENT_TYPE = "application/json; charset=utf-8";
/** Methods answered by the 404/405 routes (the REST routes themselves use the HttpVerb subset). */
const ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] as const;

/** The REST routes found in the descriptors (unary methods with a google.api.http option). */
export function restRoutes(services: DescService[]): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const service of services) {
    for (const method of service.methods) {
      if (method.methodKind !== "unary") continue; // streaming methods are not transcoded
      const rpc = method as DescMethodUnary;
      const rule = getOption(rpc, http);
      for (const r of [rule, ...rule.additionalBindings]) {
        const binding = ruleBinding(r);
        if (binding === undefined) continue;
        const { path, pathFields } = parseTemplate(binding.template, rpc);
        if (r.body !== "" && r.body !== "*" && !rpc.input.fields.some((f) => f.name === r.body)) {
          throw new Error(`${rpc.parent.typeName}.${rpc.name}: body field "${r.body}" is not a request field`);
        }
        if (r.responseBody !== "" && !rpc.output.fields.some((f) => f.name === r.responseBody)) {
          throw new Error(
            `${rpc.parent.typeName}.${rpc.name}: response_body field "${r.responseBody}" is not a response field`,
          );
        }
        routes.push({
          method: binding.method,
          path,
          template: binding.template,
          body: r.body,
          responseBody: r.responseBody,
          service,
          rpc,
          pathFields,
        });
      }
    }
  }
  return routes;
}

/**
 * The request fields a route reads from the query string (by json_name or proto name).
 * google.api.http: with body "*" there are none; otherwise every top-level scalar or enum field,
 * single or repeated, that the path and the body do not bind.
 */
export function queryFields(route: RestRoute): DescField[] {
  if (route.body === "*") return [];
  const bound = new Set(route.pathFields.map((f) => f.name));
  if (route.body !== "") bound.add(route.body);
  return route.rpc.input.fields.filter(
    (f) =>
      !bound.has(f.name) &&
      (f.fieldKind === "scalar" || f.fieldKind === "enum" || (f.fieldKind === "list" && f.listKind !== "message")),
  );
}

/** A Fastify plugin (register it with app.register) that serves every method that has a google.api.http option. */
export async function restPlugin(app: FastifyInstance, opts: RestOptions): Promise<void> {
  const bodyLimit = opts.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const impls = new Map<DescService, Partial<ServiceImpl<DescService>>>();
  for (const s of opts.services) impls.set(s.service, s.impl);
  const routes = restRoutes(opts.services.map((s) => s.service));
  const values = opts.contextValues ?? (() => createContextValues());

  // This plugin is encapsulated (not wrapped in fastify-plugin): the parsers and the error
  // handler below apply to its routes only. Bodies are read as raw bytes whatever the
  // Content-Type; the handler decides between JSON, 415 and 400, so that an empty body is {}.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit }, (_req, body, done) => done(null, body));
  app.setErrorHandler((error, request, reply) => {
    sendError(request, reply, fromFastifyError(error, bodyLimit));
  });

  const allowedByPath = new Map<string, Set<string>>();
  for (const route of routes) {
    const impl = impls.get(route.service);
    const plan = compileRoute(route, impl);
    app.route({
      method: route.method,
      url: route.path,
      bodyLimit,
      handler: (request, reply) => serve(plan, opts.edge, values, request, reply),
    });
    let allowed = allowedByPath.get(route.path);
    if (!allowed) allowedByPath.set(route.path, (allowed = new Set()));
    allowed.add(route.method);
    if (route.method === "GET") allowed.add("HEAD"); // Fastify exposes HEAD for every GET route
  }

  // A known path with another method: 405 with Allow. Answered in onRequest, before any body is read.
  for (const [path, allowed] of allowedByPath) {
    const others = ALL_METHODS.filter((m) => !allowed.has(m));
    if (others.length === 0) continue;
    const allow = ALL_METHODS.filter((m) => allowed.has(m)).join(", ");
    app.route({
      method: others,
      url: path,
      onRequest: async (request, reply) => {
        const err = apiError(
          Code.Unimplemented,
          "MethodNotAllowed",
          `${request.method} is not allowed on this resource; allowed: ${allow}.`,
        );
        err.metadata.set("allow", allow);
        sendError(request, reply, err);
        return reply;
      },
      handler: async () => undefined, // never reached: onRequest has answered
    });
  }

  // Anything else under the API prefixes: 404 in the documented body. Static and parametric
  // routes of the app (Connect's, /healthz, other plugins' routes under these prefixes) take
  // precedence over these wildcards in the router, so nothing else is swallowed.
  for (const prefix of apiPrefixes(routes)) {
    app.route({
      method: [...ALL_METHODS],
      url: prefix,
      onRequest: notFoundHook,
      handler: async () => undefined,
    });
    app.route({
      method: [...ALL_METHODS],
      url: `${prefix}/*`,
      onRequest: notFoundHook,
      handler: async () => undefined,
    });
  }
}

async function notFoundHook(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  sendError(request, reply, pathNotFound(request));
  return reply;
}

/** Longest path echoed in a 404 message: long enough for any real route, short enough not to reflect a large URL. */
export const ECHOED_PATH_MAX = 200;

function pathNotFound(request: FastifyRequest): ConnectError {
  const full = request.url.split("?", 1)[0];
  const path = full.length > ECHOED_PATH_MAX ? `${full.slice(0, ECHOED_PATH_MAX)}…` : full;
  return apiError(Code.NotFound, "NotFound", `The requested resource ${path} was not found.`);
}

/** The app's not-found handler: any path no route serves is a 404 in the documented body. */
export function restNotFound(request: FastifyRequest, reply: FastifyReply): void {
  sendError(request, reply, pathNotFound(request));
}

/**
 * The `frameworkErrors` server option: Fastify refuses a path it cannot percent-decode
 * (e.g. `/v2/Messages/%zz`) before any route runs; like any other unknown path it is a 404
 * in the documented body.
 */
export function restFrameworkErrors(_error: Error, request: FastifyRequest, reply: FastifyReply): void {
  sendError(request, reply, pathNotFound(request));
}

// ---------------------------------------------------------------------------------------------
// Request handling

interface RoutePlan {
  route: RestRoute;
  service: DescService;
  rpc: DescMethodUnary;
  call: ((request: unknown, ctx: HandlerContext) => unknown) | undefined;
  /** How the body fills the request: not at all, the whole message, or one field. */
  bodyKind: "none" | "all" | "field";
  /** Reads the body object: the request message (body "*") or the message-typed body field. */
  bodyConverter: MessageConverter | undefined;
  bodyField: FieldReader | undefined;
  /** Query parameter name (json_name and proto name) → reader, for fields the path does not bind. */
  query: Map<string, FieldReader>;
  path: { param: string; reader: FieldReader }[];
  writeResponse: (response: unknown) => string;
}

function compileRoute(route: RestRoute, impl: Partial<ServiceImpl<DescService>> | undefined): RoutePlan {
  const { rpc } = route;
  const input = rpc.input;
  const fn = impl?.[rpc.localName] as unknown;
  const call =
    typeof fn === "function" ? (fn as (req: unknown, ctx: HandlerContext) => unknown).bind(impl) : undefined;

  let bodyKind: RoutePlan["bodyKind"] = "none";
  let bodyField: FieldReader | undefined;
  let bodyConverter: MessageConverter | undefined;
  if (route.body === "*") {
    bodyKind = "all";
    bodyConverter = messageConverter(input);
  } else if (route.body !== "") {
    bodyKind = "field";
    const field = input.fields.find((f) => f.name === route.body)!;
    bodyField = fieldReader(field);
    if (field.fieldKind === "message" && !isWellKnown(field.message)) bodyConverter = messageConverter(field.message);
  }

  const query = new Map<string, FieldReader>();
  for (const field of queryFields(route)) {
    const reader = queryReader(field)!;
    query.set(field.jsonName, reader);
    query.set(field.name, reader);
  }

  return {
    route,
    service: route.service,
    rpc,
    call,
    bodyKind,
    bodyConverter,
    bodyField,
    query,
    path: route.pathFields.map((f) => ({ param: f.name, reader: queryReader(f)! })),
    writeResponse: responseWriter(rpc.output, route.responseBody),
  };
}

async function serve(
  plan: RoutePlan,
  edge: RestOptions["edge"],
  values: (request: FastifyRequest) => ContextValues,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  // Abort the handler's signal when the client goes away (HTTP/2: the stream closes; HTTP/1.1:
  // the response closes — the request emits "close" as soon as its body has been read).
  const abort = new AbortController();
  const raw = request.raw;
  const closing: NodeJS.EventEmitter = "stream" in raw ? raw : reply.raw;
  const onClose = () => abort.abort(new ConnectError("the client closed the request", Code.Canceled));
  closing.once("close", onClose);

  const ctx = createHandlerContext({
    service: plan.service,
    method: plan.rpc,
    protocolName: "rest",
    requestMethod: request.method,
    url: `${request.protocol}://${request.host}${request.url}`,
    requestHeader: webHeaders(request.headers),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    contextValues: values(request),
    requestSignal: abort.signal,
    timeoutMs: undefined,
  });
  try {
    await edge(ctx);
    const input = readRequest(plan, request);
    if (!plan.call) {
      throw new ConnectError(`${plan.service.typeName}.${plan.rpc.name} is not implemented`, Code.Unimplemented);
    }
    const output = await plan.call(input, ctx);
    const body = plan.writeResponse(output);
    copyHeaders(ctx.responseHeader, reply);
    return reply.code(200).header("content-type", JSON_CONTENT_TYPE).send(body);
  } catch (reason) {
    sendError(request, reply, reason, ctx.responseHeader);
    return reply;
  } finally {
    closing.off("close", onClose);
    ctx.abort(CALL_COMPLETE); // as Connect does: the signal also fires when the call is complete
  }
}

/** Builds the request message from body, query and path (path wins), collecting all field problems. */
function readRequest(plan: RoutePlan, request: FastifyRequest): unknown {
  const problems: FieldProblem[] = [];
  let init: Record<string, unknown> = {};

  if (plan.bodyKind !== "none") {
    const json = readJsonBody(request);
    if (plan.bodyKind === "all") {
      const obj = json === undefined ? {} : json;
      if (!isJsonObject(obj)) {
        throw apiError(Code.InvalidArgument, "MalformedRequest", "The request body must be a JSON object.");
      }
      init = plan.bodyConverter!.read(obj, "", problems);
    } else if (json === undefined || json === null) {
      // No body for a body field: the field is not given.
    } else if (plan.bodyConverter) {
      // The body is one message field: its keys are named as the client wrote them.
      const obj = json;
      if (!isJsonObject(obj)) {
        throw apiError(Code.InvalidArgument, "MalformedRequest", "The request body must be a JSON object.");
      }
      const before = problems.length;
      const value = plan.bodyConverter.read(obj, "", problems);
      if (problems.length === before) assign(init, plan.bodyField!.field, value);
    } else {
      const reader = plan.bodyField!;
      const value = reader.read(json, reader.field.jsonName, problems);
      if (value !== INVALID) assign(init, reader.field, value);
    }
  }

  if (plan.query.size > 0) {
    const query = request.query as Record<string, string | string[] | undefined>;
    for (const key of Object.keys(query)) {
      const reader = plan.query.get(key);
      const raw = query[key];
      if (!reader || raw === undefined) continue;
      // Repeated keys: all values for a repeated field, the last one for a scalar.
      const value = reader.field.fieldKind === "list" ? raw : Array.isArray(raw) ? raw[raw.length - 1] : raw;
      const converted = reader.read(value, key, problems);
      if (converted === INVALID) continue;
      // A repeated field given under both its json_name and its proto name gets all values.
      const previous = init[reader.field.localName];
      assign(init, reader.field, Array.isArray(previous) ? [...previous, ...(converted as unknown[])] : converted);
    }
  }

  const params = request.params as Record<string, string>;
  for (const { param, reader } of plan.path) {
    const converted = reader.read(params[param] ?? "", reader.field.jsonName, problems);
    if (converted !== INVALID) assign(init, reader.field, converted);
  }

  if (problems.length > 0) throw fieldErrors(problems);
  return create(plan.rpc.input, init);
}

/** The parsed JSON body, or undefined when there is none. */
function readJsonBody(request: FastifyRequest): unknown {
  const raw = request.body;
  if (!Buffer.isBuffer(raw) || raw.length === 0) return undefined;
  const contentType = request.headers["content-type"];
  if (contentType !== undefined && !isJsonMediaType(contentType)) {
    throw apiError(
      Code.InvalidArgument,
      "UnsupportedMediaType",
      "The request body must be JSON, sent with Content-Type: application/json.",
    );
  }
  // 415 for a charset other than UTF-8, 400 naming the offset for bytes that are not UTF-8; a BOM is dropped.
  const text = jsonBodyText(raw, contentType);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw apiError(Code.InvalidArgument, "MalformedRequest", "The request body is not valid JSON.");
  }
}

const JSON_MEDIA_TYPE = /^\s*application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;
function isJsonMediaType(contentType: string): boolean {
  return JSON_MEDIA_TYPE.test(contentType);
}

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function webHeaders(headers: FastifyRequest["headers"]): Headers {
  const out = new Headers();
  for (const name of Object.keys(headers)) {
    if (name.charCodeAt(0) === 58 /* ":" HTTP/2 pseudo-header */) continue;
    const value = headers[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) out.append(name, v);
    else out.set(name, String(value));
  }
  return out;
}

function copyHeaders(from: Headers, reply: FastifyReply): void {
  from.forEach((value, name) => {
    reply.header(name, value);
  });
}

// ---------------------------------------------------------------------------------------------
// Errors: the one place that writes the error body.

function sendError(request: FastifyRequest, reply: FastifyReply, reason: unknown, headers?: Headers): void {
  const err = toConnectError(reason);
  if (err.code === Code.Unavailable && !(reason instanceof ConnectError)) {
    // The database is down: expected while it lasts, and every request says so.
    request.log.warn({ err: reason }, "REST request failed: database unavailable");
  } else if (!isClientError(err)) {
    // A bug or a server-side failure: the log gets the detail, the client never does.
    request.log.error({ err: reason }, "REST request failed");
  }
  const { httpStatus: code, body } = errorBody(err);
  if (headers) copyHeaders(headers, reply);
  copyHeaders(err.metadata, reply);
  if (code === 401 && !reply.hasHeader("www-authenticate")) {
    reply.header("www-authenticate", 'Basic realm="switchboard"');
  }
  reply.code(code).header("content-type", JSON_CONTENT_TYPE).send(body);
}

/**
 * The app's error handler, for routes outside this plugin (Connect's, carrier callbacks, health):
 * Fastify's own refusals (e.g. a 415 for a Content-Type it cannot parse) and unexpected failures
 * get the documented body too, and a 5xx never shows its cause to the client (the log has it).
 */
export function restErrorHandler(bodyLimit: number): (error: Error, request: FastifyRequest, reply: FastifyReply) => void {
  return (error, request, reply) => sendError(request, reply, fromFastifyError(error, bodyLimit));
}

/** Turns Fastify's own errors (body limit, content type, unreadable body) into API errors. */
function fromFastifyError(error: unknown, bodyLimit: number): unknown {
  if (error instanceof ConnectError) return error;
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof statusCode !== "number") return error;
  if (statusCode === 413) {
    return apiError(
      Code.ResourceExhausted,
      "PayloadTooLarge",
      `The request body is larger than the limit of ${bodyLimit} bytes.`,
    );
  }
  if (statusCode === 415) {
    return apiError(
      Code.InvalidArgument,
      "UnsupportedMediaType",
      "The request body must be JSON, sent with Content-Type: application/json.",
    );
  }
  if (statusCode >= 400 && statusCode < 500) {
    const detail = error instanceof Error && error.message ? ` ${error.message}` : "";
    return apiError(Code.InvalidArgument, "MalformedRequest", `The request could not be read.${detail}`);
  }
  return error;
}

// ---------------------------------------------------------------------------------------------
// Path templates

function ruleBinding(rule: HttpRule): { method: HttpVerb; template: string } | undefined {
  switch (rule.pattern.case) {
    case "get":
      return { method: "GET", template: rule.pattern.value };
    case "put":
      return { method: "PUT", template: rule.pattern.value };
    case "post":
      return { method: "POST", template: rule.pattern.value };
    case "delete":
      return { method: "DELETE", template: rule.pattern.value };
    case "patch":
      return { method: "PATCH", template: rule.pattern.value };
    case "custom": {
      const kind = rule.pattern.value.kind.toUpperCase();
      if (kind === "GET" || kind === "PUT" || kind === "POST" || kind === "DELETE" || kind === "PATCH") {
        return { method: kind, template: rule.pattern.value.path };
      }
      return undefined;
    }
    default:
      return undefined;
  }
}

/**
 * Converts `/v2/Properties/{property_sid}/Messages` to `/v2/Properties/:property_sid/Messages`.
 * Supported: literal segments and `{field}` / `{field=*}` naming a top-level scalar request field.
 * Anything else (nested field paths, multi-segment patterns, verbs) fails at start-up.
 */
function parseTemplate(template: string, rpc: DescMethod): { path: string; pathFields: DescField[] } {
  const where = `${rpc.parent.typeName}.${rpc.name} "${template}"`;
  if (!template.startsWith("/")) throw new Error(`${where}: path template must start with "/"`);
  const pathFields: DescField[] = [];
  const out: string[] = [];
  for (const segment of template.slice(1).split("/")) {
    const variable = /^\{([A-Za-z_][A-Za-z0-9_]*)(?:=\*)?\}$/.exec(segment);
    if (variable) {
      const field = rpc.input.fields.find((f) => f.name === variable[1]);
      if (!field || (field.fieldKind !== "scalar" && field.fieldKind !== "enum")) {
        throw new Error(`${where}: {${variable[1]}} is not a scalar field of ${rpc.input.typeName}`);
      }
      pathFields.push(field);
      out.push(`:${field.name}`);
    } else if (/[{}*]/.test(segment)) {
      throw new Error(`${where}: unsupported path segment "${segment}"`);
    } else {
      out.push(segment.replaceAll(":", "::")); // a literal ":" is escaped for Fastify
    }
  }
  return { path: `/${out.join("/")}`, pathFields };
}

/**
 * The API roots to answer 404 under: per first path segment, the literal segments all routes
 * share, but never a whole route path (e.g. `/v2` and `/admin/v1`).
 */
function apiPrefixes(routes: RestRoute[]): string[] {
  const groups = new Map<string, string[][]>();
  for (const route of routes) {
    const literal: string[] = [];
    for (const s of route.path.slice(1).split("/")) {
      if (s.startsWith(":")) break;
      literal.push(s);
    }
    const all = route.path.slice(1).split("/");
    // A prefix never covers a whole route path: keep at most all but the last segment.
    const capped = literal.slice(0, Math.min(literal.length, all.length - 1));
    if (capped.length === 0) continue;
    const group = groups.get(capped[0]);
    if (group) group.push(capped);
    else groups.set(capped[0], [capped]);
  }
  const prefixes: string[] = [];
  for (const list of groups.values()) {
    let common = list[0];
    for (const other of list) {
      let i = 0;
      while (i < common.length && i < other.length && common[i] === other[i]) i++;
      common = common.slice(0, i);
    }
    prefixes.push(`/${common.join("/")}`);
  }
  return prefixes;
}

// ---------------------------------------------------------------------------------------------
// JSON and string → request message conversion, compiled per message type.

const INVALID: unique symbol = Symbol("invalid");
type Converted = unknown; // a value for the init shape of `create`, or INVALID

interface FieldReader {
  field: DescField;
  /** Converts one given (non-null) value; on a problem pushes it, named `name`, and returns INVALID. */
  read(value: unknown, name: string, problems: FieldProblem[]): Converted;
}

interface MessageConverter {
  /** Reads a JSON object into an init object for `create`; unknown keys and nulls are skipped. */
  read(obj: JsonObject, prefix: string, problems: FieldProblem[]): Record<string, unknown>;
}

const messageConverters = new WeakMap<DescMessage, MessageConverter>();

function messageConverter(desc: DescMessage): MessageConverter {
  let conv = messageConverters.get(desc);
  if (conv) return conv;
  // Registered before the readers are built, which resolve nested types lazily (recursive messages).
  const byKey = new Map<string, FieldReader>();
  conv = {
    read(obj, prefix, problems) {
      const init: Record<string, unknown> = {};
      for (const key of Object.keys(obj)) {
        const reader = byKey.get(key);
        const value = obj[key];
        if (!reader || value === null) continue; // unknown keys are ignored; null means "not given"
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
  }
  return conv;
}

function assign(init: Record<string, unknown>, field: DescField, value: unknown): void {
  if (field.oneof) init[field.oneof.localName] = { case: field.localName, value };
  else init[field.localName] = value;
}

function problem(problems: FieldProblem[], name: string, message: string): typeof INVALID {
  problems.push({ field: name, code: "InvalidParameter", message: `${name} ${message}` });
  return INVALID;
}

/** True for google.protobuf.* messages, whose JSON forms are special: protobuf-es reads them. */
function isWellKnown(desc: DescMessage): boolean {
  return desc.typeName.startsWith("google.protobuf.");
}

/** Reads a JSON value for a field of any kind. */
function fieldReader(field: DescField): FieldReader {
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
          const out: unknown[] = [];
          let ok = true;
          for (let i = 0; i < value.length; i++) {
            const item = value[i] as unknown;
            const itemName = `${name}[${i}]`;
            const converted =
              item === null ? problem(problems, itemName, "must not be null.") : element(item, itemName, problems);
            if (converted === INVALID) ok = false;
            else out.push(converted);
          }
          return ok ? out : INVALID;
        },
      };
    }
    case "map":
      return fallbackReader(field);
  }
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

/** An integer by the one rule of src/transport/json-integers.ts, as the init shape wants it. */
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

function jsonScalar(
  scalar: ScalarType,
  longAsString: boolean,
  value: unknown,
  name: string,
  problems: FieldProblem[],
): Converted {
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
function queryReader(field: DescField): FieldReader | undefined {
  const scalarFromString = (scalar: ScalarType, longAsString: boolean) =>
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
  const enumFromString = (e: DescEnum) => (v: string, name: string, p: FieldProblem[]): Converted =>
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
      const out: unknown[] = [];
      let ok = true;
      for (const v of values) {
        const converted = convert(String(v), name, problems);
        if (converted === INVALID) ok = false;
        else out.push(converted);
      }
      return ok ? out : INVALID;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Response: proto JSON with every implicit field, 64-bit integers as JSON numbers.

function responseWriter(desc: DescMessage, responseBody: string): (response: unknown) => string {
  const fix = int64Fixer(desc);
  const pick = responseBody === "" ? undefined : desc.fields.find((f) => f.name === responseBody)!.jsonName;
  return (response) => {
    const message = isMessage(response, desc) ? response : create(desc, response as never);
    const json = toJson(desc, message, { alwaysEmitImplicit: true }) as JsonObject;
    if (fix) fix(json);
    return JSON.stringify(pick === undefined ? json : (json[pick] ?? null));
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
  const direct = (f: DescField): boolean =>
    (f.scalar !== undefined && is64(f.scalar)) || (f.message !== undefined && INT64_WRAPPERS.has(f.message.typeName));
  for (let changed = true; changed; ) {
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
