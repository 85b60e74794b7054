/**
 * The one completion log line per request, HTTP metrics and GET /metrics, for every protocol on
 * the port. The transports report what only they know (the account, the RPC outcome) through a
 * per-request record reachable from the handler's context values.
 */
import type { LimitCounters } from "../limits/account-limits.js";
import type { SendCounters } from "../messaging/send-counters.js";
import { Code, createContextKey, createContextValues, type ContextValues, type Interceptor } from "@connectrpc/connect";
import type { MikroORM } from "@mikro-orm/sql";
import { LogController, type FastifyBaseLogger, type FastifyServerOptions, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { codeToHttpStatus, codeToString } from "../common/internals.js";
import { secretsEqual } from "../accounts/auth.js";
import type { Clock } from "../common/clock.js";
import { kAdmin, kClientAddress, kLog } from "../common/context.js";
import { kAccount } from "../accounts/account-context.js";
import { apiError, isClientError, toConnectError } from "../common/errors.js";
import { UNREACHABLE_LOG, unreachableOf } from "../common/unreachable.js";
import { lazyChildLoggerFactory } from "../common/logger.js";
import { writeError } from "../http/http-layer.js";
import { createMetrics, type Metrics } from "./metrics.js";

/** Routes that answer probes and scrapes: their completion lines are at debug, not info. */
const PROBE_ROUTES = new Set(["/healthz", "/readyz", "/metrics"]);

/** nginx's convention for a request whose client went away before the answer. */
const CLIENT_CLOSED = 499;

/** The wire a call came in on, as the completion line and the metrics name it. */
export type CallProtocol = "rest" | "connect" | "grpc" | "grpc-web";

/** What the transports learn about one call and the completion line reports. */
interface CallRecord {
  protocol: CallProtocol;
  values: ContextValues;
  /** The call's error code; undefined while it has not failed. */
  rpcCode?: Code;
}

const kRecord = Symbol("observability call record");
const kCompleted = Symbol("observability line written");
/** A request as the completion hook marks it. */
type RecordedRequest = FastifyRequest & { [kRecord]?: CallRecord; [kCompleted]?: boolean };

/** The reply a raw response belongs to, for the one shared 'close' listener (a closure per request otherwise). */
const kReply = Symbol("observability reply");
type RawWithReply = FastifyReply["raw"] & { [kReply]?: FastifyReply };

const kCall = createContextKey<CallRecord | undefined>(undefined, { description: "observability call record" });

/** Dependencies of the observability layer. */
export interface ObservabilityDeps {
  orm: MikroORM;
  clock: Clock;
  /** When set, GET /metrics requires `Authorization: Bearer <metricsToken>`. */
  metricsToken?: string;
  /** Process and runtime metrics (default true). */
  processMetrics?: boolean;
  /** The carrier whose link and queue the metrics show. */
  carrier?: import("../delivery/carrier.js").Carrier;
  /** The retention purge whose totals the metrics show. */
  retention?: import("../delivery/retention.js").RetentionPurge;
  /** The router's links, one per configured carrier: when given, the carrier metrics are these. */
  carriers?: () => import("../delivery/carrier-router.js").LinkInfo[];
  /** What the limits refused and paced per account in this process (docs/limits.md). */
  limitCounters?: LimitCounters;
  /** What the send pipeline counted in this process. */
  sendCounters?: SendCounters;
  /** The SMPP server's binds and submit_sm counts, when it runs. */
  smppServer?: () => import("./metrics.js").SmppServerStats | undefined;
}

/** The pieces buildApp wires in: Fastify server options, the plugin, and the transports' hooks. */
export interface Observability {
  metrics: Metrics;
  /** Spread into the fastify() options: quiet built-in request logging, no 503 while draining. */
  serverOptions: {
    logController: LogController;
    childLoggerFactory: NonNullable<FastifyServerOptions["childLoggerFactory"]>;
    return503OnClosing: false;
  };
  /** Register first: the hooks and GET /metrics. */
  plugin: (app: FastifyInstance) => Promise<void>;
  /** contextValues factory for the Connect plugin. */
  rpcContextValues: (request: FastifyRequest) => ContextValues;
  /** contextValues factory for the REST transport. */
  restContextValues: (request: FastifyRequest) => ContextValues;
  /** Outermost interceptor of every wire (observeCall). */
  interceptor: Interceptor;
  /** A call served outside Fastify (gRPC on an HTTP/2 stream): its context values, and its report once it ends. */
  startCall(init: StreamCallInit): StreamCall;
}

/** What a transport serving a call outside Fastify tells the observability layer about it. */
export interface StreamCallInit {
  method: string;
  route: string;
  protocol: CallProtocol;
  log: FastifyBaseLogger;
  /** The socket's remote address. */
  clientAddress?: string;
}

/** One call served outside Fastify: the context values its handler gets, and the report of its end. */
export interface StreamCall {
  values: ContextValues;
  /** Reports the call once (status as answered; aborted when the client went away first). */
  finish(statusCode: number, aborted: boolean): void;
}

/** What the completion line and the metrics say about one request. */
interface Completion {
  method: string;
  route: string;
  statusCode: number;
  durationMs: number;
  protocol: CallProtocol | "http";
  record: CallRecord | undefined;
  log: FastifyBaseLogger;
  aborted: boolean;
}

/** Fastify's request logging minus the two lines the completion hook replaces (and no raw URLs). */
class RequestLogController extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    // Asked first: the line's object would be built for every request at a level that drops it.
    if (levelEnabled(request.log, "debug")) request.log.debug({ method: request.method, route: request.routeOptions.url }, "request received");
  }
  override requestCompleted(): void {
    // Written by the onResponse hook instead, with the route template, the account and the protocol.
  }
  override routeNotFound(request: FastifyRequest): void {
    request.log.debug({ method: request.method, path: request.url.split("?", 1)[0] }, "route not found");
  }
}

