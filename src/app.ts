import type { DescService } from "@bufbuild/protobuf";
import type { Interceptor, ServiceImpl } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { createRateCache, type RateCache } from "./billing/rate-cache.js";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { MikroORM } from "@mikro-orm/sql";
import { fastify, type FastifyInstance, type FastifyServerOptions } from "fastify";
import { file_google_rpc_error_details } from "../gen/google/rpc/error_details_pb.js";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { AdminService } from "../gen/switchboard/admin/v1/admin_pb.js";
import { AddressService } from "../gen/switchboard/v2/addresses_pb.js";
import { BillingService } from "../gen/switchboard/v2/billing_pb.js";
import { MessagingService } from "../gen/switchboard/v2/messaging_pb.js";
import { NumberService } from "../gen/switchboard/v2/numbers_pb.js";
import { OptOutService } from "../gen/switchboard/v2/opt_outs_pb.js";
import { SenderIdService } from "../gen/switchboard/v2/sender_ids_pb.js";
import { type AccountCache, authentication, createAccountCache, type EdgeDeps } from "./accounts/auth.js";
import { createAuthFailureGuard } from "./accounts/auth-failures.js";
import { createAddressService } from "./addresses/address-service.js";
import { createAdminService, type SimulatedHandsets } from "./admin/admin-service.js";
import { createBillingService } from "./billing/billing-service.js";
import type { Carrier } from "./delivery/carrier.js";
import type { CarrierRouter } from "./delivery/carrier-router.js";
import type { Clock } from "./common/clock.js";
import { systemClock } from "./common/clock.js";
import { rejectUnstorableStrings } from "./common/string-guard.js";
import {
  DEFAULT_AUTH_FAILURE_LIMITS,
  DEFAULT_BILLING,
  DEFAULT_CONNECTION_LIMITS,
  DEFAULT_SEND_RATE_LIMIT,
  defaultSendBurst,
  type Config,
  defaultReadLimits,
} from "./config.js";
import { isDatabaseReady, ormKind } from "./db/orm.js";
import { createMessagingService } from "./messaging/messaging-service.js";
import type { SendRules } from "./messaging/send-steps.js";
import type { AcceptClaims } from "./messaging/claim-at-accept.js";
import { createAdmitLimits, type LimitCounters } from "./limits/account-limits.js";
import type { SendCounters } from "./messaging/send-counters.js";
import { createPostgresBucketStore } from "./limits/bucket-store.js";
import { createSharedAllowance, type SharedAllowance } from "./limits/shared-allowance.js";
import { createNumberService } from "./numbers/number-service.js";
import { createOptOutService } from "./optouts/opt-out-service.js";
import { createSenderIdService } from "./senderids/sender-id-service.js";
import { apiDocsPlugin } from "./openapi/api-docs.js";
import { consolePlugin } from "./console/console-plugin.js";
import { createConsoleSessions } from "./console/console-sessions.js";
import { createHealthService } from "./rpc/health.js";
import { createReflectionServices } from "./rpc/reflection.js";
import { bodyLimitGate } from "./http/body-limit.js";
import { shareCallCompleteReason } from "./rpc/call-complete.js";
import { createObservability } from "./ops/observability.js";
import { createClientErrorHandler } from "./http/client-errors.js";
import { grpcStreamHandler } from "./rpc/grpc-streams.js";
import { rpcHandlerWrappers, wrapRpcHandlers } from "./rpc/handler-wrappers.js";
import { createPolyglotServer, type PolyglotServer } from "./http/polyglot-server.js";
import { httpLayer, httpServerOptions } from "./http/http-layer.js";
import { restPlugin } from "./rest/rest.js";
import { createReadGate, gateReads } from "./rpc/read-gate.js";
import type { RetentionPurge } from "./delivery/retention.js";
import { markRequestRead } from "./rpc/rpc-read-errors.js";
import { serviceWithJsonRules } from "./rpc/rpc-json.js";
import { createSmppServer, type SmppServer } from "./smpp-server/smpp-server.js";

declare module "fastify" {
  interface FastifyInstance {
    /** The SMPP server (docs/smpp-server.md), when SMPP_SERVER_PORT or SMPP_SERVER_TLS_PORT is set: main listens on it, app.close() ends its binds. */
    smppServer?: SmppServer;
  }
}

