/**
 * A gRPC stream the client resets gets no work (issue 27, HTTP/2 rapid reset): no handler, no
 * call record or log line, no authentication, no database, no answer. HEADERS, a complete body
 * and RST_STREAM arrive together as a rapid-reset client writes them (bench/rapid-reset.ts).
 * A stream that is not reset is served as before.
 */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient, createContextValues } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { FastifyBaseLogger } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rapidResetFlood } from "../../bench/rapid-reset.js";
import { MessagingService, SendMessageRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { grpcStreamHandler } from "../../src/rpc/grpc-streams.js";
import { dbKind } from "../support/db.js";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const { NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR, NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM } = http2.constants;

/** A gRPC envelope around `message`. */
function envelope(message: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + message.length);
  new DataView(out.buffer).setUint32(1, message.length);
  out.set(message, 5);
  return out;
}

const nextTurn = () => new Promise((r) => setImmediate(r));

describe("the gRPC stream handler and reset streams (service directly)", () => {
  const PATH = "/test.v1.Test/Call";
  const calls = { handler: 0, startCall: 0, finished: 0 };
  let server: http2.Http2Server;
  let port: number;
  let streams = { opened: 0, closed: 0 };

  beforeAll(async () => {
    const handler = Object.assign(
      async () => {
        calls.handler++;
        return { status: 200, header: new Headers({ "content-type": "application/grpc" }), trailer: new Headers({ "grpc-status": "0" }), body: undefined };
      },
      { requestPath: PATH, method: { name: "Call" }, service: { typeName: "test.v1.Test" } },
    ) as unknown as UniversalHandler;
    const log = { debug: () => undefined, error: () => undefined, child: () => log } as unknown as FastifyBaseLogger;
    const take = grpcStreamHandler({
      handlers: [handler],
      log,
      startCall: () => {
        calls.startCall++;
        return { values: createContextValues(), finish: () => void calls.finished++ };
      },
    });
    server = http2.createServer();
    server.on("stream", (stream, headers) => {
      streams.opened++;
      stream.once("close", () => streams.closed++);
      if (!take(stream, headers)) stream.respond({ ":status": 404 }, { endStream: true });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise((r) => server?.close(r));
  });

  async function floodAndSettle(resetCode: number, count: number): Promise<void> {
    calls.handler = calls.startCall = calls.finished = 0;
    streams = { opened: 0, closed: 0 };
    const r = await rapidResetFlood(
      { port, path: PATH, body: envelope(new Uint8Array([10, 1, 120])), endStream: true, resetCode },
      { maxStreams: count, stopAtGoaway: true },
    );
    expect(r).toMatchObject({ streams: count, goaways: 0 });
    for (const deadline = Date.now() + 10_000; streams.closed < count && Date.now() < deadline;) await new Promise((res) => setTimeout(res, 10));
    expect(streams).toEqual({ opened: count, closed: count });
    // Anything a stream started would have run by now: a turn of the loop for the start, one more for its next step.
    await nextTurn();
    await nextTurn();
  }

  it("streams reset with CANCEL right behind their request: no call record, no handler", async () => {
    await floodAndSettle(NGHTTP2_CANCEL, 50);
    expect(calls).toEqual({ handler: 0, startCall: 0, finished: 0 });
  });

  it("streams reset with NO_ERROR after a complete body: no call record, no handler", async () => {
    await floodAndSettle(NGHTTP2_NO_ERROR, 50);
    expect(calls).toEqual({ handler: 0, startCall: 0, finished: 0 });
  });

  it("streams reset with an error code (REFUSED_STREAM, INTERNAL_ERROR): no handler, and no unhandled stream error", async () => {
    for (const code of [NGHTTP2_REFUSED_STREAM, NGHTTP2_INTERNAL_ERROR]) {
      await floodAndSettle(code, 50);
      expect(calls).toEqual({ handler: 0, startCall: 0, finished: 0 });
    }
  });

  it("a stream that is not reset is served: one call record, one handler call, grpc-status 0", async () => {
    calls.handler = calls.startCall = calls.finished = 0;
    const session = http2.connect(`http://127.0.0.1:${port}`);
    try {
      const trailers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        const s = session.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", te: "trailers" });
        s.on("trailers", resolve);
        s.on("error", reject);
        s.resume();
        s.end(envelope(new Uint8Array([10, 1, 120])));
      });
      expect(trailers["grpc-status"]).toBe("0");
    } finally {
      session.close();
    }
    expect(calls).toEqual({ handler: 1, startCall: 1, finished: 1 });
  });
});

describe(`reset gRPC sends on the real port (${dbKind()})`, () => {
  let t: TestApp;
  let tenant: Tenant;
  let port: number;
  let baseUrl: string;

  beforeAll(async () => {
    t = await createTestApp({ config: { sendRateLimit: 0 } });
    tenant = await createTenant(t.app);
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    port = (t.app.server.address() as AddressInfo).port;
    baseUrl = `http://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    await t?.close();
  });

  const messageCount = async () => Number((await t.db.orm.em.fork().execute<{ n: number | string }[]>("select count(*) as n from messages"))[0].n);
  const sendCalls = async () => {
    const text = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
    return text
      .split("\n")
      .filter((l) => l.startsWith("switchboard_http_requests_total") && l.includes('route="/switchboard.v2.MessagingService/SendMessage"'));
  };

  it("50 authenticated sends, each reset right behind its complete request: no message, no call; a normal gRPC send still goes through", async () => {
    const body = envelope(
      toBinary(
        SendMessageRequestSchema,
        create(SendMessageRequestSchema, { propertySid: tenant.propertySid, from: tenant.ownedNumber, to: "+447700900123", text: "reset" }),
      ),
    );
    for (const resetCode of [NGHTTP2_CANCEL, NGHTTP2_NO_ERROR]) {
      const r = await rapidResetFlood(
        { port, path: "/switchboard.v2.MessagingService/SendMessage", headers: [["authorization", tenant.auth]], body, endStream: true, resetCode },
        { maxStreams: 50, stopAtGoaway: true },
      );
      expect(r).toMatchObject({ streams: 50, goaways: 0 });
    }
    // A normal client afterwards: its send is served, and by the time it is, anything the reset
    // streams had started (they came first) would have written its message.
    const sessions = new Http2SessionManager(baseUrl);
    try {
      const client = createClient(MessagingService, createGrpcTransport({ baseUrl, sessionManager: sessions }));
      const sent = await client.sendMessage(
        { propertySid: tenant.propertySid, from: tenant.ownedNumber, to: "+447700900124", text: "normal" },
        { headers: { authorization: tenant.auth } },
      );
      expect(sent.messageSid).toMatch(/^MG/);
    } finally {
      sessions.abort();
    }
    expect(await messageCount()).toBe(1);
    expect(await sendCalls()).toEqual([
      'switchboard_http_requests_total{method="POST",route="/switchboard.v2.MessagingService/SendMessage",status="200",protocol="grpc"} 1',
    ]);
  });
});