/** Whether a line at `level` would be written (Fastify's no-op logger, without a logger, has no levels: written, to nowhere). */
function levelEnabled(log: FastifyBaseLogger, level: "warn" | "info" | "debug"): boolean {
  const ask = (log as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled;
  return typeof ask !== "function" || ask.call(log, level);
}

function rpcProtocol(request: FastifyRequest): CallProtocol {
  const type = String(request.headers["content-type"] ?? "");
  if (type.startsWith("application/grpc-web")) return "grpc-web";
  if (type.startsWith("application/grpc")) return "grpc";
  return "connect";
}

/** Creates the observability layer of one app (its own metrics registry). */
export function createObservability(deps: ObservabilityDeps): Observability {
  const metrics = createMetrics({
    orm: deps.orm,
    clock: deps.clock,
    processMetrics: deps.processMetrics,
    carrier: deps.carrier,
    retention: deps.retention,
    carriers: deps.carriers,
    limitCounters: deps.limitCounters,
    sendCounters: deps.sendCounters,
    smppServer: deps.smppServer,
  });
  // On the request object itself (not in a WeakMap/WeakSet: an entry per request is garbage-collector work).
  const records = (request: FastifyRequest) => (request as RecordedRequest)[kRecord];
  /** Requests without their line yet: whatever is left when the app closes was cut off. */
  const open = new Map<FastifyRequest, FastifyReply>();

  const contextValuesFor = (protocol: (request: FastifyRequest) => CallProtocol) => (request: FastifyRequest) => {
    const values = createContextValues();
    const record: CallRecord = { protocol: protocol(request), values };
    values.set(kCall, record);
    values.set(kLog, request.log);
    // Fastify's request.ip is the socket's address: trustProxy is off, so X-Forwarded-For counts for nothing.
    values.set(kClientAddress, request.ip);
    (request as RecordedRequest)[kRecord] = record;
    return values;
  };

  /** The completion line and the metrics of one request, whichever server part served it. */
  function report(c: Completion): void {
    const { record, protocol, log } = c;
    let status = c.aborted ? CLIENT_CLOSED : c.statusCode;
    // gRPC answers 200 whatever happened; the label carries the status its code stands for.
    if (!c.aborted && record?.rpcCode !== undefined && (protocol === "grpc" || protocol === "grpc-web")) status = codeToHttpStatus(record.rpcCode);
    metrics.observeRequest({ method: c.method, route: c.route, status, protocol }, c.durationMs / 1000);

    // The completion line is built only at a level that writes it (LOG_LEVEL=warn drops a success's).
    const level = status >= 500 ? "warn" : PROBE_ROUTES.has(c.route) ? "debug" : "info";
    if (!levelEnabled(log, level)) return;
    const account = record?.values.get(kAccount);
    const line = {
      method: c.method,
      route: c.route,
      status,
      durationMs: Math.round(c.durationMs * 10) / 10,
      protocol,
      ...(account ? { accountSid: account.sid } : {}),
      ...(record?.values.get(kAdmin) ? { operator: true } : {}),
      ...(record?.rpcCode !== undefined ? { rpcCode: codeToString(record.rpcCode) } : {}),
      ...(c.aborted ? { aborted: true } : {}),
    };
    log[level](line, "request completed");
  }

  function complete(request: FastifyRequest, reply: FastifyReply, aborted: boolean): void {
    const recorded = request as RecordedRequest;
    if (recorded[kCompleted]) return;
    recorded[kCompleted] = true;
    open.delete(request);
    const record = records(request);
    report({
      method: request.method,
      route: request.routeOptions.url ?? "unmatched",
      statusCode: reply.statusCode,
      durationMs: reply.elapsedTime,
      protocol: record?.protocol ?? "http",
      record,
      log: request.log,
      aborted,
    });
  }

  /** Calls served on HTTP/2 streams outside Fastify, not yet reported: cut off if the app closes first. */
  const openCalls = new Set<() => void>();

  function startCall(init: StreamCallInit): StreamCall {
    const started = performance.now();
    const values = createContextValues();
    const record: CallRecord = { protocol: init.protocol, values };
    values.set(kCall, record);
    values.set(kLog, init.log);
    values.set(kClientAddress, init.clientAddress);
    let done = false;
    const finish = (statusCode: number, aborted: boolean) => {
      if (done) return;
      done = true;
      openCalls.delete(cut);
      const { method, route, protocol, log } = init;
      report({ method, route, statusCode, durationMs: performance.now() - started, protocol, record, log, aborted });
    };
    const cut = () => finish(CLIENT_CLOSED, true);
    openCalls.add(cut);
    return { values, finish };
  }

  async function plugin(app: FastifyInstance): Promise<void> {
    // A client that goes away gets no 'finish' event, hence no onResponse: still one line for it.
    // A response closes once, so `on` (without once's wrapper) is enough.
    function onRawClose(this: RawWithReply): void {
      const reply = this[kReply];
      if (reply && !this.writableFinished) complete(reply.request, reply, true);
    }
    app.addHook("onRequest", (request, reply, done) => {
      open.set(request, reply);
      (reply.raw as RawWithReply)[kReply] = reply;
      reply.raw.on("close", onRawClose);
      done();
    });
    app.addHook("onResponse", (request, reply, done) => {
      complete(request, reply, false);
      done();
    });
    app.addHook("onClose", (_app, done) => {
      // The server is closed: a request still open had its connection cut at the end of the drain,
      // and its 'close' event may come after the process has exited.
      for (const [request, reply] of open) complete(request, reply, true);
      for (const cut of [...openCalls]) cut();
      metrics.registry.clear();
      done();
    });

    app.get("/metrics", async (request, reply) => {
      if (deps.metricsToken !== undefined) {
        const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "");
        if (!m || !secretsEqual(m[1]!, deps.metricsToken)) {
          reply.header("www-authenticate", 'Bearer realm="switchboard-metrics"');
          writeError(reply, apiError("Unauthorized", "GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>`."));
          return reply;
        }
      }
      const body = await metrics.render();
      return reply.header("content-type", metrics.registry.contentType).send(body);
    });
  }
  // Not encapsulated (fastify-plugin's flag): the hooks apply to every route of the app.
  Object.assign(plugin, { [Symbol.for("skip-override")]: true, [Symbol.for("fastify.display-name")]: "observability" });

  return {
    metrics,
    serverOptions: {
      logController: new RequestLogController({ requestIdLogLabel: "requestId" }),
      // Fastify types its loggers as FastifyBaseLogger; the ones it passes here are pino's.
      childLoggerFactory: lazyChildLoggerFactory as unknown as NonNullable<FastifyServerOptions["childLoggerFactory"]>,
      return503OnClosing: false,
    },
    plugin,
    rpcContextValues: contextValuesFor(rpcProtocol),
    restContextValues: contextValuesFor(() => "rest"),
    interceptor: observeCall,
    startCall,
  };
}

/**
 * The outermost interceptor of every wire: answers every failure of a call as the ConnectError a
 * client gets (toConnectError: a lost database is ServiceUnavailable, anything else unknown is
 * internal), logs those the server caused with the detail the client never sees (a lost database
 * at warn: expected while it lasts, and every call says so), and records the code for the
 * completion line and the metrics.
 */
export const observeCall: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (reason) {
    const err = toConnectError(reason);
    const unreachable = unreachableOf(reason);
    if (unreachable) req.contextValues.get(kLog)?.warn({ err: reason }, `call failed: ${UNREACHABLE_LOG[unreachable]}`);
    else if (!isClientError(err)) req.contextValues.get(kLog)?.error({ err: reason }, "call failed");
    const record = req.contextValues.get(kCall);
    if (record) record.rpcCode = err.code;
    throw err;
  }
};
