/**
 * REST transcoder: serves every method that carries a `google.api.http` option as a JSON REST
 * endpoint, through the same interceptor list and the same service implementation that Connect,
 * gRPC and gRPC-Web run.
 *
 * Everything comes from the descriptors (rest-routes.ts): the path template gives the route and
 * the path fields, the remaining top-level scalar fields come from the query string, and
 * `body: "*"` fills the request message from a JSON object (rest-request.ts); the answer is the
 * response message's JSON (rest-response.ts). Decoders, writers and each route's interceptor
 * chain are built once at registration. No business logic lives here.
 */
import type { DescMethodUnary, DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type ServiceImpl,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { CALL_COMPLETE, kLog } from "../common/context.js";
import { kServerTiming, ServerTiming } from "../common/server-timing.js";
import { kAccount } from "../accounts/account-context.js";
import {
  copyHeaders,
  httpErrorHandler,
  JSON_CONTENT_TYPE,
  methodNotAllowedRoutes,
  notFoundRoutes,
  sendError,
  webHeaders,
  writeError,
} from "../http/http-layer.js";
import { requestDecoder, type RequestDecoder } from "./rest-request.js";
import { type ResponseWriter, responseJson, responseWriter } from "./rest-response.js";
import { acceptsCsv, CSV_CONTENT_TYPE, csvWriter } from "./rest-csv.js";
import { apiPrefixes, restRoutes, type RestRoute } from "./rest-routes.js";

/** One service the plugin serves. */
export interface RestService {
  service: DescService;
  /** The same implementation object the Connect router serves. */
  impl: Partial<ServiceImpl<DescService>>;
}

/** The REST plugin's options. */
export interface RestOptions {
  services: RestService[];
  /** The interceptors every call runs, in order (the list Connect is given): authentication etc. */
  interceptors: Interceptor[];
  /** Largest accepted request body in bytes; default 1 MiB. */
  bodyLimit?: number;
  /** The handler context's values for a request (as connect-fastify's option); default: only the request's logger. */
  contextValues?: (request: FastifyRequest) => ContextValues;
  /** SERVER_TIMING: answer each call with a `Server-Timing` header of its steps (common/server-timing.ts); default off. */
  serverTiming?: boolean;
}

/** Helper with full type checking of the implementation against its service. */
export function restService<T extends DescService>(service: T, impl: Partial<ServiceImpl<T>>): RestService {
  return { service, impl: impl as Partial<ServiceImpl<DescService>> };
}

const DEFAULT_BODY_LIMIT = 1024 * 1024;

/** The chain's function type (Connect does not export it). */
type Next = ReturnType<Interceptor>;

/** Where a REST call's handler context travels with its request through the interceptors. */
const kContext = Symbol("rest handler context");

function defaultContextValues(request: FastifyRequest): ContextValues {
  const values = createContextValues();
  values.set(kLog, request.log);
  return values;
}

/** A Fastify plugin (register it with app.register) that serves every method that has a google.api.http option. */
export async function restPlugin(app: FastifyInstance, opts: RestOptions): Promise<void> {
  const bodyLimit = opts.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const impls = new Map<DescService, Partial<ServiceImpl<DescService>>>();
  for (const s of opts.services) impls.set(s.service, s.impl);
  const routes = restRoutes(opts.services.map((s) => s.service));
  const values = opts.contextValues ?? defaultContextValues;
  const timed = opts.serverTiming === true;

  // This plugin is encapsulated (not wrapped in fastify-plugin): the parsers and the error
  // handler below apply to its routes only. Bodies are read as raw bytes whatever the
  // Content-Type; the decoder decides between JSON, 415 and 400, so that an empty body is {}.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit }, (_req, body, done) => done(null, body));
  app.setErrorHandler(httpErrorHandler(bodyLimit));

  const allowedByPath = new Map<string, Set<string>>();
  for (const route of routes) {
    const chain = callChain(route, impls.get(route.service), opts.interceptors);
    const decode = requestDecoder(route);
    const write = withCsv(route, responseWriter(route.rpc, route.responseBody));
    app.route({
      method: route.method,
      url: route.path,
      bodyLimit,
      handler: (request, reply) => serve(route, chain, decode, write, values, timed, request, reply),
    });
    let allowed = allowedByPath.get(route.path);
    if (!allowed) allowedByPath.set(route.path, (allowed = new Set()));
    allowed.add(route.method);
    if (route.method === "GET") allowed.add("HEAD"); // Fastify exposes HEAD for every GET route
  }
  methodNotAllowedRoutes(app, allowedByPath);
  notFoundRoutes(app, apiPrefixes(routes));
}

/**
 * The route's interceptor chain around its implementation, composed once (as Connect composes
 * the same list around a method per call). The implementation gets the request's message, read
 * on first access: interceptors that refuse a call (authentication) run before the body is.
 */
function callChain(route: RestRoute, impl: Partial<ServiceImpl<DescService>> | undefined, interceptors: readonly Interceptor[]): Next {
  const { rpc, service } = route;
  const fn = impl?.[rpc.localName] as unknown;
  const call = typeof fn === "function" ? (fn as (req: unknown, ctx: HandlerContext) => unknown).bind(impl) : undefined;
  const method: Next = async (req) => {
    const ctx = (req as RestCall)[kContext];
    ctx.timing?.mark("method");
    const input = req.message;
    ctx.timing?.mark("decoded");
    if (!call) throw new ConnectError(`${service.typeName}.${rpc.name} is not implemented`, Code.Unimplemented);
    const message = await call(input, ctx);
    ctx.timing?.mark("serviceEnd");
    return new RestResponse(service, rpc, message as UnaryResponse["message"], ctx);
  };
  return interceptors.reduceRight<Next>((next, interceptor) => interceptor(next), method);
}

/** A route's writer and, for a method that answers CSV (rest-csv.ts), its CSV writer. */
type RouteWriter = ResponseWriter & { csv?: (response: unknown, request: unknown) => string };

function withCsv(route: RestRoute, write: ResponseWriter): RouteWriter {
  const csv = csvWriter(route.rpc);
  if (!csv) return write;
  const json = responseJson(route.rpc);
  return Object.assign(write, { csv: (response: unknown, request: unknown) => csv(json(response), request as { groupBy?: string }) });
}

async function serve(
  route: RestRoute,
  chain: Next,
  decode: RequestDecoder,
  write: RouteWriter,
  values: (request: FastifyRequest) => ContextValues,
  timed: boolean,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  // Abort the handler's signal when the client goes away (HTTP/2: the stream closes; HTTP/1.1:
  // the response closes — the request emits "close" as soon as its body has been read).
  const raw = request.raw;
  const closing: NodeJS.EventEmitter = "stream" in raw ? raw : reply.raw;
  const ctx = new RestHandlerContext(route, request, values(request), timed ? new ServerTiming() : undefined);
  const onClose = () => ctx.abort(new ConnectError("the client closed the request", Code.Canceled));
  closing.on("close", onClose); // removed below: `once` would wrap it in one more closure per call
  const req = new RestCall(route, request, ctx, decode);
  try {
    let response: UnaryResponse;
    try {
      response = (await chain(req)) as UnaryResponse;
    } catch (reason) {
      // The interceptors have logged what the server caused.
      if (ctx.timing) timingHeader(ctx.timing, ctx.responseHeader);
      writeError(reply, reason, ctx.responseHeader);
      return reply;
    }
    try {
      ctx.timing?.mark("chainEnd");
      const csv = write.csv !== undefined && acceptsCsv(request.headers.accept);
      const body = csv
        ? write.csv!(response.message, req.message)
        : write(response.message, isCompatible(ctx.values) ? { requestBody: req.decodedBody } : undefined);
      if (ctx.timing) timingHeader(ctx.timing, response.header);
      copyHeaders(response.header, reply);
      if (write.csv !== undefined) reply.header("vary", "Accept");
      return reply
        .code(200)
        .header("content-type", csv ? CSV_CONTENT_TYPE : JSON_CONTENT_TYPE)
        .send(body);
    } catch (reason) {
      sendError(request, reply, reason);
      return reply;
    }
  } finally {
    closing.off("close", onClose);
    ctx.abort(CALL_COMPLETE); // as Connect does: the signal also fires when the call is complete
  }
}

/** The call's steps as its `Server-Timing` header, marked as written now (the body, when there is one, is built). */
function timingHeader(timing: ServerTiming, header: Headers): void {
  timing.mark("written");
  header.set("server-timing", timing.header());
}

// The call's objects are instances of classes, not object literals: a literal's getters (and the
// closures they read) would be made again for every call; a class's live on its prototype.

/**
 * The call's handler context, as Connect's createHandlerContext makes it, with one AbortController
 * instead of three linked ones (a deadline's, the request's and the call's: REST calls have no
 * deadline) and no copies of the header objects; the trailer, which REST never writes, is made on
 * first use, and so are the URL and the signal: most calls never read them, and making the signal,
 * then aborting it when the call completes (an Event dispatched), was ~1 % of a send's CPU. A
 * signal first read after the abort is made already aborted, with the same reason.
 */
class RestHandlerContext implements HandlerContext {
  readonly service: DescService;
  readonly method: DescMethodUnary;
  readonly protocolName = "rest";
  readonly requestMethod: string;
  readonly requestHeader: Headers;
  readonly responseHeader = new Headers();
  readonly values: ContextValues;
  /** SERVER_TIMING on: this call's marks (also on `values`, for the service); otherwise undefined. */
  readonly timing: ServerTiming | undefined;
  readonly #request: FastifyRequest;
  #controller: AbortController | undefined;
  #aborted: { reason: unknown } | undefined;
  #trailer: Headers | undefined;

  constructor(route: RestRoute, request: FastifyRequest, values: ContextValues, timing: ServerTiming | undefined) {
    this.service = route.service;
    this.method = route.rpc;
    this.requestMethod = request.method;
    this.requestHeader = webHeaders(request.headers);
    this.values = values;
    this.timing = timing;
    if (timing) values.set(kServerTiming, timing);
    this.#request = request;
  }

  get url(): string {
    const request = this.#request;
    return `${request.protocol}://${request.host}${request.url}`;
  }

  get responseTrailer(): Headers {
    return (this.#trailer ??= new Headers());
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#aborted.reason);
    }
    return this.#controller.signal;
  }

  timeoutMs(): number | undefined {
    return undefined;
  }

  abort(reason?: unknown): void {
    if (this.#controller) this.#controller.abort(reason);
    else this.#aborted ??= { reason };
  }
}

/**
 * The request a REST call passes down the interceptor chain, its handler context with it. Its
 * message is decoded on first access (never, when an interceptor refuses the call first); a
 * request that cannot be decoded throws its 400 on every access.
 */
class RestCall implements UnaryRequest {
  readonly stream = false;
  readonly service: DescService;
  readonly method: DescMethodUnary;
  readonly requestMethod: string;
  readonly header: Headers;
  readonly contextValues: ContextValues;
  readonly [kContext]: RestHandlerContext;
  readonly #request: FastifyRequest;
  readonly #decode: RequestDecoder;
  #decoded: ReturnType<RequestDecoder> | undefined;

  constructor(route: RestRoute, request: FastifyRequest, ctx: RestHandlerContext, decode: RequestDecoder) {
    this.service = route.service;
    this.method = route.rpc;
    this.requestMethod = request.method;
    this.header = ctx.requestHeader;
    this.contextValues = ctx.values;
    this[kContext] = ctx;
    this.#request = request;
    this.#decode = decode;
  }

  get url(): string {
    return this[kContext].url;
  }

  get signal(): AbortSignal {
    return this[kContext].signal;
  }

  // A Fone Dynamics compatible account's body without a charset that is not UTF-8 is read as the
  // ISO-8859-1 its SDKs send: known once the account is, so the body is decoded after authentication.
  get message(): UnaryRequest["message"] {
    this.#decoded ??= this.#decode(this.#request, isCompatible(this.contextValues) ? "utf-8-else-latin1" : "utf-8");
    return this.#decoded.message as UnaryRequest["message"];
  }

  /** The JSON body as the client sent it, when the message was decoded. */
  get decodedBody(): unknown {
    return this.#decoded?.body;
  }
}

/** What the method answers; the trailer (REST never writes one) is made only if something reads it. */
class RestResponse implements UnaryResponse {
  readonly stream = false;
  readonly header: Headers;
  readonly #ctx: RestHandlerContext;

  constructor(
    readonly service: DescService,
    readonly method: DescMethodUnary,
    readonly message: UnaryResponse["message"],
    ctx: RestHandlerContext,
  ) {
    this.header = ctx.responseHeader;
    this.#ctx = ctx;
  }

  get trailer(): Headers {
    return this.#ctx.responseTrailer;
  }
}

/** A Fone Dynamics compatible account is answered in the shapes its SDKs read (src/rest/rest-compat.ts). */
function isCompatible(values: ContextValues): boolean {
  return values.get(kAccount)?.restCompatibility === "FoneDynamics";
}
