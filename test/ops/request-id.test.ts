/**
 * Request ids and the completion log line, on a real listening port: X-Request-Id is taken from a
 * sane client header or generated, and echoed on REST, Connect, gRPC and gRPC-Web answers (errors
 * included); every request gets one JSON completion line with the id, the route template, status,
 * duration, protocol and AccountSid, and no credential. The logger is the service's own
 * (createLogger), writing into memory instead of stdout.
 */
import type { AddressInfo } from "node:net";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { buildApp } from "../../src/app.js";
import { ManualClock } from "../../src/common/clock.js";
import { createLogger } from "../../src/common/logger.js";
import { createTestOrm, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, type Tenant } from "../support/harness.js";

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let db: TestOrm;
let app: FastifyInstance;
let baseUrl: string;
let tenant: Tenant;
let sessions: Http2SessionManager;
const lines: string[] = [];

beforeAll(async () => {
  db = await createTestOrm();
  const log = createLogger(
    { logLevel: "trace", adminToken: ADMIN_TOKEN, databaseUrl: "memory://", smtpUrl: undefined },
    { destination: { write: (s: string) => void lines.push(s) } },
  );
  app = await buildApp({
    orm: db.orm,
    clock: new ManualClock(new Date("2026-11-22T12:00:00Z")),
    logger: log,
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: false, noAlphaCountries: new Set(["US", "CA"]), bodyLimit: 1024 * 1024 },
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  sessions = new Http2SessionManager(baseUrl);
  tenant = await createTenant(app);
});

afterAll(async () => {
  sessions?.abort();
  await app?.close();
  await db?.close();
});

/** The parsed log lines that belong to one request id. */
function linesOf(requestId: string): Record<string, unknown>[] {
  return lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.requestId === requestId);
}