/** Everything buildApp needs; nothing is read from globals. */
export interface AppDeps {
  orm: MikroORM;
  config: Pick<Config, "adminToken" | "webhookAllowPrivate" | "noAlphaCountries" | "bodyLimit" | "metricsToken"> &
    Partial<
      Pick<
        Config,
        | "destinations"
        | "sendRateLimit"
        | "sendRateBurst"
        | "connections"
        | "mailFromDomains"
        | "authFailures"
        | "reads"
        | "senderIdRegistration"
        | "billing"
        | "serverTiming"
        | "smppServer"
        | "host"
      >
    >;
  clock?: Clock;
  /** The carrier, for the simulator's operator endpoints. */
  carrier?: Carrier;
  /** The dispatcher's carrier router: each configured carrier's link for the operator API and the metrics. */
  router?: Pick<CarrierRouter, "links" | "refresh">;
  /** The process's simulated network (every simulator carrier delivers to it), for the Handsets API; default: the carrier's own, if a simulator. */
  simulatorNetwork?: SimulatedHandsets;
  /** Called after a message due now is queued unclaimed, to wake the dispatcher. */
  onQueued?: () => void;
  /** This process's dispatcher (its hand-off), when the process runs one: due sends are stored claimed by it (messaging/claim-at-accept.ts). */
  claims?: AcceptClaims;
  /** The process's allowance of the shared limits (limits/limits-store.ts); default: buckets in this database. */
  limits?: SharedAllowance;
  /** What the send pipeline counts, for /metrics (shared with this process's delivery engine). */
  sendCounters?: SendCounters;
  /** What the limits refused and paced per account, for /metrics (shared with this process's dispatcher). */
  limitCounters?: LimitCounters;
  /** This process's retention purge, whose totals /metrics shows. */
  retention?: RetentionPurge;
  /** The built operator console; default dist/console (src/console/console-plugin.ts). */
  consoleDir?: string;
  /** The send rules that need data (messaging/send-steps.ts); default SEND_RULES, whose facts function the migrations install. */
  rules?: SendRules;
  /** This process's copies of the rate cards (billing/rate-cache.ts); default a new one. */
  rates?: RateCache;
  /** Fastify logger option: false in tests, a pino instance or options in main. */
  logger?: FastifyServerOptions["logger"] | FastifyServerOptions["loggerInstance"];
}

/** One served service: its descriptor and the single implementation every transport calls. */
export interface ServedService {
  service: DescService;
  impl: ServiceImpl<DescService>;
}

/**
 * Builds the service implementations from their dependencies; their read methods run under the
 * read gate (src/rpc/read-gate.ts), the same on every wire.
 */
export function createServices(deps: AppDeps, accounts: AccountCache = createAccountCache()): ServedService[] {
  const clock = deps.clock ?? systemClock;
  const reads = deps.config.reads ?? defaultReadLimits(ormKind(deps.orm));
  const gate = createReadGate(reads);
  const served = (service: DescService, impl: object) => ({
    service,
    impl: gateReads(service, impl as ServiceImpl<DescService>, deps.orm, gate, reads.statementTimeoutMs),
  });
  // For the whole deployment: buckets shared by every process, taken in blocks (docs/limits.md).
  const ratePerSecond = deps.config.sendRateLimit ?? DEFAULT_SEND_RATE_LIMIT;
  const burst = deps.config.sendRateBurst ?? defaultSendBurst(ratePerSecond);
  const allowance = deps.limits ?? createSharedAllowance({ store: createPostgresBucketStore(deps.orm), clock });
  const limits = createAdmitLimits(allowance, { ratePerSecond, burst }, () => clock.now().getTime(), deps.limitCounters);
  const router = deps.router;
  const billing = deps.config.billing ?? DEFAULT_BILLING;
  return [
    served(
      MessagingService,
      createMessagingService({
        orm: deps.orm,
        clock,
        ...deps.config,
        onQueued: deps.onQueued,
        claims: deps.claims,
        limits,
        rules: deps.rules,
        counters: deps.sendCounters,
        currency: billing.currency,
        defaultRateCard: billing.defaultRateCard,
        // A card this process cannot load is priced by the send's statement, exactly as before.
        rates: deps.rates ?? createRateCache({ orm: deps.orm }),
      }),
    ),
    served(AddressService, createAddressService({ clock })),
    served(NumberService, createNumberService()),
    served(OptOutService, createOptOutService({ clock })),
    served(SenderIdService, createSenderIdService({ clock })),
    served(BillingService, createBillingService({ currency: billing.currency })),
    served(
      AdminService,
      createAdminService({
        clock,
        carrier: deps.carrier,
        handsets: deps.simulatorNetwork,
        accounts,
        limits: allowance,
        currency: billing.currency,
        webhookAllowPrivate: deps.config.webhookAllowPrivate,
        carrierLinks: router ? () => new Map(router.links().map((l) => [l.name, l.link === "" ? "-" : l.link])) : undefined,
        // This process's dispatcher reads the change at once; the others within their poll.
        // A failed read keeps the last table (the router logs it and reads again within seconds).
        routingChanged: router ? () => router.refresh().catch(() => undefined) : undefined,
      }),
    ),
  ];
}

