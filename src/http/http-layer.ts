/**
 * The HTTP layer: everything that happens to a request before it reaches a method, for every
 * route of the app (REST, Connect/gRPC, carrier callbacks, probes). Request ids, Fastify's own
 * refusals (an unreadable path, a body over the limit, a Content-Type it cannot parse), 404 and
 * 405, and the one writer of the documented error body. What happens once a method is chosen is
 * the RPC layer's: the interceptor list every wire runs (src/app.ts, createInterceptors).
 */
import { randomUUID } from "node:crypto";
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { toJson } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ResponseStatusSchema } from "../../gen/switchboard/v2/common_pb.js";
import { apiError, ERRORS, isClientError, toConnectError, toResponseStatus } from "../common/errors.js";
import { UNREACHABLE_LOG, unreachableOf } from "../common/unreachable.js";

/** The content type of every JSON answer the HTTP layer and REST write. */
export const JSON_CONTENT_TYPE = "application/json; charset=utf-8";

/** The response header (and accepted request header) carrying the request id. */
export const REQUEST_ID_HEADER = "x-request-id";

/** A client's id is taken when it is 1 to 128 of these characters; anything else gets a fresh UUID. */
const SANE_REQUEST_ID = /^[\w.:@/+=~-]{1,128}$/;

/** Methods answered by the 404/405 routes. */
const ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] as const;

/** Longest path echoed in a 404 message: long enough for any real route, short enough not to reflect a large URL. */
export const ECHOED_PATH_MAX = 200;

/** A request's headers as the web Headers Connect's contexts carry (HTTP/2 pseudo-headers left out); REST and the gRPC streams share it. */
export function webHeaders(headers: IncomingHttpHeaders): Headers {
  const h = new Headers();
  for (const name in headers) {
    if (name.charCodeAt(0) === 58 /* ":" */) continue;
    const v = headers[name];
    if (typeof v === "string") h.append(name, v);
    else if (Array.isArray(v)) for (const e of v) h.append(name, e);
  }
  return h;
}

/** The request id for a request: the client's X-Request-Id when it is sane, else a new UUID. */
export function requestIdOf(req: Pick<IncomingMessage, "headers">): string {
  const given = req.headers[REQUEST_ID_HEADER];
  return typeof given === "string" && SANE_REQUEST_ID.test(given) ? given : randomUUID();
}

/** The error of a request body over the limit, the same text on every protocol. */
export function payloadTooLarge(limit: number): ConnectError {
  return apiError("PayloadTooLarge", `The request body is larger than the limit of ${limit} bytes.`);
}

/** The error of a body that is not sent as JSON. */
export function unsupportedMediaType(): ConnectError {
  return apiError("UnsupportedMediaType", ERRORS.UnsupportedMediaType.example);
}

function pathNotFound(request: FastifyRequest): ConnectError {
  const full = request.url.split("?", 1)[0];
  const path = full.length > ECHOED_PATH_MAX ? `${full.slice(0, ECHOED_PATH_MAX)}…` : full;
  return apiError("NotFound", `The requested resource ${path} was not found.`);
}

/** An error as the documented answer: its HTTP status and `{"ResponseStatus": …}` body. */
export function errorAnswer(reason: unknown): { httpStatus: number; body: string } {
  const { httpStatus, status } = toResponseStatus(reason);
  return { httpStatus, body: JSON.stringify({ ResponseStatus: toJson(ResponseStatusSchema, status, { alwaysEmitImplicit: true }) }) };
}

/** Copies headers (a call's response headers, an error's metadata) onto the reply. */
export function copyHeaders(from: Headers, reply: FastifyReply): void {
  from.forEach((value, name) => {
    reply.header(name, value);
  });
}

/**
 * Writes an error in the documented body: its metadata (Retry-After, Allow, WWW-Authenticate) and
 * `headers` (a call's response headers) as headers. No logging: sendError, or the RPC layer, logs.
 */
export function writeError(reply: FastifyReply, reason: unknown, headers?: Headers): void {
  const err = toConnectError(reason);
  const { httpStatus, body } = errorAnswer(err);
  if (headers) copyHeaders(headers, reply);
  copyHeaders(err.metadata, reply);
  if (httpStatus === 401 && !reply.hasHeader("www-authenticate")) {
    reply.header("www-authenticate", 'Basic realm="switchboard"');
  }
  reply.code(httpStatus).header("content-type", JSON_CONTENT_TYPE).send(body);
}

/** Logs a failure the server caused (the client never gets its detail) and writes the error. */
export function sendError(request: FastifyRequest, reply: FastifyReply, reason: unknown): void {
  const unreachable = unreachableOf(reason);
  if (unreachable) {
    // A dependency is down (or the pool is full): expected while it lasts, and every request says so.
    request.log.warn({ err: reason }, `request failed: ${UNREACHABLE_LOG[unreachable]}`);
  } else if (!isClientError(toConnectError(reason))) {
    request.log.error({ err: reason }, "request failed");
  }
  writeError(reply, reason);
}