/** Waits for the completion line of a request (it is written when the response has finished). */
async function completion(requestId: string): Promise<Record<string, unknown>> {
  for (let i = 0; i < 100; i++) {
    const done = linesOf(requestId).filter((l) => l.msg === "request completed");
    if (done.length > 0) {
      expect(done, "one completion line per request").toHaveLength(1);
      return done[0]!;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no completion line for ${requestId}`);
}

describe("X-Request-Id on REST", () => {
  it("a sane client id is echoed and used in the log; without one a UUID is generated", async () => {
    const given = await fetch(`${baseUrl}/v2/Properties/${tenant.propertySid}/Messages`, {
      method: "POST",
      headers: { authorization: tenant.auth, "content-type": "application/json", "x-request-id": "client-req.42:a/b+c=d@e~f_g" },
      body: JSON.stringify({ From: "Acme", To: "+447911000001", Text: "hello" }),
    });
    expect(given.status).toBe(200);
    expect(given.headers.get("x-request-id")).toBe("client-req.42:a/b+c=d@e~f_g");
    const sid = ((await given.json()) as { MessageSid: string }).MessageSid;

    const line = await completion("client-req.42:a/b+c=d@e~f_g");
    expect(line).toMatchObject({
      level: "info",
      name: "switchboard",
      method: "POST",
      route: "/v2/Properties/:property_sid/Messages",
      status: 200,
      protocol: "rest",
      accountSid: tenant.accountSid,
      durationMs: expect.any(Number),
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(JSON.stringify(line)).not.toContain(tenant.propertySid);

    const generated = await fetch(`${baseUrl}/v2/Messages/${sid}`, { headers: { authorization: tenant.auth } });
    expect(generated.status).toBe(200);
    const id = generated.headers.get("x-request-id")!;
    expect(id).toMatch(UUID_RE);
    expect(await completion(id)).toMatchObject({ method: "GET", route: "/v2/Messages/:message_sid", status: 200, accountSid: tenant.accountSid });
  });

  it("an id that is too long, empty or has other characters is replaced by a UUID", async () => {
    for (const bad of ["x".repeat(129), "has space", "semi;colon", "", 'quote"d', "ümlaut"]) {
      const res = await fetch(`${baseUrl}/healthz`, { headers: { "x-request-id": bad } });
      expect(res.status).toBe(200);
      const echoed = res.headers.get("x-request-id");
      expect(echoed, JSON.stringify(bad)).toMatch(UUID_RE);
    }
    const longest = "y".repeat(128);
    const ok = await fetch(`${baseUrl}/healthz`, { headers: { "x-request-id": longest } });
    expect(ok.headers.get("x-request-id")).toBe(longest);
  });

  it("errors carry it too: 401, 404 (known prefix and unknown path), 405", async () => {
    const cases: [string, RequestInit, number][] = [
      [`/v2/Messages/MG${"0".repeat(30)}`, {}, 401],
      [`/v2/Messages/MG${"0".repeat(30)}`, { headers: { authorization: tenant.auth } }, 404],
      ["/v2/NoSuchThing", { headers: { authorization: tenant.auth } }, 404],
      ["/elsewhere", {}, 404],
      [`/v2/Messages/MG${"0".repeat(30)}`, { method: "PUT", headers: { authorization: tenant.auth } }, 405],
    ];
    let n = 0;
    for (const [path, init, status] of cases) {
      const id = `err-${++n}`;
      const res = await fetch(`${baseUrl}${path}`, { ...init, headers: { ...(init.headers as Record<string, string>), "x-request-id": id } });
      expect(res.status, path).toBe(status);
      expect(res.headers.get("x-request-id"), path).toBe(id);
      expect((await completion(id)).status).toBe(status);
    }
  });
});

describe("X-Request-Id on RPC", () => {
  const clientsFor = () =>
    ({
      connect: createClient(MessagingService, createConnectTransport({ baseUrl, httpVersion: "1.1" })),
      grpc: createClient(MessagingService, createGrpcTransport({ baseUrl, sessionManager: sessions })),
      "grpc-web": createClient(MessagingService, createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })),
    }) satisfies Record<string, Client<typeof MessagingService>>;

  it("is echoed in the response headers of Connect, gRPC and gRPC-Web calls, and the completion line names the protocol and account", async () => {
    const clients = clientsFor();
    for (const [protocol, client] of Object.entries(clients)) {
      const id = `rpc-${protocol}`;
      let header: Headers | undefined;
      const msg = await client.sendMessage(
        { propertySid: tenant.propertySid, from: "Acme", to: "+447911000002", text: `over ${protocol}` },
        { headers: { authorization: tenant.auth, "x-request-id": id }, onHeader: (h) => (header = h) },
      );
      expect(msg.messageSid).toMatch(/^MG/);
      expect(header?.get("x-request-id"), protocol).toBe(id);
      expect(await completion(id)).toMatchObject({
        method: "POST",
        route: "/switchboard.v2.MessagingService/SendMessage",
        status: 200,
        protocol,
        accountSid: tenant.accountSid,
      });
    }
  });

  it("a failed call carries it too, and its line has the RPC code and, for gRPC, the status that code stands for", async () => {
    const clients = clientsFor();
    for (const [protocol, client] of Object.entries(clients)) {
      const id = `rpc-denied-${protocol}`;
      let header: Headers | undefined;
      const err = await client.getMessage({ messageSid: `MG${"0".repeat(30)}` }, { headers: { "x-request-id": id }, onHeader: (h) => (header = h) }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code, protocol).toBe(Code.Unauthenticated);
      // Connect puts an error's headers on the error; gRPC and gRPC-Web send them as response headers.
      expect(header?.get("x-request-id") ?? err?.metadata.get("x-request-id"), protocol).toBe(id);
      const line = await completion(id);
      expect(line).toMatchObject({ route: "/switchboard.v2.MessagingService/GetMessage", status: 401, protocol, rpcCode: "unauthenticated" });
      expect(line.accountSid).toBeUndefined();
    }
    const metrics = await (await fetch(`${baseUrl}/metrics`)).text();
    for (const protocol of ["connect", "grpc", "grpc-web"]) {
      expect(metrics).toContain(
        `switchboard_http_requests_total{method="POST",route="/switchboard.v2.MessagingService/GetMessage",status="401",protocol="${protocol}"} 1`,
      );
      expect(metrics).toContain(
        `switchboard_http_requests_total{method="POST",route="/switchboard.v2.MessagingService/SendMessage",status="200",protocol="${protocol}"} 1`,
      );
    }
  });
});

describe("the log", () => {
  it("is JSON lines; request-scoped lines carry the request id; no credential appears", async () => {
    expect(lines.length).toBeGreaterThan(10);
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const l of parsed) {
      if (["request received", "request completed"].includes(String(l.msg))) expect(l.requestId, JSON.stringify(l)).toEqual(expect.any(String));
    }
    const all = lines.join("");
    expect(all).not.toContain(tenant.token);
    expect(all).not.toContain(tenant.auth.slice("Basic ".length));
    expect(all).not.toContain(tenant.webhookSecret);
    expect(all).not.toContain(ADMIN_TOKEN);
    expect(all.toLowerCase()).not.toContain("authorization");
  });
});