/**
 * The one request pipeline of the RPC layer: the ordered interceptors every wire runs before a
 * method (REST, Connect, gRPC and gRPC-Web alike). A new rule is one entry here.
 */
export function createInterceptors(edge: EdgeDeps, observe: Interceptor): Interceptor[] {
  return [
    // Every failure as the error a client gets (a lost database is 503 / Unavailable), the log
    // with the detail of what the server caused, and the code for the completion line and metrics.
    observe,
    // Credentials (and the Idempotency-Key) before anything else is looked at, the body included.
    authentication(edge),
    // A request string PostgreSQL cannot store (U+0000, an unpaired surrogate) is a 400, not a database 500.
    rejectUnstorableStrings,
  ];
}

/**
 * What the service needs that does not answer now, for /readyz and the gRPC health service: the
 * database, and the shared limits' Redis when they are kept there (every send with a request rate
 * takes from it); empty when ready. Both are asked at once, each within its own bound.
 */
export async function unreadyStores(orm: MikroORM, limits?: SharedAllowance): Promise<("database" | "redis")[]> {
  const [database, redis] = await Promise.all([isDatabaseReady(orm), limits?.store.ready?.() ?? true]);
  return [...(database ? [] : (["database"] as const)), ...(redis ? [] : (["redis"] as const))];
}

/**
 * The operational RPC services next to the business ones: gRPC health and server reflection
 * (v1 and v1alpha). They need no authentication and have no REST routes.
 */
export function createOperationalServices(orm: MikroORM, business: readonly ServedService[], limits?: SharedAllowance): ServedService[] {
  const health = createHealthService({
    orm,
    services: business.map((s) => s.service.typeName),
    ready: async () => (await unreadyStores(orm, limits)).length === 0,
  });
  return [
    { service: Health, impl: health as ServiceImpl<DescService> },
    // The error detail messages are described too, so that clients can decode them.
    ...createReflectionServices([...business.map((s) => s.service), Health], [file_google_rpc_error_details]),
  ];
}

