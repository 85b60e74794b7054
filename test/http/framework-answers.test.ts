/**
 * Requests that Node's HTTP server or Connect-ES answer on their own, before any route or method:
 * each gets the documented `{"ResponseStatus": …}` body with an ErrorCode of the error table, the
 * right status, its headers and an X-Request-Id (issue 27, defect 10). Raw sockets, so that what is
 * on the wire (or not: an early `100 Continue`) is what is asserted.
 */
import { connect as netConnect, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const LIMIT = 1024 * 1024;
const SEND_PATH = "/switchboard.v2.MessagingService/SendMessage";
const REFLECTION_PATH = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";

let t: TestApp;
let tenant: Tenant;
let port: number;

beforeAll(async () => {
  t = await createTestApp({ config: { bodyLimit: LIMIT } });
  tenant = await createTenant(t.app);
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  port = (t.app.server.address() as AddressInfo).port;
});

afterAll(async () => {
  await t?.close();
});

interface Exchange {
  /** Everything the server sent, as latin1 text. */
  raw: string;
  /** The first final (non-1xx) answer. */
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The server closed the connection (rather than the test timing out). */
  closed: boolean;
}

/**
 * Writes `request` on a new connection and reads until the server closes it or, once a final
 * answer is complete, `settleMs` pass without more bytes (keep-alive).
 */
function exchange(request: string, settleMs = 300): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const socket = netConnect(port, "127.0.0.1");
    let raw = "";
    let quiet: NodeJS.Timeout | undefined;
    const give = setTimeout(() => finish(false), 5000);
    const finish = (closed: boolean) => {
      clearTimeout(give);
      clearTimeout(quiet);
      socket.destroy();
      const start = raw.search(/HTTP\/1\.1 [2-5]\d\d /);
      if (start < 0) return reject(new Error(`no final answer (closed: ${closed}): ${JSON.stringify(raw)}`));
      const text = raw.slice(start);
      const end = text.indexOf("\r\n\r\n");
      const lines = text.slice(0, end).split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(":");
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(headers["content-length"] ?? 0);
      resolve({ raw, status: Number(lines[0].slice(9, 12)), headers, body: text.slice(end + 4, end + 4 + length), closed });
    };
    socket.on("data", (chunk) => {
      raw += chunk.toString("latin1");
      clearTimeout(quiet);
      quiet = setTimeout(() => finish(false), settleMs);
    });
    socket.on("close", () => finish(true));
    socket.on("error", () => undefined);
    socket.write(request, "latin1");
  });
}

function documented(errorCode: string, message: string) {
  return { ResponseStatus: { ErrorCode: errorCode, Message: message, Errors: [] } };
}

function expectDocumented(res: Exchange, status: number, errorCode: string, message: string, requestId = "probe-27"): void {
  expect([res.status, res.body], res.raw).toStrictEqual([status, JSON.stringify(documented(errorCode, message))]);
  expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
  expect(res.headers["x-request-id"]).toBe(requestId);
}

describe("framework answers are the documented error body (issue 27, defect 10)", () => {
  it("GET on an RPC path is 405 MethodNotAllowed with Allow: POST", async () => {
    const res = await exchange(`GET ${SEND_PATH} HTTP/1.1\r\nHost: x\r\nX-Request-Id: probe-27\r\n\r\n`);
    expectDocumented(res, 405, "MethodNotAllowed", "GET is not allowed on this resource; allowed: POST.");
    expect(res.headers.allow).toBe("POST");
  });

  it("a POST with Content-Type text/plain on an RPC path is 415 UnsupportedMediaType", async () => {
    const body = '{"PropertySid":"x"}';
    const res = await exchange(
      `POST ${SEND_PATH} HTTP/1.1\r\nHost: x\r\nX-Request-Id: probe-27\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expectDocumented(res, 415, "UnsupportedMediaType", "The request body must be JSON, sent with Content-Type: application/json.");
  });

  it("gRPC reflection over HTTP/1.1 is 400 MalformedRequest saying it needs HTTP/2, not a 505", async () => {
    const res = await exchange(
      `POST ${REFLECTION_PATH} HTTP/1.1\r\nHost: x\r\nX-Request-Id: probe-27\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\n\r\n`,
    );
    expectDocumented(
      res,
      400,
      "MalformedRequest",
      `${REFLECTION_PATH} is a bidirectional stream and needs HTTP/2 (h2c, as grpcurl -plaintext and buf curl --http2-prior-knowledge speak it); it cannot be called over HTTP/1.1.`,
    );
    expect(res.closed).toBe(true);
  });

  it("an HTTP/1.1 request without Host is 400 MalformedRequest with an X-Request-Id, and the connection closes", async () => {
    const res = await exchange("GET /healthz HTTP/1.1\r\nX-Request-Id: probe-27\r\n\r\n");
    expectDocumented(res, 400, "MalformedRequest", "The request is not valid HTTP/1.1: it has no Host header.");
    expect(res.headers.connection).toBe("close");
    expect(res.closed).toBe(true);
    // Without a request id of the client's, the answer still carries one.
    const bare = await exchange("GET /healthz HTTP/1.1\r\n\r\n");
    expect(bare.status).toBe(400);
    expect(bare.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("HTTP/1.0 without Host is still served", async () => {
    const res = await exchange("GET /healthz HTTP/1.0\r\n\r\n");
    expect([res.status, res.body]).toStrictEqual([200, '{"Status":"ok"}']);
  });

  it("CONNECT is answered 405 MethodNotAllowed with Allow, then the connection closes", async () => {
    const res = await exchange("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nX-Request-Id: probe-27\r\n\r\n");
    const allow = "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS";
    expectDocumented(res, 405, "MethodNotAllowed", `CONNECT is not allowed: this service is not a proxy; allowed: ${allow}.`);
    expect(res.headers.allow).toBe(allow);
    expect(res.headers.connection).toBe("close");
    expect(res.closed).toBe(true);
  });

  it("Expect: 100-continue with a Content-Length over the limit is 413 without any 100 Continue", async () => {
    const res = await exchange(
      `POST /v2/Properties/${tenant.propertySid}/Messages HTTP/1.1\r\nHost: x\r\nX-Request-Id: probe-27\r\nAuthorization: ${tenant.auth}\r\n` +
        "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 99999999999\r\n\r\n",
    );
    expect(res.raw).not.toContain("100 Continue");
    expectDocumented(res, 413, "PayloadTooLarge", `The request body is larger than the limit of ${LIMIT} bytes.`);
    // The body was never invited: the connection cannot carry another request.
    expect(res.headers.connection).toBe("close");
    expect(res.closed).toBe(true);
  });

  it("Expect: 100-continue within the limit gets 100 Continue, then its answer", async () => {
    const body = JSON.stringify({ From: "Acme", To: "+447700900123", Text: "hi" });
    const socket = netConnect(port, "127.0.0.1");
    let raw = "";
    socket.on("data", (c) => (raw += c.toString("latin1")));
    socket.write(
      `POST /v2/Properties/${tenant.propertySid}/Messages HTTP/1.1\r\nHost: x\r\nAuthorization: ${tenant.auth}\r\n` +
        `Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    await expect.poll(() => raw, { timeout: 5000 }).toContain("HTTP/1.1 100 Continue\r\n\r\n");
    socket.write(body);
    await expect.poll(() => raw, { timeout: 5000 }).toMatch(/HTTP\/1\.1 200 OK[\s\S]*"MessageSid"/);
    socket.destroy();
  });
});
