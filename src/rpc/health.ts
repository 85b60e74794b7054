/**
 * The standard gRPC health service (grpc.health.v1.Health), for load balancers, Kubernetes gRPC
 * probes and grpc_health_probe. Every service Switchboard serves needs the database (and sends
 * the shared limits' Redis, when they are there), so the server ("") and each service are SERVING
 * exactly when what /readyz looks at answers.
 */
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { MikroORM } from "@mikro-orm/sql";
import { setTimeout as sleep } from "node:timers/promises";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthCheckResponseSchema,
  type HealthCheckResponse,
} from "../../gen/grpc/health/v1/health_pb.js";
import { apiError } from "../common/errors.js";
import { isDatabaseReady } from "../db/orm.js";

/** What the health service needs. */
export interface HealthDeps {
  orm: MikroORM;
  /** Fully-qualified names of the services reported on, besides "" (the whole server). */
  services: readonly string[];
  /** How often Watch looks at the database again; default 5 s. */
  watchIntervalMs?: number;
  /** Whether the stores the services need answer (the app's readiness); default: the database answers. */
  ready?: () => Promise<boolean>;
}

/** Builds the grpc.health.v1.Health implementation. */
export function createHealthService(deps: HealthDeps): ServiceImpl<typeof Health> {
  const names = new Set(["", ...deps.services]);
  const interval = deps.watchIntervalMs ?? 5000;
  const ready = deps.ready ?? (() => isDatabaseReady(deps.orm));
  const current = async () => ((await ready()) ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
  const response = (status: ServingStatus): HealthCheckResponse => create(HealthCheckResponseSchema, { status });
  const unknown = (service: string) => apiError("NotFound", `Service ${JSON.stringify(service)} is not served here.`);

  return {
    async check(req) {
      if (!names.has(req.service)) throw unknown(req.service);
      return response(await current());
    },

    async list() {
      const status = await current();
      return { statuses: Object.fromEntries([...names].map((n) => [n, response(status)])) };
    },

    async *watch(req, ctx) {
      // An unknown name is not an error for Watch: SERVICE_UNKNOWN, and the stream stays open.
      let last = names.has(req.service) ? await current() : ServingStatus.SERVICE_UNKNOWN;
      yield response(last);
      while (!ctx.signal.aborted) {
        try {
          await sleep(interval, undefined, { signal: ctx.signal });
        } catch {
          return; // the client went away, or the server is shutting down
        }
        if (last === ServingStatus.SERVICE_UNKNOWN) continue;
        const status = await current();
        if (status !== last) yield response((last = status));
      }
    },
  };
}