/** Turns Fastify's own errors (body limit, content type, unreadable body) into API errors. */
function fromFastifyError(error: unknown, bodyLimit: number): unknown {
  if (error instanceof ConnectError) return error;
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof statusCode !== "number") return error;
  if (statusCode === 413) return payloadTooLarge(bodyLimit);
  if (statusCode === 415) return unsupportedMediaType();
  if (statusCode >= 400 && statusCode < 500) {
    const detail = error instanceof Error && error.message ? ` ${error.message}` : "";
    return apiError("MalformedRequest", `The request could not be read.${detail}`);
  }
  return error;
}

/**
 * The error handler of every route: Fastify's own refusals (e.g. a 415 for a Content-Type it
 * cannot parse) and unexpected failures get the documented body, and a 5xx never shows its cause
 * to the client (the log has it).
 */
export function httpErrorHandler(bodyLimit: number): (error: Error, request: FastifyRequest, reply: FastifyReply) => void {
  return (error, request, reply) => {
    keepConnectionOfRefusedBody(request, reply);
    sendError(request, reply, fromFastifyError(error, bodyLimit));
  };
}

/**
 * Fastify answers a body it refuses (over the limit, a Content-Type it cannot parse) with
 * `Connection: close`, and Node closes the socket as soon as that answer is written: a client
 * still sending its body then has the connection reset, often before it has read the answer.
 * Node's parser frames the body whatever Fastify made of it, so the connection can go on instead:
 * the rest of the body is read and dropped (within REQUEST_TIMEOUT_MS, as any body), and the next
 * request is served. HTTP/2 needs nothing: Node ends an unread stream once it is answered.
 */
function keepConnectionOfRefusedBody(request: FastifyRequest, reply: FastifyReply): void {
  const raw = request.raw;
  // A response that closes the connection anyway (a body never invited with 100 Continue) keeps its Connection: close.
  if (raw.httpVersionMajor !== 1 || raw.complete || reply.getHeader("connection") !== "close" || !reply.raw.shouldKeepAlive) return;
  reply.removeHeader("connection");
  raw.resume();
}

/** The not-found handler: any path no route serves is a 404 in the documented body. */
export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): void {
  writeError(reply, pathNotFound(request));
}

/**
 * The `frameworkErrors` server option: Fastify refuses a path it cannot percent-decode
 * (e.g. `/v2/Messages/%zz`) before any route runs; like any other unknown path it is a 404
 * in the documented body.
 */
export function frameworkErrors(_error: Error, request: FastifyRequest, reply: FastifyReply): void {
  writeError(reply, pathNotFound(request));
}

/** The fastify() options of the HTTP layer: request ids, the body limit and the framework's refusals. */
export function httpServerOptions(bodyLimit: number) {
  return { genReqId: requestIdOf, bodyLimit, frameworkErrors };
}

/**
 * The HTTP layer's plugin, registered before any other (child contexts take the error handler
 * their parent has when they are registered): the request id on every answer, the error and
 * not-found handlers. A lost database is a 503 on routes outside REST and RPC too (carrier
 * callbacks), which gateways such as Kannel retry.
 */
export function httpLayer(bodyLimit: number): (app: FastifyInstance) => Promise<void> {
  const plugin = async (app: FastifyInstance) => {
    app.addHook("onRequest", (request, reply, done) => {
      void reply.header(REQUEST_ID_HEADER, request.id);
      done();
    });
    app.setErrorHandler(httpErrorHandler(bodyLimit));
    app.setNotFoundHandler(notFoundHandler);
  };
  // Not encapsulated (fastify-plugin's flag): the hooks and handlers apply to every route of the app.
  return Object.assign(plugin, { [Symbol.for("skip-override")]: true, [Symbol.for("fastify.display-name")]: "http-layer" });
}

/** Answers a known path's other methods with 405 and Allow, in onRequest, before any body is read. */
export function methodNotAllowedRoutes(app: FastifyInstance, allowedByPath: ReadonlyMap<string, ReadonlySet<string>>): void {
  for (const [path, allowed] of allowedByPath) {
    const others = ALL_METHODS.filter((m) => !allowed.has(m));
    if (others.length === 0) continue;
    const allow = ALL_METHODS.filter((m) => allowed.has(m)).join(", ");
    app.route({
      method: others,
      url: path,
      onRequest: async (request, reply) => {
        const err = apiError("MethodNotAllowed", `${request.method} is not allowed on this resource; allowed: ${allow}.`);
        err.metadata.set("allow", allow);
        writeError(reply, err);
        return reply;
      },
      handler: async () => undefined, // never reached: onRequest has answered
    });
  }
}

/**
 * Answers anything else under these API prefixes with 404 in the documented body. Static and
 * parametric routes of the app (Connect's, /healthz, other plugins' routes under these prefixes)
 * take precedence over these wildcards in the router, so nothing else is swallowed.
 */
export function notFoundRoutes(app: FastifyInstance, prefixes: readonly string[]): void {
  const onRequest = async (request: FastifyRequest, reply: FastifyReply) => {
    writeError(reply, pathNotFound(request));
    return reply;
  };
  for (const prefix of prefixes) {
    for (const url of [prefix, `${prefix}/*`]) {
      app.route({ method: [...ALL_METHODS], url, onRequest, handler: async () => undefined });
    }
  }
}
