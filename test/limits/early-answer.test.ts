/**
 * A body over BODY_LIMIT_BYTES is answered while the client is still sending it (docs/api.md,
 * "Request size"), and that answer must reach the client: the server reads and drops the rest of
 * the body instead of cutting the connection, so the kernel never resets it before the client has
 * read the answer. Then the connection (HTTP/1.1) or session (h2) serves the next request. Bodies
 * here are several MiB, far past the socket buffers and HTTP/2's 64 KiB window, and are sent
 * with and without a declared length, by the generated clients and by raw ones.
 */
import { connect as netConnect } from "node:net";
import { connect as http2Connect, type ClientHttp2Session, type IncomingHttpHeaders } from "node:http2";
import type { AddressInfo } from "node:net";
import { create, toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { MessagingService, SendBatchRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { Message } from "../../src/messaging/message.entity.js";
import { dbKind } from "../support/db.js";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const LIMIT = 1024 * 1024;
const TOO_LARGE = `The request body is larger than the limit of ${LIMIT} bytes.`;
const REST_BODY = { ResponseStatus: { ErrorCode: "PayloadTooLarge", Message: TOO_LARGE, Errors: [] } };
const TO = "+447911000001";
/** Each batch item's text: ~300 characters, as in the fuzz case that found the reset. */
const TEXT = "t".repeat(300);

let t: TestApp;
let tenant: Tenant;
let baseUrl: string;
let port: number;

beforeAll(async () => {
  t = await createTestApp({ config: { bodyLimit: LIMIT, sendRateLimit: 0 } });
  tenant = await createTenant(t.app);
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  port = (t.app.server.address() as AddressInfo).port;
  baseUrl = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await t?.close();
});

async function written(): Promise<number> {
  return t.db.orm.em.fork().count(Message, { accountSid: tenant.accountSid });
}

/** A SendBatch request of `items` messages (~330 bytes of JSON each). */
function batch(items: number) {
  return create(SendBatchRequestSchema, {
    propertySid: tenant.propertySid,
    messages: Array.from({ length: items }, () => ({ from: "Acme", to: TO, text: TEXT })),
  });
}

/** ~4 MiB of JSON: four times the limit. */
const BIG = 12_000;
const bigJson = () => Buffer.from(toJsonString(SendBatchRequestSchema, batch(BIG)));
const restBody = (items: number) => Buffer.from(JSON.stringify({ Messages: Array.from({ length: items }, () => ({ From: "Acme", To: TO, Text: TEXT })) }));

function expectTooLarge(err: unknown): void {
  expect(err).toBeInstanceOf(ConnectError);
  const e = err as ConnectError;
  expect([Code[e.code], e.rawMessage]).toEqual([Code[Code.ResourceExhausted], TOO_LARGE]);
  expect(e.findDetails(ErrorInfoSchema).map((d) => [d.reason, d.domain])).toEqual([["PayloadTooLarge", "switchboard"]]);
}

async function rpcError(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (e) {
    return e;
  }
  throw new Error("the call succeeded but an error was expected");
}

/** Chunks of `body`, 64 KiB each, as a stream body for fetch (sent chunked, without a length). */
function chunked(body: Buffer): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (i >= body.length) return controller.close();
      controller.enqueue(body.subarray(i, (i += 64 * 1024)));
    },
  });
}

interface RawH1Answer {
  /** The answers received, in order: status and body. */
  answers: { status: number; body: string }[];
  /** The socket error, if the connection was reset or failed. */
  error?: string;
}

/** The complete answers (Content-Length framed, as every answer here is) at the start of `text`. */
function parseAnswers(text: string): { status: number; body: string }[] {
  const out: { status: number; body: string }[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf("\r\n\r\n");
    const length = /\r\ncontent-length: (\d+)/i.exec(rest.slice(0, end));
    if (end < 0 || !length || rest.length < end + 4 + Number(length[1])) return out;
    out.push({ status: Number(rest.slice(9, 12)), body: rest.slice(end + 4, end + 4 + Number(length[1])) });
    rest = rest.slice(end + 4 + Number(length[1]));
  }
}

