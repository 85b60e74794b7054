/**
 * What one HTTP/2 connection may cost the server (issue 27): a client that resets streams past
 * nghttp2's reset budget (STREAM_RESET_BURST, refilled at STREAM_RESET_RATE a second) gets GOAWAY
 * after a few hundred streams, not thousands; a session with nothing open for HTTP2_IDLE_TIMEOUT_MS
 * gets GOAWAY and is closed, while one with a stream in flight is not.
 */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rapidResetFlood } from "../../bench/rapid-reset.js";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { buildApp } from "../../src/app.js";
import { ManualClock } from "../../src/common/clock.js";
import { STREAM_RESET_RATE, streamResetBurst } from "../../src/http/connection-limits.js";
import { type ConnectionLimits } from "../../src/config.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN } from "../support/harness.js";

const LIMITS: ConnectionLimits = {
  maxStreamsPerConnection: 100,
  maxPipelinedRequests: 4,
  headersTimeoutMs: 500,
  requestTimeoutMs: 1000,
  maxHeaderBytes: 4096,
  idleTimeoutMs: 300,
};

let db: TestOrm;
let app: FastifyInstance;
let port: number;
let baseUrl: string;

beforeAll(async () => {
  db = await createTestOrm();
  app = await buildApp({
    orm: db.orm,
    clock: new ManualClock(),
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: false, noAlphaCountries: new Set(), bodyLimit: 1024 * 1024, connections: LIMITS },
  });
  // A route that takes as long as asked (test only): a stream in flight past the idle timeout.
  app.get<{ Querystring: { ms: string } }>("/test/slow", async (req) => {
    await new Promise((r) => setTimeout(r, Number(req.query.ms)));
    return { slept: Number(req.query.ms) };
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  port = (app.server.address() as AddressInfo).port;
  baseUrl = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await app?.close();
  await db?.close();
});

/** A gRPC call on a new connection is served. */
async function expectGrpcServed(): Promise<void> {
  const sessions = new Http2SessionManager(baseUrl);
  try {
    const admin = createClient(AdminService, createGrpcTransport({ baseUrl, sessionManager: sessions }));
    const acc = await admin.createAccount({ name: "After" }, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(acc.accountSid).toMatch(/^AC/);
  } finally {
    sessions.abort();
  }
}

/** How a client session ended: the GOAWAYs it got (Node's graceful close sends two) and its close, in order. */
function watch(session: http2.ClientHttp2Session) {
  const events: string[] = [];
  session.on("goaway", (code) => events.push(`goaway ${code}`));
  session.on("error", () => undefined);
  const closed = new Promise<void>((r) => session.once("close", () => (events.push("close"), r())));
  return { events, closed };
}

describe(`HTTP/2 stream resets per connection (${dbKind()})`, () => {
  it("a rapid-reset flood of gRPC SendMessage streams gets GOAWAY within the reset budget; other clients are served", async () => {
    const burst = streamResetBurst(LIMITS);
    expect(burst).toBe(200);
    const started = Date.now();
    const r = await rapidResetFlood(
      { port, path: "/switchboard.v2.MessagingService/SendMessage", body: new Uint8Array(5) },
      { maxStreams: 20_000, stopAtGoaway: true },
    );
    const seconds = Math.ceil((Date.now() - started) / 1000);
    expect(r.goaways).toBe(1);
    expect(r.lastGoawayCode).toBe(http2.constants.NGHTTP2_INTERNAL_ERROR);
    // Client stream ids are odd: the server took at most the budget (plus what refilled meanwhile).
    const taken = (r.lastGoawayStreamId! + 1) / 2;
    expect(taken).toBeGreaterThanOrEqual(burst);
    expect(taken).toBeLessThanOrEqual(burst + 1 + STREAM_RESET_RATE * seconds);
    await expectGrpcServed();
  });

  it("a client that keeps opening streams past MAX_STREAMS_PER_CONNECTION gets GOAWAY after MAX_SESSION_REJECTED_STREAMS refusals", async () => {
    // Never reset, never ended: the first 100 stay open, every later one is refused.
    const r = await rapidResetFlood(
      { port, path: "/switchboard.v2.MessagingService/SendMessage", resetCode: null },
      { maxStreams: 20_000, stopAtGoaway: true, batch: 10 },
    );
    expect(r.goaways).toBe(1);
    expect((r.lastGoawayStreamId! + 1) / 2).toBe(LIMITS.maxStreamsPerConnection);
    await expectGrpcServed();
  });

  it("a client cancelling as many calls as it may have open is not cut off", async () => {
    const r = await rapidResetFlood(
      { port, path: "/switchboard.v2.MessagingService/SendMessage", body: new Uint8Array(5) },
      { maxStreams: LIMITS.maxStreamsPerConnection, stopAtGoaway: true },
    );
    expect(r).toMatchObject({ streams: LIMITS.maxStreamsPerConnection, goaways: 0 });
  });
});

describe(`idle HTTP/2 sessions (${dbKind()})`, () => {
  it("a session with nothing open gets GOAWAY (NO_ERROR) after HTTP2_IDLE_TIMEOUT_MS and is closed", async () => {
    const session = http2.connect(baseUrl);
    const w = watch(session);
    try {
      await new Promise((r) => session.once("connect", r));
      await w.closed;
      expect([...new Set(w.events)]).toEqual([`goaway ${http2.constants.NGHTTP2_NO_ERROR}`, "close"]);
    } finally {
      session.destroy();
    }
  });

  it("a session with a stream in flight longer than the timeout is not closed under it; it goes once idle", async () => {
    const session = http2.connect(baseUrl);
    const w = watch(session);
    try {
      const answer = await new Promise<{ status: number; body: string; eventsThen: string[] }>((resolve, reject) => {
        const s = session.request({ ":method": "GET", ":path": `/test/slow?ms=${LIMITS.idleTimeoutMs * 4}` });
        let status = 0;
        let body = "";
        s.on("response", (h) => (status = Number(h[":status"])));
        s.setEncoding("utf8").on("data", (d: string) => (body += d));
        s.on("end", () => resolve({ status, body, eventsThen: [...w.events] }));
        s.on("error", reject);
      });
      expect(answer).toEqual({ status: 200, body: JSON.stringify({ slept: LIMITS.idleTimeoutMs * 4 }), eventsThen: [] });
      await w.closed;
      expect([...new Set(w.events)]).toEqual([`goaway ${http2.constants.NGHTTP2_NO_ERROR}`, "close"]);
    } finally {
      session.destroy();
    }
  });

  it("PING frames alone do not keep a session open", async () => {
    const session = http2.connect(baseUrl);
    const w = watch(session);
    const pinging = setInterval(() => {
      if (!session.closed && !session.destroyed) session.ping(() => undefined);
    }, LIMITS.idleTimeoutMs / 3);
    try {
      await w.closed;
      expect([...new Set(w.events)]).toEqual([`goaway ${http2.constants.NGHTTP2_NO_ERROR}`, "close"]);
    } finally {
      clearInterval(pinging);
      session.destroy();
    }
  });

  it("a gRPC client whose session was closed as idle connects again for its next call", async () => {
    const sessions = new Http2SessionManager(baseUrl);
    try {
      const admin = createClient(AdminService, createGrpcTransport({ baseUrl, sessionManager: sessions }));
      const auth = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };
      expect((await admin.createAccount({ name: "First" }, auth)).accountSid).toMatch(/^AC/);
      await new Promise((r) => setTimeout(r, LIMITS.idleTimeoutMs * 3));
      expect((await admin.createAccount({ name: "Second" }, auth)).accountSid).toMatch(/^AC/);
    } finally {
      sessions.abort();
    }
  });
});
