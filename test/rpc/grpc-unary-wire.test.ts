/**
 * The unary gRPC fast path on the wire, against Connect's full handler for the same request: a
 * gRPC call with Content-Type application/grpc takes the fast path, the same call spelled
 * Application/gRPC goes through Connect's handler (the fast path takes only the exact spellings
 * clients send), and the app's interceptors (authentication, the storable-string guard, the send
 * rate limit) answer both with the same status, headers and trailers, byte for byte.
 */
import type { AddressInfo } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import type { ClientHttp2Session } from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SendMessageRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { Message } from "../../src/messaging/message.entity.js";
import { h2Session, type RawAnswer, sendHttp2 } from "../fuzz/raw-rpc.js";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const SEND = "/switchboard.v2.MessagingService/SendMessage";

let t: TestApp;
let session: ClientHttp2Session;
let tenant: Tenant;
let seq = 0;

beforeAll(async () => {
  t = await createTestApp({ config: { sendRateLimit: 1, sendRateBurst: 1 } });
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  session = h2Session(`http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`);
  tenant = await createTenant(t.app);
});

afterAll(async () => {
  session?.close();
  await t?.close();
});

function frame(message: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.byteLength, 1);
  return Buffer.concat([head, message]);
}

function sendBody(text = "hi"): Buffer {
  const to = `+447911${String(++seq).padStart(6, "0")}`;
  return frame(toBinary(SendMessageRequestSchema, create(SendMessageRequestSchema, { propertySid: tenant.propertySid, from: "Acme", to, text })));
}

/** One call with the Content-Type spelled as given. */
function call(contentType: string, body: Uint8Array, headers: Record<string, string> = {}): Promise<RawAnswer> {
  return sendHttp2(
    session,
    { protocol: "grpc", httpMethod: "POST", path: SEND, headers: { "content-type": contentType, te: "trailers", ...headers }, body },
    10_000,
  );
}

/** What must be equal: all but the date and the request id. */
function comparable(a: RawAnswer) {
  const header = [...a.headers].filter(([k]) => k !== "date" && k !== "x-request-id");
  return { status: a.status, header, body: a.body, trailer: [...a.trailers] };
}

/** The same request through the fast path and through Connect's handler. */
async function viaBoth(body: () => Buffer, headers: Record<string, string> = {}) {
  const fast = await call("application/grpc", body(), headers);
  const full = await call("Application/gRPC", body(), headers);
  return { fast, full };
}

describe("unary gRPC: fast path and Connect's handler answer alike", () => {
  it("authentication: no credentials is Unauthenticated with the same details", async () => {
    const { fast, full } = await viaBoth(() => sendBody());
    expect(fast.trailers.get("grpc-status")).toBe(String(Code.Unauthenticated));
    expect(fast.trailers.get("grpc-status-details-bin")).toBeTruthy();
    expect(comparable(fast)).toStrictEqual(comparable(full));
  });

  it("the storable-string guard: U+0000 in the text is InvalidArgument with the same details, nothing stored", async () => {
    const { fast, full } = await viaBoth(() => sendBody("a\u0000b"), { authorization: tenant.auth });
    expect(fast.trailers.get("grpc-status")).toBe(String(Code.InvalidArgument));
    expect(fast.trailers.get("grpc-status-details-bin")).toBeTruthy();
    expect(comparable(fast)).toStrictEqual(comparable(full));
    expect(await t.db.orm.em.fork().count(Message, {})).toBe(0);
  });

  it("the send rate limit: over the bucket is ResourceExhausted with the same details and metadata", async () => {
    const first = await call("application/grpc", sendBody(), { authorization: tenant.auth });
    expect(first.trailers.get("grpc-status")).toBe("0");
    expect(first.body.length).toBeGreaterThan(5);
    // The clock stands still: the bucket stays empty for both.
    const { fast, full } = await viaBoth(() => sendBody(), { authorization: tenant.auth });
    expect(fast.trailers.get("grpc-status")).toBe(String(Code.ResourceExhausted));
    expect(fast.trailers.get("grpc-status-details-bin")).toBeTruthy();
    expect(comparable(fast)).toStrictEqual(comparable(full));
    expect(await t.db.orm.em.fork().count(Message, {})).toBe(1);
  });
});