/**
 * Sends a request on a raw socket, writing the whole body (as many clients do, whatever the
 * server answered meanwhile), then a GET /healthz on the same connection, and reads what comes
 * back until both are answered, the connection closes, or 10 s pass.
 */
function rawHttp1(head: string, body: Buffer, opts: { chunked: boolean }): Promise<RawH1Answer> {
  return new Promise((resolve) => {
    const socket = netConnect(port, "127.0.0.1");
    let text = "";
    let settled = false;
    const finish = (error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ answers: parseAnswers(text), error });
    };
    const timer = setTimeout(() => finish("no further answer within 10 s"), 10_000);
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => {
      text += d;
      if (parseAnswers(text).length === 2) finish();
    });
    socket.on("error", (e) => finish((e as NodeJS.ErrnoException).code ?? e.message));
    socket.on("close", () => finish());
    socket.on("connect", async () => {
      socket.write(`${head}${opts.chunked ? "transfer-encoding: chunked" : `content-length: ${body.length}`}\r\n\r\n`);
      for (let i = 0; i < body.length && !socket.destroyed; i += 64 * 1024) {
        const part = body.subarray(i, i + 64 * 1024);
        const ok = socket.write(opts.chunked ? Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from("\r\n")]) : part);
        if (!ok) await new Promise((r) => socket.once("drain", r).once("close", r));
      }
      if (!socket.destroyed) socket.write(`${opts.chunked ? "0\r\n\r\n" : ""}GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n`);
    });
  });
}

/** A request on an h2 session: writes the whole body in 64 KiB chunks, and resolves with the answer. */
function h2Request(
  session: ClientHttp2Session,
  headers: Record<string, string>,
  body: Buffer,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string; rstCode: number }> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ...headers });
    let status = 0;
    let head: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      head = h;
    });
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", () => undefined); // reported by rstCode on close
    // A stream the server answered but never closes (it stopped reading) holds the client for ever.
    const timer = setTimeout(() => reject(new Error(`the stream did not close within 10 s (answered: ${status})`)), 10_000);
    stream.on("close", () => {
      clearTimeout(timer);
      if (status === 0) reject(new Error(`the stream closed without an answer (HTTP/2 code ${stream.rstCode})`));
      else resolve({ status, headers: head, body: Buffer.concat(chunks).toString("utf8"), rstCode: stream.rstCode ?? 0 });
    });
    void (async () => {
      for (let i = 0; i < body.length && !stream.closed; i += 64 * 1024) {
        if (!stream.write(body.subarray(i, i + 64 * 1024))) await new Promise((r) => stream.once("drain", r).once("close", r));
      }
      if (!stream.closed) stream.end();
    })();
  });
}

function h2Session(): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = http2Connect(baseUrl);
    s.once("connect", () => resolve(s));
    s.once("error", reject);
  });
}

const connectPath = "/switchboard.v2.MessagingService/SendBatch";
const restPath = () => `/v2/Properties/${tenant.propertySid}/BatchMessages`;

