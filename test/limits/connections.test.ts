/**
 * What one client connection may hold, on the real listening port. HTTP/2 (h2c): the server
 * advertises MAX_STREAMS_PER_CONNECTION; streams a client opens past it before it has seen the
 * setting are refused (REFUSED_STREAM), and a client that honours it queues the rest. HTTP/1.1:
 * pipelined requests run one at a time and are answered in order; past MAX_PIPELINED_REQUESTS
 * the answer is 429 and the connection closes; oversized headers are 431; a client too slow to
 * send its headers or its body is cut off (408). After each, the server still answers.
 */
import http2 from "node:http2";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { buildApp } from "../../src/app.js";
import { ManualClock } from "../../src/common/clock.js";
import { DEFAULT_CONNECTION_LIMITS, loadConfig } from "../../src/config.js";
import type { ConnectionLimits } from "../../src/config.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN } from "../support/harness.js";

const LIMITS: ConnectionLimits = {
  maxStreamsPerConnection: 4,
  maxPipelinedRequests: 4,
  headersTimeoutMs: 500,
  requestTimeoutMs: 1000,
  maxHeaderBytes: 4096,
  idleTimeoutMs: 60_000,
};
const TIMEOUT_MESSAGE = `The request did not arrive in time: its headers must arrive within ${LIMITS.headersTimeoutMs} ms and the whole request within ${LIMITS.requestTimeoutMs} ms.`;
const GRPC_PATH = "/switchboard.admin.v1.AdminService/CreateAccount";

let db: TestOrm;
let app: FastifyInstance;
let port: number;
let baseUrl: string;
/** The test route's bookkeeping: requests started, and the most running at once. */
const slow = { started: [] as number[], running: 0, peak: 0 };

