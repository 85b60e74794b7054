/**
 * BODY_LIMIT_BYTES on every protocol of the one port, at its exact boundary (here 1024 bytes of
 * request body as sent): REST answers 413 PayloadTooLarge naming the limit; Connect (JSON and
 * binary), gRPC and gRPC-Web answer ResourceExhausted with the same message and an ErrorInfo
 * PayloadTooLarge detail. An over-limit request never reaches the method: nothing is written.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { create, toBinary, toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport, createGrpcTransport, createGrpcWebTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { MessagingService, SendMessageRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { Message } from "../../src/messaging/message.entity.js";
import { dbKind } from "../support/db.js";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const LIMIT = 1024;
const TOO_LARGE = `The request body is larger than the limit of ${LIMIT} bytes.`;
const TO = "+447911000001";

let t: TestApp;
let tenant: Tenant;
let baseUrl: string;
let sessions: Http2SessionManager;

beforeAll(async () => {
  t = await createTestApp({ config: { bodyLimit: LIMIT, sendRateLimit: 0 } });
  tenant = await createTenant(t.app);
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  sessions = new Http2SessionManager(baseUrl);
});

afterAll(async () => {
  sessions?.abort();
  await t?.close();
});

async function written(): Promise<number> {
  return t.db.orm.em.fork().count(Message, { accountSid: tenant.accountSid });
}

/** The longest run of "x" whose `size` is exactly `target` bytes (ASCII: one byte per character). */
function textOfSize(target: number, size: (text: string) => number): string {
  let n = target - size("");
  for (let i = 0; i < 5 && size("x".repeat(n)) !== target; i++) n += target - size("x".repeat(n));
  const text = "x".repeat(n);
  expect(size(text)).toBe(target);
  return text;
}

function rpcInit(text: string) {
  return { propertySid: tenant.propertySid, from: "Acme", to: TO, text };
}

const binarySize = (text: string) => toBinary(SendMessageRequestSchema, create(SendMessageRequestSchema, rpcInit(text))).byteLength;
const jsonSize = (text: string) => Buffer.byteLength(toJsonString(SendMessageRequestSchema, create(SendMessageRequestSchema, rpcInit(text))));

type RpcName = "connect-json" | "connect-binary" | "grpc" | "grpc-web";
const RPC: Record<RpcName, { client: () => Client<typeof MessagingService>; wireSize: (text: string) => number }> = {
  "connect-json": {
    client: () => createClient(MessagingService, createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false })),
    wireSize: jsonSize,
  },
  "connect-binary": {
    client: () => createClient(MessagingService, createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true })),
    wireSize: binarySize,
  },
  // gRPC and gRPC-Web frame the message behind a 5-byte header, which the limit counts.
  grpc: {
    client: () => createClient(MessagingService, createGrpcTransport({ baseUrl, sessionManager: sessions })),
    wireSize: (text) => 5 + binarySize(text),
  },
  "grpc-web": {
    client: () => createClient(MessagingService, createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })),
    wireSize: (text) => 5 + binarySize(text),
  },
};

async function rpcError(call: () => Promise<unknown>): Promise<ConnectError> {
  try {
    await call();
  } catch (e) {
    expect(e).toBeInstanceOf(ConnectError);
    return e as ConnectError;
  }
  throw new Error("the call succeeded but an error was expected");
}

function expectTooLarge(err: ConnectError): void {
  expect(err.code).toBe(Code.ResourceExhausted);
  expect(err.rawMessage).toBe(TOO_LARGE);
  expect(err.findDetails(ErrorInfoSchema).map((d) => [d.reason, d.domain])).toEqual([["PayloadTooLarge", "switchboard"]]);
}