describe(`a body over the limit is answered, not reset, while the client still sends (${dbKind()})`, () => {
  it("Connect JSON over HTTP/1.1, generated client (body sent without a length): ResourceExhausted PayloadTooLarge, then the next call is served", async () => {
    const c = createClient(MessagingService, createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }));
    const headers = { authorization: tenant.auth };
    const before = await written();
    for (let i = 0; i < 3; i++) expectTooLarge(await rpcError(() => c.sendBatch(batch(BIG), { headers })));
    const ok = await c.sendBatch(batch(2), { headers });
    expect(ok.messages.map((r) => r.messageSid !== undefined)).toEqual([true, true]);
    expect(await written()).toBe(before + 2);
  });

  it("Connect JSON over h2, generated client: ResourceExhausted PayloadTooLarge, and the session serves the next Connect and gRPC calls", async () => {
    const sessions = new Http2SessionManager(baseUrl);
    try {
      const connect = createClient(MessagingService, createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: false, sessionManager: sessions }));
      const grpc = createClient(MessagingService, createGrpcTransport({ baseUrl, sessionManager: sessions }));
      const headers = { authorization: tenant.auth };
      for (let i = 0; i < 4; i++) {
        expectTooLarge(await rpcError(() => connect.sendBatch(batch(BIG), { headers })));
        expectTooLarge(await rpcError(() => grpc.sendBatch(batch(BIG), { headers })));
      }
      expect((await connect.sendBatch(batch(1), { headers })).messages).toHaveLength(1);
      expect((await grpc.sendBatch(batch(1), { headers })).messages).toHaveLength(1);
    } finally {
      sessions.abort();
    }
  });

  for (const withLength of [false, true]) {
    const how = withLength ? "with Content-Length" : "chunked";
    it(`Connect JSON over HTTP/1.1, raw socket, ${how}: the 429 resource_exhausted answer arrives, then the connection serves the next request`, async () => {
      const head = `POST ${connectPath} HTTP/1.1\r\nhost: localhost\r\nauthorization: ${tenant.auth}\r\ncontent-type: application/json\r\n`;
      const { answers, error } = await rawHttp1(head, bigJson(), { chunked: !withLength });
      expect(answers[0]?.status).toBe(429);
      const json = JSON.parse(answers[0]!.body) as { code: string; message: string };
      expect([json.code, json.message]).toEqual(["resource_exhausted", TOO_LARGE]);
      expect([error, answers[1]?.status]).toEqual([undefined, 200]);
    });

    it(`REST over HTTP/1.1, raw socket, ${how}: the 413 PayloadTooLarge answer arrives, then the connection serves the next request`, async () => {
      const head = `POST ${restPath()} HTTP/1.1\r\nhost: localhost\r\nauthorization: ${tenant.auth}\r\ncontent-type: application/json\r\n`;
      const { answers, error } = await rawHttp1(head, restBody(BIG), { chunked: !withLength });
      expect(answers[0]?.status).toBe(413);
      expect(JSON.parse(answers[0]!.body)).toStrictEqual(REST_BODY);
      expect([error, answers[1]?.status]).toEqual([undefined, 200]);
    });

    it(`fetch (undici) over HTTP/1.1, ${how}: Connect answers 429 resource_exhausted and REST 413, then both serve the next request`, async () => {
      const send = (path: string, body: Buffer) =>
        fetch(`${baseUrl}${path}`, {
          method: "POST",
          headers: { authorization: tenant.auth, "content-type": "application/json" },
          body: withLength ? body : chunked(body),
          duplex: "half",
        } as RequestInit);
      const connect = await send(connectPath, bigJson());
      expect(connect.status).toBe(429);
      expect(((await connect.json()) as { message: string }).message).toBe(TOO_LARGE);
      const rest = await send(restPath(), restBody(BIG));
      expect(rest.status).toBe(413);
      expect(await rest.json()).toStrictEqual(REST_BODY);
      expect((await send(restPath(), restBody(1))).status).toBe(200);
      expect((await send(connectPath, Buffer.from(toJsonString(SendBatchRequestSchema, batch(1))))).status).toBe(200);
    });

    it(`h2, raw client, ${how}: Connect answers 429 resource_exhausted and REST 413, and the session serves the next requests`, async () => {
      const session = await h2Session();
      try {
        const headers = (path: string, body: Buffer) => ({
          ":path": path,
          authorization: tenant.auth,
          "content-type": "application/json",
          ...(withLength ? { "content-length": String(body.length) } : {}),
        });
        for (let i = 0; i < 4; i++) {
          const body = bigJson();
          const connect = await h2Request(session, headers(connectPath, body), body);
          expect([connect.status, (JSON.parse(connect.body) as { message: string }).message]).toEqual([429, TOO_LARGE]);
          const rb = restBody(BIG);
          const rest = await h2Request(session, headers(restPath(), rb), rb);
          expect([rest.status, JSON.parse(rest.body)]).toStrictEqual([413, REST_BODY]);
        }
        const small = restBody(1);
        expect((await h2Request(session, headers(restPath(), small), small)).status).toBe(200);
        const smallRpc = Buffer.from(toJsonString(SendBatchRequestSchema, batch(1)));
        expect((await h2Request(session, headers(connectPath, smallRpc), smallRpc)).status).toBe(200);
      } finally {
        session.close();
      }
    });
  }
});
