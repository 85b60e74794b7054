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
import type { DescService } from "@bufbuild/protobuf";
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
import { type ResponseWriter, responseWriter } from "./rest-response.js";
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

/** The request a REST call passes down the interceptor chain. */
type RestRequest = UnaryRequest & { readonly [kContext]: HandlerContext };

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
    const write = responseWriter(route.rpc, route.responseBody);
    app.route({
      method: route.method,
      url: route.path,
      bodyLimit,
      handler: (request, reply) => serve(route, chain, decode, write, values, request, reply),
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
    const ctx = (req as RestRequest)[kContext];
    const input = req.message;
    if (!call) throw new ConnectError(`${service.typeName}.${rpc.name} is not implemented`, Code.Unimplemented);
    const message = await call(input, ctx);
    return { stream: false, service, method: rpc, header: ctx.responseHeader, trailer: ctx.responseTrailer, message } as UnaryResponse;
  };
  return interceptors.reduceRight<Next>((next, interceptor) => interceptor(next), method);
}

async function serve(
  route: RestRoute,
  chain: Next,
  decode: RequestDecoder,
  write: ResponseWriter,
  values: (request: FastifyRequest) => ContextValues,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  // Abort the handler's signal when the client goes away (HTTP/2: the stream closes; HTTP/1.1:
  // the response closes — the request emits "close" as soon as its body has been read).
  const raw = request.raw;
  const closing: NodeJS.EventEmitter = "stream" in raw ? raw : reply.raw;
  const ctx = handlerContext(route, request, values(request));
  const onClose = () => ctx.abort(new ConnectError("the client closed the request", Code.Canceled));
  closing.once("close", onClose);

  // A Fone Dynamics compatible account is answered in the shapes its SDKs read, and its body
  // without a charset that is not UTF-8 is read as the ISO-8859-1 those SDKs send. Read once the
  // account is known: the body is decoded after authentication.
  const compatible = () => ctx.values.get(kAccount)?.restCompatibility === "FoneDynamics";
  let decoded: ReturnType<RequestDecoder> | undefined;
  const req: RestRequest = {
    stream: false,
    service: route.service,
    method: route.rpc,
    requestMethod: request.method,
    url: ctx.url,
    get signal() {
      return ctx.signal;
    },
    header: ctx.requestHeader,
    contextValues: ctx.values,
    [kContext]: ctx,
    // Decoded on first access (never, when an interceptor refuses the call first); a request that
    // cannot be decoded throws its 400 on every access.
    get message() {
      return (decoded ??= decode(request, compatible() ? "utf-8-else-latin1" : "utf-8")).message as UnaryRequest["message"];
    },
  };
  try {
    let response: UnaryResponse;
    try {
      response = (await chain(req)) as UnaryResponse;
    } catch (reason) {
      // The interceptors have logged what the server caused.
      writeError(reply, reason, ctx.responseHeader);
      return reply;
    }
    try {
      const body = write(response.message, compatible() ? { requestBody: decoded?.body } : undefined);
      copyHeaders(response.header, reply);
      return reply.code(200).header("content-type", JSON_CONTENT_TYPE).send(body);
    } catch (reason) {
      sendError(request, reply, reason);
      return reply;
    }
  } finally {
    closing.off("close", onClose);
    ctx.abort(CALL_COMPLETE); // as Connect does: the signal also fires when the call is complete
  }
}

/**
 * The call's handler context, as Connect's createHandlerContext makes it, with one AbortController
 * instead of three linked ones (a deadline's, the request's and the call's: REST calls have no
 * deadline) and no copies of the header objects; the trailer, which REST never writes, is made on
 * first use, and so is the signal: most calls never read it, and making it, then aborting it when
 * the call completes (an Event dispatched), was ~1 % of a send's CPU. A signal first read after
 * the abort is made already aborted, with the same reason.
 */
function handlerContext(route: RestRoute, request: FastifyRequest, contextValues: ContextValues): HandlerContext & { abort(reason?: unknown): void } {
  let controller: AbortController | undefined;
  let aborted: { reason: unknown } | undefined;
  let trailer: Headers | undefined;
  return {
    service: route.service,
    method: route.rpc,
    protocolName: "rest",
    requestMethod: request.method,
    url: `${request.protocol}://${request.host}${request.url}`,
    requestHeader: webHeaders(request.headers),
    responseHeader: new Headers(),
    get responseTrailer() {
      return (trailer ??= new Headers());
    },
    values: contextValues,
    get signal() {
      if (!controller) {
        controller = new AbortController();
        if (aborted) controller.abort(aborted.reason);
      }
      return controller.signal;
    },
    timeoutMs: noTimeout,
    abort: (reason?: unknown) => {
      if (controller) controller.abort(reason);
      else aborted ??= { reason };
    },
  };
}

const noTimeout = () => undefined;
