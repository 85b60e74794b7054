/**
 * gRPC on the native HTTP/2 streams of the one port (src/rpc/grpc-streams.ts): a gRPC call
 * is served by Connect without Fastify, every other h2 request still by Fastify; a client that
 * goes away mid-body is reported as aborted (499).
 */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../support/harness.js";

const GRPC_PATH = "/grpc.health.v1.Health/Check";

let t: TestApp;
let baseUrl: string;

beforeAll(async () => {
  t = await createTestApp();
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await t?.close();
});

interface Answer {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body: Buffer;
}

function exchange(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Uint8Array): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined });
    const answer: Answer = { headers: {}, trailers: {}, body: Buffer.alloc(0) };
    const chunks: Buffer[] = [];
    stream.on("response", (h) => (answer.headers = h));
    stream.on("trailers", (h) => (answer.trailers = h));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", reject);
    stream.on("close", () => resolve({ ...answer, body: Buffer.concat(chunks) }));
    if (body !== undefined) stream.end(body);
  });
}

/** An empty gRPC request message: the envelope's 5-byte header with length 0. */
const EMPTY_MESSAGE = new Uint8Array(5);

async function metricsText(): Promise<string> {
  return (await t.app.inject({ method: "GET", url: "/metrics" })).body;
}

describe("gRPC on HTTP/2 streams", () => {
  it("a gRPC call is answered by Connect with its status in the trailers, the request id echoed, and counted", async () => {
    const session = http2.connect(baseUrl);
    try {
      const a = await exchange(
        session,
        { ":method": "POST", ":path": GRPC_PATH, "content-type": "application/grpc", te: "trailers", "x-request-id": "h2-check-1" },
        EMPTY_MESSAGE,
      );
      expect(a.headers[":status"]).toBe(200);
      expect(a.headers["content-type"]).toBe("application/grpc+proto");
      expect(a.headers["x-request-id"]).toBe("h2-check-1");
      expect(a.trailers["grpc-status"]).toBe("0");
      expect(a.body.byteLength).toBeGreaterThan(5);
      // Without an id of its own the call gets a fresh UUID.
      const b = await exchange(session, { ":method": "POST", ":path": GRPC_PATH, "content-type": "application/grpc", te: "trailers" }, EMPTY_MESSAGE);
      expect(b.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      session.close();
    }
    expect(await metricsText()).toMatch(
      /switchboard_http_requests_total\{method="POST",route="\/grpc\.health\.v1\.Health\/Check",status="200",protocol="grpc"\} [1-9]/,
    );
  });

  it("other h2 requests are Fastify's as before: REST, Connect JSON, unknown paths", async () => {
    const session = http2.connect(baseUrl);
    try {
      const healthz = await exchange(session, { ":method": "GET", ":path": "/healthz", "x-request-id": "h2-healthz" });
      expect([healthz.headers[":status"], healthz.headers["x-request-id"], JSON.parse(healthz.body.toString())]).toEqual([200, "h2-healthz", { Status: "ok" }]);
      const connect = await exchange(session, { ":method": "POST", ":path": GRPC_PATH, "content-type": "application/json" }, Buffer.from("{}"));
      expect([connect.headers[":status"], JSON.parse(connect.body.toString()).status]).toEqual([200, "SERVING"]);
      const missing = await exchange(
        session,
        { ":method": "POST", ":path": "/grpc.health.v1.Health/Nope", "content-type": "application/grpc", te: "trailers" },
        EMPTY_MESSAGE,
      );
      expect(missing.headers[":status"]).toBe(404);
      expect(JSON.parse(missing.body.toString()).ResponseStatus.ErrorCode).toBe("NotFound");
    } finally {
      session.close();
    }
  });

  it("a client that goes away before its body ends is counted as aborted (499); the server stays usable", async () => {
    const session = http2.connect(baseUrl);
    const stream = session.request({ ":method": "POST", ":path": GRPC_PATH, "content-type": "application/grpc", te: "trailers" }, { endStream: false });
    stream.on("error", () => undefined);
    session.on("error", () => undefined);
    stream.write(EMPTY_MESSAGE.subarray(0, 2));
    await new Promise((r) => setTimeout(r, 200));
    // Its connection is cut with the request half sent (a stream's own close would end the body first).
    session.destroy();
    const aborted = /switchboard_http_requests_total\{method="POST",route="\/grpc\.health\.v1\.Health\/Check",status="499",protocol="grpc"\} 1/;
    for (let i = 0; i < 100 && !aborted.test(await metricsText()); i++) await new Promise((r) => setTimeout(r, 20));
    expect(await metricsText()).toMatch(aborted);
    const again = http2.connect(baseUrl);
    try {
      const a = await exchange(again, { ":method": "POST", ":path": GRPC_PATH, "content-type": "application/grpc", te: "trailers" }, EMPTY_MESSAGE);
      expect(a.trailers["grpc-status"]).toBe("0");
    } finally {
      again.close();
    }
  });
});
