/**
 * grpc.health.v1.Health: SERVING while the database answers, NOT_SERVING when it does not,
 * NOT_FOUND for a service name the server does not serve; Watch reports changes. Called through
 * a real Connect client on an in-memory transport, on a real database (and on an unreachable
 * PostgreSQL for NOT_SERVING); then over gRPC on a listening app, with no credentials.
 */
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { Code, ConnectError, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { MikroORM } from "@mikro-orm/sql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { Health, HealthCheckResponse_ServingStatus as S } from "../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1Alpha } from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { createOperationalServices, createServices } from "../../src/app.js";
import { createOrm } from "../../src/db/orm.js";
import { entities } from "../../src/entities.js";
import { createHealthService } from "../../src/rpc/health.js";
import { restRoutes } from "../../src/rest/rest-routes.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "../support/harness.js";

const SERVICES = ["switchboard.v2.MessagingService", "switchboard.v2.AddressService", "switchboard.v2.NumberService", "switchboard.admin.v1.AdminService"];

let db: TestOrm;
let down: MikroORM;

function healthClient(orm: MikroORM, watchIntervalMs = 50): Client<typeof Health> {
  const impl = createHealthService({ orm, services: SERVICES, watchIntervalMs });
  return createClient(
    Health,
    createRouterTransport(({ service }) => service(Health, impl)),
  );
}

async function checkError(client: Client<typeof Health>, service: string): Promise<ConnectError> {
  try {
    await client.check({ service });
  } catch (e) {
    expect(e).toBeInstanceOf(ConnectError);
    return e as ConnectError;
  }
  throw new Error("Check succeeded but an error was expected");
}

beforeAll(async () => {
  db = await createTestOrm();
  // Nothing listens on port 1: the same ORM a server gets when its database is down.
  down = await createOrm({ entities, databaseUrl: "postgres://postgres@127.0.0.1:1/postgres" });
});

afterAll(async () => {
  await down?.close(true);
  await db?.close();
});

describe(`Health.Check and List (${dbKind()})`, () => {
  it('"" and every served service are SERVING while the database answers', async () => {
    const client = healthClient(db.orm);
    for (const service of ["", ...SERVICES]) expect((await client.check({ service })).status, service).toBe(S.SERVING);
    const list = await client.list({});
    expect(Object.keys(list.statuses).sort()).toEqual(["", ...SERVICES].sort());
    for (const [name, r] of Object.entries(list.statuses)) expect(r.status, name).toBe(S.SERVING);
  });

  it("NOT_SERVING when the database does not answer", async () => {
    const client = healthClient(down);
    for (const service of ["", "switchboard.v2.MessagingService"]) {
      expect((await client.check({ service })).status, service).toBe(S.NOT_SERVING);
    }
    const list = await client.list({});
    expect(Object.values(list.statuses).map((r) => r.status)).toEqual(Array(SERVICES.length + 1).fill(S.NOT_SERVING));
  });

  it("an unknown service name is NOT_FOUND, with the NotFound ErrorInfo", async () => {
    const client = healthClient(db.orm);
    for (const name of ["switchboard.v2.Nope", "MessagingService", "grpc.health.v1.Health"]) {
      const err = await checkError(client, name);
      expect(Code[err.code], name).toBe("NotFound");
      expect(err.rawMessage).toBe(`Service ${JSON.stringify(name)} is not served here.`);
      expect(err.findDetails(ErrorInfoSchema).map((i) => i.reason)).toEqual(["NotFound"]);
    }
  });
});