/**
 * Builds the Fastify app: REST /v2 and /admin/v1, Connect, gRPC and gRPC-Web on one HTTP/1.1 +
 * h2c server, the OpenAPI document and docs page, the operator console, and the health probes. It never listens; main (or a test) does.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const loggerOpt = deps.logger ?? false;
  const isInstance = typeof loggerOpt === "object" && loggerOpt !== null && "child" in loggerOpt;
  const limits = deps.config.connections ?? DEFAULT_CONNECTION_LIMITS;
  const ops = createObservability({
    orm: deps.orm,
    clock: deps.clock ?? systemClock,
    metricsToken: deps.config.metricsToken,
    carrier: deps.carrier,
    retention: deps.retention,
    carriers: deps.router ? () => deps.router!.links() : undefined,
    limitCounters: deps.limitCounters,
    sendCounters: deps.sendCounters,
    // Made below, once the services are: read at scrape time.
    smppServer: () => app.smppServer?.stats(),
  });
  const app = fastify({
    // HTTP/1.1 and h2c on one port, with the connection limits and a graceful close (src/http/polyglot-server.ts).
    serverFactory: (handler) => createPolyglotServer(handler, { limits, bodyLimit: deps.config.bodyLimit }),
    ...ops.serverOptions,
    ...(isInstance ? { loggerInstance: loggerOpt as FastifyServerOptions["loggerInstance"] } : { logger: loggerOpt as FastifyServerOptions["logger"] }),
    // Request ids, the body limit, and a path Fastify cannot percent-decode answered in the documented body.
    ...httpServerOptions(deps.config.bodyLimit),
    // So is a request Node's parser refuses (bad method or header line, too slow, headers too large).
    clientErrorHandler: createClientErrorHandler(limits),
    // close(): idle connections go at once, busy ones after their answer; h2 sessions get GOAWAY.
    forceCloseConnections: "idle",
  });
  // Before any other plugin: what happens to every request before it reaches a method.
  await app.register(httpLayer(deps.config.bodyLimit));
  await app.register(ops.plugin);
  // One cache for the edge (reads it) and the operator API (evicts an account it changed).
  const accounts = createAccountCache();
  const services = createServices(deps, accounts);
  const operational = createOperationalServices(deps.orm, services, deps.limits);
  // The console's signed-in operators, in this process's memory (src/console/console-sessions.ts).
  const consoleSessions = createConsoleSessions({ clock: deps.clock ?? systemClock });
  const edgeDeps: EdgeDeps = {
    orm: deps.orm,
    operatorSessions: consoleSessions,
    adminToken: deps.config.adminToken,
    openServices: new Set(operational.map((s) => s.service.typeName)),
    accounts,
    // In this process's memory, like the send rate: N API processes allow N times the failures.
    failures: createAuthFailureGuard(deps.config.authFailures ?? DEFAULT_AUTH_FAILURE_LIMITS, deps.clock ?? systemClock),
  };

  if (deps.config.smppServer) {
    // The served MessagingService itself: a submit_sm is the SendMessage REST calls (the one send pipeline).
    const messaging = services.find((s) => s.service.typeName === MessagingService.typeName)!.impl as ServiceImpl<typeof MessagingService>;
    const smpp = createSmppServer({
      orm: deps.orm,
      clock: deps.clock ?? systemClock,
      messaging,
      failures: edgeDeps.failures,
      config: deps.config.smppServer,
      host: deps.config.host,
      log: app.log,
    });
    app.decorate("smppServer", smpp);
    // Before the HTTP port closes: binds end cleanly (answered, unbound) while the database is there.
    app.addHook("preClose", () => smpp.close());
  }

  const interceptors = createInterceptors(edgeDeps, ops.interceptor);
  const jsonOptions = { ignoreUnknownFields: true, alwaysEmitImplicit: true };
  let rpcHandlers: UniversalHandler[] = [];
  const limitGate = bodyLimitGate(deps.config.bodyLimit);
  // The plugin's options, read back by the unary gRPC fast path once the plugin has completed them.
  const connectOptions: Parameters<typeof fastifyConnectPlugin>[1] = {
    routes: (router) => {
      // JSON requests by REST's rules: strict UTF-8, UTF-8 only, the one integer rule (src/rpc/rpc-json.ts).
      const specs = [...services, ...operational].flatMap((s) => serviceWithJsonRules(router, s.service, s.impl, jsonOptions));
      // The layers around each handler, in their order (src/rpc/handler-wrappers.ts).
      wrapRpcHandlers(router.handlers, rpcHandlerWrappers({ specs, connectOptions, bodyLimit: deps.config.bodyLimit }));
      rpcHandlers = router.handlers;
    },
    // The shared reason for call-complete aborts, then the declared body size.
    requestGate: (ctx) => {
      shareCallCompleteReason(ctx);
      limitGate(ctx);
    },
    // Decompressed messages too (the wrapper above counts the bytes as sent).
    readMaxBytes: deps.config.bodyLimit,
    // markRequestRead first: Connect has read the message (src/rpc/rpc-read-errors.ts).
    interceptors: [markRequestRead, ...interceptors],
    contextValues: ops.rpcContextValues,
    jsonOptions,
    shutdownTimeoutMs: 5000,
  };
  await app.register(fastifyConnectPlugin, connectOptions);
  // gRPC over h2c: the same handlers on the native HTTP/2 streams, without Node's compatibility
  // objects and Fastify routing in between (src/rpc/grpc-streams.ts).
  (app.server as PolyglotServer).serveStreams(grpcStreamHandler({ handlers: rpcHandlers, log: app.log, startCall: ops.startCall }));
  await app.register(restPlugin, {
    services,
    bodyLimit: deps.config.bodyLimit,
    contextValues: ops.restContextValues,
    interceptors,
    serverTiming: deps.config.serverTiming,
  });

  await app.register(apiDocsPlugin, { services: services.map((s) => s.service) });
  await app.register(consolePlugin, { adminToken: deps.config.adminToken, sessions: consoleSessions, failures: edgeDeps.failures, dir: deps.consoleDir });
  if (deps.carrier?.routes) await app.register(deps.carrier.routes);

  app.get("/healthz", async () => ({ Status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    // Not ready while any store a send needs does not answer, naming it ("database unavailable", "redis unavailable", both).
    const unready = await unreadyStores(deps.orm, deps.limits);
    return reply.code(unready.length === 0 ? 200 : 503).send({ Status: unready.length === 0 ? "ready" : `${unready.join(" and ")} unavailable` });
  });
  return app;
}