beforeAll(async () => {
  db = await createTestOrm();
  app = await buildApp({
    orm: db.orm,
    clock: new ManualClock(),
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: false, noAlphaCountries: new Set(), bodyLimit: 1024 * 1024, connections: LIMITS },
  });
  // A route that takes a while and counts how many of it run at once (test only).
  app.get<{ Querystring: { i: string; ms?: string } }>("/test/slow", async (req) => {
    slow.started.push(Number(req.query.i));
    slow.peak = Math.max(slow.peak, ++slow.running);
    await new Promise((r) => setTimeout(r, Number(req.query.ms ?? 30)));
    slow.running--;
    return { i: Number(req.query.i) };
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  port = (app.server.address() as AddressInfo).port;
  baseUrl = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await app?.close();
  await db?.close();
});

/** The server still answers on a new connection: HTTP/1.1 and gRPC over h2c. */
async function expectHealthy(): Promise<void> {
  const res = await fetch(`${baseUrl}/healthz`);
  expect(res.status).toBe(200);
  const sessions = new Http2SessionManager(baseUrl);
  try {
    const admin = createClient(AdminService, createGrpcTransport({ baseUrl, sessionManager: sessions }));
    const acc = await admin.createAccount({ name: "Healthy" }, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(acc.accountSid).toMatch(/^AC/);
  } finally {
    sessions.abort();
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 over a raw socket

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A raw connection: write bytes, read whole responses (Content-Length bodies), see it close. */
function rawConnection() {
  const socket = net.connect(port, "127.0.0.1");
  let buffer = Buffer.alloc(0);
  const responses: RawResponse[] = [];
  let closedAt: number | undefined;
  const waiters: (() => void)[] = [];
  const wake = () => waiters.splice(0).forEach((w) => w());
  socket.on("data", (d) => {
    buffer = Buffer.concat([buffer, d]);
    for (;;) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) break;
      const [statusLine, ...lines] = buffer.subarray(0, end).toString("latin1").split("\r\n");
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(":");
        headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
      }
      const length = Number(headers["content-length"] ?? 0);
      if (buffer.length < end + 4 + length) break;
      responses.push({ status: Number(statusLine.split(" ")[1]), headers, body: buffer.subarray(end + 4, end + 4 + length).toString("utf8") });
      buffer = buffer.subarray(end + 4 + length);
    }
    wake();
  });
  socket.on("close", () => {
    closedAt = Date.now();
    wake();
  });
  socket.on("error", () => undefined);
  const until = async (done: () => boolean, ms = 10_000) => {
    const deadline = Date.now() + ms;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out; got ${responses.length} responses, closed: ${closedAt !== undefined}`);
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 50);
      });
    }
  };
  return {
    socket,
    responses,
    closedAt: () => closedAt,
    write: (s: string) => socket.write(s),
    responsesCount: (n: number) => until(() => responses.length >= n),
    closed: () => until(() => closedAt !== undefined),
  };
}

/**
 * The documented error answer of a refused HTTP/1.1 request: the ResponseStatus body (nothing
 * else), its JSON content type, an X-Request-Id, and `Connection: close`.
 */
function expectDocumentedRefusal(r: RawResponse, status: number, errorCode: string, message: string): void {
  expect(r.status).toBe(status);
  expect(r.headers["content-type"]).toBe("application/json; charset=utf-8");
  expect(r.headers["x-request-id"]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  expect(r.headers.connection).toBe("close");
  expect(JSON.parse(r.body)).toStrictEqual({ ResponseStatus: { ErrorCode: errorCode, Message: message, Errors: [] } });
}

const slowGet = (i: number, ms = 30) => `GET /test/slow?i=${i}&ms=${ms} HTTP/1.1\r\nHost: localhost\r\n\r\n`;

describe(`HTTP/1.1 connections (${dbKind()})`, () => {
  it("pipelined requests run one at a time and are answered in order; the connection stays open", async () => {
    slow.started = [];
    slow.peak = 0;
    const c = rawConnection();
    try {
      c.write([0, 1, 2, 3, 4].map((i) => slowGet(i)).join(""));
      await c.responsesCount(5);
      expect(c.responses.map((r) => [r.status, JSON.parse(r.body).i])).toEqual([
        [200, 0],
        [200, 1],
        [200, 2],
        [200, 3],
        [200, 4],
      ]);
      expect(slow.peak).toBe(1);
      c.write(slowGet(5));
      await c.responsesCount(6);
      expect(JSON.parse(c.responses[5].body).i).toBe(5);
      expect(c.closedAt()).toBeUndefined();
    } finally {
      c.socket.destroy();
    }
  });

  it("past MAX_PIPELINED_REQUESTS waiting, the answer is 429 with Connection: close, and nothing after it runs", async () => {
    slow.started = [];
    slow.peak = 0;
    const c = rawConnection();
    try {
      // One served and four waiting are allowed; the sixth is refused; the seventh and eighth never run.
      c.write([0, 1, 2, 3, 4, 5, 6, 7].map((i) => slowGet(i)).join(""));
      await c.closed();
      expect(c.responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
      expectDocumentedRefusal(
        c.responses[5],
        429,
        "RateLimited",
        "Too many pipelined requests on one connection: at most 4 may wait behind the one being served. This connection closes after this answer; send the rest on a new one.",
      );
      await new Promise((r) => setTimeout(r, 100));
      expect(slow.started).toEqual([0, 1, 2, 3, 4]);
      expect(slow.peak).toBe(1);
    } finally {
      c.socket.destroy();
    }
    await expectHealthy();
  });

  it("a request whose connection closed before its turn never runs", async () => {
    slow.started = [];
    const c = rawConnection();
    // The first takes 500 ms: the close has long reached the server when it ends.
    c.write([0, 1, 2].map((i) => slowGet(i, 500)).join(""));
    await new Promise((r) => setTimeout(r, 50));
    c.socket.destroy();
    await new Promise((r) => setTimeout(r, 800));
    expect(slow.started).toEqual([0]);
  });

  it("headers over MAX_HEADER_BYTES are 431; under it they are served", async () => {
    const big = (n: number) => `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${"b".repeat(n)}\r\n\r\n`;
    const ok = rawConnection();
    ok.write(big(3000));
    await ok.responsesCount(1);
    expect(ok.responses[0].status).toBe(200);
    ok.socket.destroy();

    const c = rawConnection();
    c.write(big(5000));
    await c.closed();
    expect(c.responses.map((r) => r.status)).toEqual([431]);
    expectDocumentedRefusal(c.responses[0], 431, "HeadersTooLarge", `The request headers are larger than the limit of ${LIMITS.maxHeaderBytes} bytes.`);
    await expectHealthy();
  });

  it("a client that trickles its headers is answered 408 and cut off after HEADERS_TIMEOUT_MS", async () => {
    const c = rawConnection();
    const started = Date.now();
    c.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\n");
    const drip = setInterval(() => c.write("X-Drip: 1\r\n"), 100);
    try {
      await c.closed();
    } finally {
      clearInterval(drip);
    }
    const took = c.closedAt()! - started;
    expect(c.responses.map((r) => r.status)).toEqual([408]);
    expectDocumentedRefusal(c.responses[0], 408, "RequestTimeout", TIMEOUT_MESSAGE);
    expect(took).toBeGreaterThanOrEqual(LIMITS.headersTimeoutMs - 50);
    expect(took).toBeLessThan(5000);
    await expectHealthy();
  });

  it("a client that stalls in its body is answered 408 and cut off after REQUEST_TIMEOUT_MS", async () => {
    const c = rawConnection();
    const started = Date.now();
    c.write(
      `POST /v2/Properties/PR${"0".repeat(30)}/Messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"To":`,
    );
    await c.closed();
    const took = c.closedAt()! - started;
    expect(c.responses.map((r) => r.status)).toEqual([408]);
    expectDocumentedRefusal(c.responses[0], 408, "RequestTimeout", TIMEOUT_MESSAGE);
    expect(took).toBeGreaterThanOrEqual(LIMITS.requestTimeoutMs - 50);
    expect(took).toBeLessThan(5000);
    await expectHealthy();
  });
});

describe(`HTTP/1.1 requests the parser refuses, before any route (${dbKind()})`, () => {
  const cases: { label: string; bytes: string; message: string }[] = [
    {
      label: "an unknown method token",
      bytes: "FOO /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
      message: "The request is not valid HTTP/1.1: the method is not one HTTP knows.",
    },
    {
      label: "a header line without a colon",
      bytes: "GET /healthz HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n",
      message: "The request is not valid HTTP/1.1: a header line is not `Name: value`.",
    },
    { label: "a broken HTTP version", bytes: "GET /healthz HTTP/9.Z\r\nHost: localhost\r\n\r\n", message: "" },
  ];
  for (const c of cases) {
    it(`${c.label}: 400 MalformedRequest in the documented body with X-Request-Id, then the connection closes`, async () => {
      const conn = rawConnection();
      conn.write(c.bytes);
      await conn.closed();
      expect(conn.responses).toHaveLength(1);
      const r = conn.responses[0];
      if (c.message === "") {
        // llhttp's own reason, after the same prefix.
        expect(JSON.parse(r.body).ResponseStatus.Message).toMatch(/^The request is not valid HTTP\/1\.1: .+\.$/);
        expectDocumentedRefusal(r, 400, "MalformedRequest", JSON.parse(r.body).ResponseStatus.Message);
      } else {
        expectDocumentedRefusal(r, 400, "MalformedRequest", c.message);
      }
      await expectHealthy();
    });
  }

  it("a refusal after an answer on the same connection comes after that answer, whole", async () => {
    const c = rawConnection();
    c.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\nFOO / HTTP/1.1\r\n\r\n");
    await c.closed();
    expect(c.responses.map((r) => r.status)).toEqual([200, 400]);
    expect(JSON.parse(c.responses[0].body)).toEqual({ Status: "ok" });
    expectDocumentedRefusal(c.responses[1], 400, "MalformedRequest", "The request is not valid HTTP/1.1: the method is not one HTTP knows.");
  });

  it("the pipelining 429 echoes the client's X-Request-Id", async () => {
    const c = rawConnection();
    try {
      const withId = (i: number) => `GET /test/slow?i=${i}&ms=30 HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: probe-${i}\r\n\r\n`;
      c.write([0, 1, 2, 3, 4, 5].map(withId).join(""));
      await c.closed();
      expect(c.responses.map((r) => [r.status, r.headers["x-request-id"]])).toEqual([0, 1, 2, 3, 4, 5].map((i) => [i < 5 ? 200 : 429, `probe-${i}`]));
    } finally {
      c.socket.destroy();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// HTTP/2 (h2c) with a raw node:http2 client

/** Opens a gRPC stream that stays open (no body sent yet); resolves how it ended. */
function openStream(session: http2.ClientHttp2Session) {
  const stream = session.request({ ":method": "POST", ":path": GRPC_PATH, "content-type": "application/grpc", te: "trailers" }, { endStream: false });
  const outcome = new Promise<{ status?: number; rstCode: number }>((resolve) => {
    let status: number | undefined;
    stream.on("response", (h) => (status = Number(h[":status"])));
    stream.on("error", () => undefined);
    stream.resume();
    stream.on("close", () => resolve({ status, rstCode: stream.rstCode ?? 0 }));
  });
  return { stream, outcome };
}

describe(`HTTP/2 streams per connection (${dbKind()})`, () => {
  it("the server advertises MAX_STREAMS_PER_CONNECTION", async () => {
    const session = http2.connect(baseUrl);
    try {
      const settings = await new Promise<http2.Settings>((r) => session.once("remoteSettings", r));
      expect(settings.maxConcurrentStreams).toBe(LIMITS.maxStreamsPerConnection);
      expect(settings.maxHeaderListSize).toBe(LIMITS.maxHeaderBytes);
    } finally {
      session.destroy();
    }
  });

  it("streams opened past the limit before the client has the setting are refused (REFUSED_STREAM); the rest are served", async () => {
    // The client sends all ten in its first flight, before the server's SETTINGS can arrive.
    const session = http2.connect(baseUrl, { peerMaxConcurrentStreams: 100 });
    try {
      const streams = Array.from({ length: 10 }, () => openStream(session));
      await new Promise((r) => setTimeout(r, 300));
      // Let the accepted ones finish: an empty gRPC request gets a gRPC answer (HTTP 200).
      for (const s of streams) if (!s.stream.closed) s.stream.end();
      const outcomes = await Promise.all(streams.map((s) => s.outcome));
      const refused = outcomes.filter((o) => o.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM);
      const served = outcomes.filter((o) => o.status === 200);
      expect([served.length, refused.length]).toEqual([4, 6]);
      // The session itself is fine: a new stream on it is served.
      const again = openStream(session);
      again.stream.end();
      expect((await again.outcome).status).toBe(200);
    } finally {
      session.destroy();
    }
    await expectHealthy();
  });

  it("a client that honours the setting queues the excess: the server never has more than the limit open", async () => {
    const open = new Set<http2.ServerHttp2Stream>();
    let peak = 0;
    const onStream = (s: http2.ServerHttp2Stream) => {
      open.add(s);
      peak = Math.max(peak, open.size);
      s.once("close", () => open.delete(s));
    };
    app.server.on("stream", onStream);
    const session = http2.connect(baseUrl);
    try {
      await new Promise((r) => session.once("remoteSettings", r));
      const streams = Array.from({ length: 10 }, () => openStream(session));
      for (const deadline = Date.now() + 5000; open.size < LIMITS.maxStreamsPerConnection && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 20));
      }
      await new Promise((r) => setTimeout(r, 200)); // time for any excess stream to show up
      expect(open.size).toBe(LIMITS.maxStreamsPerConnection);
      for (const s of streams) s.stream.end();
      const outcomes = await Promise.all(streams.map((s) => s.outcome));
      expect(outcomes.map((o) => o.status)).toEqual(Array(10).fill(200));
      expect(peak).toBe(LIMITS.maxStreamsPerConnection);
    } finally {
      app.server.off("stream", onStream);
      session.destroy();
    }
  });
});

describe("connection limit configuration", () => {
  it("defaults: 100 streams, 16 pipelined, headers in 10 s, the request in 30 s, 16 KiB of headers, idle HTTP/2 sessions closed after 5 s", () => {
    expect(loadConfig({}).connections).toEqual(DEFAULT_CONNECTION_LIMITS);
    expect(DEFAULT_CONNECTION_LIMITS).toEqual({
      maxStreamsPerConnection: 100,
      maxPipelinedRequests: 16,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      maxHeaderBytes: 16_384,
      idleTimeoutMs: 5000,
    });
  });

  it("reads each variable and refuses values that cannot work", () => {
    const c = loadConfig({
      MAX_STREAMS_PER_CONNECTION: "8",
      MAX_PIPELINED_REQUESTS: "0",
      HEADERS_TIMEOUT_MS: "2000",
      REQUEST_TIMEOUT_MS: "5000",
      MAX_HEADER_BYTES: "8192",
      HTTP2_IDLE_TIMEOUT_MS: "250",
    });
    expect(c.connections).toEqual({
      maxStreamsPerConnection: 8,
      maxPipelinedRequests: 0,
      headersTimeoutMs: 2000,
      requestTimeoutMs: 5000,
      maxHeaderBytes: 8192,
      idleTimeoutMs: 250,
    });
    expect(() => loadConfig({ HTTP2_IDLE_TIMEOUT_MS: "0" })).toThrow(/HTTP2_IDLE_TIMEOUT_MS/);
    expect(() => loadConfig({ MAX_STREAMS_PER_CONNECTION: "0" })).toThrow(/MAX_STREAMS_PER_CONNECTION/);
    expect(() => loadConfig({ HEADERS_TIMEOUT_MS: "40000" })).toThrow(/HEADERS_TIMEOUT_MS/);
    expect(() => loadConfig({ MAX_HEADER_BYTES: "100" })).toThrow(/MAX_HEADER_BYTES/);
    expect(() => loadConfig({ BODY_LIMIT_BYTES: "lots" })).toThrow(/BODY_LIMIT_BYTES/);
  });
});