describe(`Health.Watch (${dbKind()})`, () => {
  /** Reads the first `n` messages of a Watch, then ends the call. */
  async function firstMessages(client: Client<typeof Health>, service: string, n: number, onMessage?: (i: number) => Promise<void>) {
    const abort = new AbortController();
    const seen: S[] = [];
    try {
      for await (const r of client.watch({ service }, { signal: abort.signal })) {
        seen.push(r.status);
        if (seen.length === n) break;
        await onMessage?.(seen.length);
      }
    } finally {
      abort.abort();
    }
    return seen;
  }

  it("sends the current status at once: SERVING, or NOT_SERVING when the database does not answer", async () => {
    expect(await firstMessages(healthClient(db.orm), "", 1)).toEqual([S.SERVING]);
    expect(await firstMessages(healthClient(down), "switchboard.v2.NumberService", 1)).toEqual([S.NOT_SERVING]);
  });

  it("sends nothing more while the status holds, and the stream stays open", async () => {
    for (const service of ["switchboard.v2.MessagingService", "switchboard.v2.Nope"]) {
      const abort = new AbortController();
      const stream = healthClient(db.orm, 20).watch({ service }, { signal: abort.signal })[Symbol.asyncIterator]();
      const first = await stream.next();
      expect(first.done).toBe(false);
      // An unknown name is not an error for Watch: SERVICE_UNKNOWN, and the call stays open.
      expect(first.value.status, service).toBe(service.endsWith("Nope") ? S.SERVICE_UNKNOWN : S.SERVING);
      const next = stream.next();
      const outcome = await Promise.race([next.then(() => "message or end"), new Promise((done) => setTimeout(done, 500, "still open"))]);
      expect(outcome, service).toBe("still open");
      abort.abort();
      await next.catch(() => undefined);
    }
  });

  // A real outage: the ORM reaches PostgreSQL through a TCP relay the test cuts and restores.
  it.runIf(dbKind() === "postgres")("sends each change: SERVING, NOT_SERVING when the database goes away, SERVING when it is back", async () => {
    const server = new URL(process.env.DATABASE_URL!);
    const relay = await startRelay(server.hostname, Number(server.port || 5432));
    const url = new URL(server);
    url.host = `127.0.0.1:${relay.port}`;
    const orm = await createOrm({ entities, databaseUrl: url.toString(), poolMax: 2 });
    try {
      const seen = await firstMessages(healthClient(orm, 100), "switchboard.v2.MessagingService", 3, async (i) => {
        if (i === 1) await relay.cut();
        if (i === 2) await relay.restore();
      });
      expect(seen).toEqual([S.SERVING, S.NOT_SERVING, S.SERVING]);
    } finally {
      await relay.cut();
      await orm.close(true);
    }
  });
});

/** A TCP relay to host:port on a fixed local port that can be cut (every connection dropped) and restored. */
async function startRelay(host: string, port: number) {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  const listen = (at: number) =>
    new Promise<number>((done, fail) => {
      server = createServer((client) => {
        const upstream = connect(port, host);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on("close", () => sockets.delete(s));
          s.on("error", () => s.destroy());
        }
        client.pipe(upstream).pipe(client);
        client.on("close", () => upstream.destroy());
        upstream.on("close", () => client.destroy());
      });
      server.once("error", fail);
      server.listen(at, "127.0.0.1", () => done((server!.address() as AddressInfo).port));
    });
  const local = await listen(0);
  return {
    port: local,
    async cut() {
      const s = server;
      server = undefined;
      for (const sock of sockets) sock.destroy();
      if (s) await new Promise((done) => s.close(done));
    },
    async restore() {
      await listen(local);
    },
  };
}

describe("operational services on the app", () => {
  let t: TestApp;
  let baseUrl: string;

  beforeAll(async () => {
    t = await createTestApp({ db });
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await t?.close();
  });

  it("Check over gRPC needs no credentials, and wrong ones are ignored", async () => {
    const client = createClient(Health, createGrpcTransport({ baseUrl }));
    expect((await client.check({ service: "" })).status).toBe(S.SERVING);
    expect((await client.check({ service: "switchboard.admin.v1.AdminService" })).status).toBe(S.SERVING);
    const wrong = { headers: { authorization: "Basic QUNub3BlOm5vcGU=" } };
    expect((await client.check({ service: "switchboard.v2.AddressService" }, wrong)).status).toBe(S.SERVING);
  });

  it("is served over Connect JSON on HTTP/1.1 too, without credentials", async () => {
    const res = await fetch(`${baseUrl}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ service: "switchboard.v2.MessagingService" }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "SERVING" });
  });

  it("health and reflection have no REST routes; the business services keep theirs", async () => {
    const services = createServices({
      orm: db.orm,
      config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: false, noAlphaCountries: new Set(), bodyLimit: 1024 },
    });
    const operational = createOperationalServices(db.orm, services);
    expect(operational.map((s) => s.service.typeName)).toEqual([Health.typeName, ServerReflection.typeName, ServerReflectionV1Alpha.typeName]);
    expect(restRoutes(operational.map((s) => s.service))).toEqual([]);
    expect(restRoutes(services.map((s) => s.service)).length).toBeGreaterThan(10);
    const res = await fetch(`${baseUrl}/v2/grpc.health.v1.Health/Check`);
    expect(res.status).toBe(404);
  });
});
