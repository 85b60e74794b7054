import type { DescService } from "@bufbuild/protobuf";
import type { Interceptor, ServiceImpl } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { createServer } from "@httptoolkit/httpolyglot";
import type { MikroORM } from "@mikro-orm/sql";
import { fastify, type FastifyInstance, type FastifyServerOptions } from "fastify";
import { AdminService } from "../gen/switchboard/admin/v1/admin_pb.js";
import { AddressService } from "../gen/switchboard/v2/addresses_pb.js";
import { MessagingService } from "../gen/switchboard/v2/messaging_pb.js";
import { NumberService } from "../gen/switchboard/v2/numbers_pb.js";
import { authenticateCall, type EdgeDeps } from "./accounts/auth.js";
import { createAddressService } from "./addresses/address-service.js";
import { createAdminService } from "./admin/admin-service.js";
import type { Carrier } from "./carriers/carrier.js";
import type { Clock } from "./common/clock.js";
import { systemClock } from "./common/clock.js";
import { rejectNulStrings } from "./common/nul-guard.js";
import type { Config } from "./config.js";
import { isDatabaseReady } from "./db/orm.js";
import { createMessagingService } from "./messaging/messaging-service.js";
import { createNumberService } from "./numbers/number-service.js";
import { restPlugin } from "./transport/rest.js";

/** Everything buildApp needs; nothing is read from globals. */
export interface AppDeps {
  orm: MikroORM;
  config: Pick<Config, "adminToken" | "webhookAllowPrivate" | "noAlphaCountries" | "bodyLimit">;
  clock?: Clock;
  /** The carrier, for the simulator's operator endpoints. */
  carrier?: Carrier;
  /** Called after a message is queued, to wake the dispatcher. */
  onQueued?: () => void;
  /** Fastify logger option: false in tests, a pino instance or options in main. */
  logger?: FastifyServerOptions["logger"] | FastifyServerOptions["loggerInstance"];
}

/** One served service: its descriptor and the single implementation every transport calls. */
export interface ServedService {
  service: DescService;
  impl: ServiceImpl<DescService>;
}

/** Builds the service implementations from their dependencies. */
export function createServices(deps: AppDeps): ServedService[] {
  const clock = deps.clock ?? systemClock;
  // Every transport calls these: a request string with U+0000 is a 400 here, not a database 500.
  const served = (service: DescService, impl: object) => ({ service, impl: rejectNulStrings(service, impl) as ServiceImpl<DescService> });
  return [
    served(MessagingService, createMessagingService({ clock, ...deps.config, onQueued: deps.onQueued })),
    served(AddressService, createAddressService({ clock })),
    served(NumberService, createNumberService()),
    served(AdminService, createAdminService({ clock, carrier: deps.carrier })),
  ];
}

/**
 * Builds the Fastify app: REST /v2 and /admin/v1, Connect, gRPC and gRPC-Web on one HTTP/1.1 +
 * h2c server, and the health probes. It never listens; main (or a test) does.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const loggerOpt = deps.logger ?? false;
  const isInstance = typeof loggerOpt === "object" && loggerOpt !== null && "child" in loggerOpt;
  const app = fastify({
    // httpolyglot sniffs each connection: HTTP/1.1 for curl and browsers, h2c for gRPC clients.
    // It is a net.Server, so Fastify cannot see its h2c sessions: without closeHttp2Sessions (which
    // Fastify calls on close) an idle gRPC client session held close() open for its 15-minute idle timeout.
    serverFactory: (handler) => {
      const server = createServer(handler);
      const sessions = new Set<import("node:http2").Http2Session>();
      server.on("session", (s: import("node:http2").Http2Session) => {
        sessions.add(s);
        s.once("close", () => sessions.delete(s));
      });
      const closeHttp2Sessions = () => sessions.forEach((s) => s.close());
      return Object.assign(server, { closeHttp2Sessions }) as unknown as import("node:http").Server;
    },
    ...(isInstance ? { loggerInstance: loggerOpt as FastifyServerOptions["loggerInstance"] } : { logger: loggerOpt as FastifyServerOptions["logger"] }),
    bodyLimit: deps.config.bodyLimit,
    // Idle HTTP/2 sessions would otherwise hold close() open.
    forceCloseConnections: true,
  });
  const services = createServices(deps);
  const edgeDeps: EdgeDeps = { orm: deps.orm, adminToken: deps.config.adminToken };

  // The RPC edge: the same authentication the REST edge runs, once per call.
  const edge: Interceptor = (next) => async (req) => {
    await authenticateCall(edgeDeps, { service: req.service, header: req.header, values: req.contextValues });
    return next(req);
  };
  await app.register(fastifyConnectPlugin, {
    routes: (router) => {
      for (const s of services) router.service(s.service, s.impl);
    },
    interceptors: [edge],
    jsonOptions: { ignoreUnknownFields: true, alwaysEmitImplicit: true },
    shutdownTimeoutMs: 5000,
  });
  await app.register(restPlugin, {
    services,
    bodyLimit: deps.config.bodyLimit,
    edge: (ctx) => authenticateCall(edgeDeps, { service: ctx.service, header: ctx.requestHeader, values: ctx.values }),
  });

  if (deps.carrier?.routes) await app.register(deps.carrier.routes);

  app.get("/healthz", async () => ({ Status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    const ready = await isDatabaseReady(deps.orm);
    return reply.code(ready ? 200 : 503).send({ Status: ready ? "ready" : "database unavailable" });
  });
  return app;
}