describe(`body limit of ${LIMIT} bytes on every protocol (${dbKind()})`, () => {
  it("REST: a body of exactly the limit is served; one byte more is 413 PayloadTooLarge naming the limit", async () => {
    const before = await written();
    const bodyOf = (size: number) => {
      const head = JSON.stringify({ From: "Acme", To: TO, Text: "at the limit", Pad: "" });
      return head.replace('"Pad":""', `"Pad":"${"p".repeat(size - head.length)}"`);
    };
    const post = (payload: string) =>
      fetch(`${baseUrl}/v2/Properties/${tenant.propertySid}/Messages`, {
        method: "POST",
        headers: { authorization: tenant.auth, "content-type": "application/json" },
        body: payload,
      });
    expect(bodyOf(LIMIT).length).toBe(LIMIT);
    const ok = await post(bodyOf(LIMIT));
    expect(ok.status).toBe(200);
    const over = await post(bodyOf(LIMIT + 1));
    expect(over.status).toBe(413);
    expect(over.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(await over.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "PayloadTooLarge", Message: TOO_LARGE, Errors: [] } });
    expect(await written()).toBe(before + 1);
  });

  for (const name of Object.keys(RPC) as RpcName[]) {
    it(`${name}: a body of exactly the limit is served; one byte more is ResourceExhausted PayloadTooLarge, and runs nothing`, async () => {
      const { client, wireSize } = RPC[name];
      const c = client();
      const headers = { authorization: tenant.auth };
      const before = await written();
      const atLimit = textOfSize(LIMIT, wireSize);
      const sent = await c.sendMessage(rpcInit(atLimit), { headers });
      expect(sent.text).toBe(atLimit);
      expectTooLarge(await rpcError(() => c.sendMessage(rpcInit(atLimit + "x"), { headers })));
      expect(await written()).toBe(before + 1);
    });
  }

  it("gRPC: a body far over the limit is refused cleanly and the HTTP/2 session stays usable", async () => {
    const c = RPC.grpc.client();
    const headers = { authorization: tenant.auth };
    const before = await written();
    // 4 MB: far past HTTP/2's initial 64 KiB flow-control window, so the client is still sending.
    expectTooLarge(await rpcError(() => c.sendMessage(rpcInit("y".repeat(4_000_000)), { headers })));
    expect((await c.sendMessage(rpcInit("after"), { headers })).text).toBe("after");
    expect(await written()).toBe(before + 1);
  });

  it("connect: a gzip body small on the wire but over the limit once decompressed is ResourceExhausted", async () => {
    const c = createClient(MessagingService, createConnectTransport({ baseUrl, httpVersion: "1.1", sendCompression: compressionGzip }));
    const before = await written();
    const err = await rpcError(() => c.sendMessage(rpcInit("z".repeat(1500)), { headers: { authorization: tenant.auth } }));
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.rawMessage).toContain(`readMaxBytes ${LIMIT}`);
    expect(await written()).toBe(before);
  });

  /** Sends only the headers of a request declaring `length` bytes and returns the answer's status and body. */
  function declareOnly(path: string, contentType: string, length: number): Promise<{ status: number; body: string; ms: number }> {
    const started = Date.now();
    return new Promise((resolve, reject) => {
      const req = http.request(`${baseUrl}${path}`, {
        method: "POST",
        headers: { authorization: tenant.auth, "content-type": contentType, "content-length": String(length) },
      });
      req.on("response", (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (body += d));
        res.on("end", () => {
          resolve({ status: res.statusCode!, body, ms: Date.now() - started });
          req.destroy();
        });
      });
      req.on("error", reject);
      req.flushHeaders(); // and never the body
    });
  }

  it("a declared Content-Length over the limit is refused before any of the body is sent", async () => {
    const rest = await declareOnly(`/v2/Properties/${tenant.propertySid}/Messages`, "application/json", 10_000_000);
    expect(rest.status).toBe(413);
    expect(JSON.parse(rest.body).ResponseStatus.ErrorCode).toBe("PayloadTooLarge");
    const connect = await declareOnly("/switchboard.v2.MessagingService/SendMessage", "application/json", 10_000_000);
    expect(connect.status).toBe(429); // Connect's HTTP status for resource_exhausted
    const json = JSON.parse(connect.body);
    expect([json.code, json.message]).toEqual(["resource_exhausted", TOO_LARGE]);
  });
});
