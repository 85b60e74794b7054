/**
 * The unary gRPC fast path (src/rpc/grpc-unary.ts) against Connect's full gRPC handler for
 * the same method, options and request: the same status, headers, body and trailers byte for
 * byte, the same interceptors run in the same order (a refusal with details and metadata, a
 * deadline), and every request not of the common shape handed to Connect's handler unchanged.
 */
import { create, toBinary, toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError, createConnectRouter, createMethodImplSpec, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { compressionGzip } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { Health, HealthCheckRequestSchema, HealthCheckResponse_ServingStatus, HealthCheckResponseSchema } from "../../gen/grpc/health/v1/health_pb.js";
import { bodyLimitGate } from "../../src/http/body-limit.js";
import { shareCallCompleteReason } from "../../src/rpc/call-complete.js";
import { serveUnaryGrpcDirectly } from "../../src/rpc/grpc-unary.js";

const READ_MAX = 256;

/** What the interceptors saw, in order, per call. */
let seen: string[] = [];

const record =
  (name: string): Interceptor =>
  (next) =>
  (req) => {
    seen.push(name);
    return next(req);
  };

/** Refuses a call that asks for it, with an error detail and metadata (as the rate limit does). */
const refuse: Interceptor = (next) => (req) => {
  if (req.header.get("x-refuse") === null) return next(req);
  const err = new ConnectError("refused by the interceptor: ünïcode", Code.ResourceExhausted, { "retry-after": "3" });
  err.details.push({ desc: ErrorInfoSchema, value: { reason: "RateLimited", domain: "test", metadata: { Asks: "1" } } });
  throw err;
};

async function check(req: { service: string }, ctx: HandlerContext) {
  ctx.responseHeader.set("x-from-method", "yes");
  if (req.service === "wait") {
    // Until the deadline (or another abort): its reason is the answer.
    await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
    throw ctx.signal.reason as Error;
  }
  if (req.service === "boom") throw new Error("not a ConnectError");
  return create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING });
}

/** A router as the app makes one, and its Check handler twice: Connect's own, and with the fast path (counting what it passes on). */
function handlers(extra: { compressMinBytes?: number } = {}) {
  const options = {
    interceptors: [record("first"), refuse, record("last")],
    requestGate: (ctx: HandlerContext) => {
      shareCallCompleteReason(ctx);
      bodyLimitGate(READ_MAX)(ctx);
    },
    readMaxBytes: READ_MAX,
    acceptCompression: [compressionGzip],
    ...extra,
  };
  const router = createConnectRouter(options);
  router.service(Health, { check, watch: async function* () {}, list: () => ({}) } as never);
  const specs = Health.methods.map((m) => createMethodImplSpec(m, (m.localName === "check" ? check : () => ({})) as never));
  const full = router.handlers.find((h) => h.method === Health.method.check)!;
  const counter = { passedOn: 0 };
  const counted = Object.assign((req: UniversalServerRequest) => {
    counter.passedOn++;
    return full(req);
  }, full);
  const wrapped: UniversalHandler[] = [counted];
  serveUnaryGrpcDirectly(wrapped, specs, options);
  return { full, fast: wrapped[0], counter };
}

interface Answer {
  status: number;
  header: [string, string][];
  body: Buffer;
  trailer: [string, string][];
}

async function answer(res: UniversalServerResponse): Promise<Answer> {
  const chunks: Uint8Array[] = [];
  if (res.body && Symbol.asyncIterator in (res.body as object)) for await (const c of res.body as AsyncIterable<Uint8Array>) chunks.push(c);
  // The trailers are complete once the body has been read.
  return { status: res.status, header: [...(res.header ?? new Headers())], body: Buffer.concat(chunks), trailer: [...(res.trailer ?? new Headers())] };
}

function frame(message: Uint8Array, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(message.byteLength, 1);
  return Buffer.concat([head, message]);
}

const checkMessage = (service = "") => toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service }));

function request(body: Uint8Array | Uint8Array[], headers: Record<string, string> = {}): UniversalServerRequest {
  const chunks = Array.isArray(body) ? body : [body];
  return {
    httpVersion: "2.0",
    method: "POST",
    url: "http://localhost/grpc.health.v1.Health/Check",
    header: new Headers({ "content-type": "application/grpc", te: "trailers", ...headers }),
    body: (async function* () {
      yield* chunks;
    })(),
    signal: new AbortController().signal,
  };
}

/** Both handlers' answers to the same request (made twice), the interceptors each ran, and whether the fast path passed it on. */
async function both(make: () => UniversalServerRequest, extra?: { compressMinBytes?: number }) {
  const h = handlers(extra);
  seen = [];
  const viaConnect = await answer(await h.full(make()));
  const connectSaw = seen;
  seen = [];
  const viaFastPath = await answer(await h.fast(make()));
  return { viaConnect, viaFastPath, connectSaw, fastSaw: seen, passedOn: h.counter.passedOn };
}

describe("the unary gRPC fast path", () => {
  it("answers a call as Connect does, with the interceptors run in order around the method", async () => {
    const r = await both(() => request(frame(checkMessage())));
    expect(r.passedOn).toBe(0);
    expect(r.viaFastPath).toStrictEqual(r.viaConnect);
    expect(r.viaFastPath.status).toBe(200);
    expect(r.viaFastPath.header).toContainEqual(["x-from-method", "yes"]);
    expect(r.viaFastPath.trailer).toStrictEqual([["grpc-status", "0"]]);
    expect(r.viaFastPath.body).toStrictEqual(frame(toBinary(HealthCheckResponseSchema, create(HealthCheckResponseSchema, { status: 1 }))));
    expect(r.fastSaw).toStrictEqual(["first", "last"]);
    expect(r.connectSaw).toStrictEqual(["first", "last"]);
  });

  it("writes an interceptor's refusal as Connect does: status, message, details and metadata in the trailers", async () => {
    const r = await both(() => request(frame(checkMessage()), { "x-refuse": "1" }));
    expect(r.passedOn).toBe(0);
    expect(r.viaFastPath).toStrictEqual(r.viaConnect);
    expect(r.viaFastPath.body.length).toBe(0);
    const trailer = new Headers(r.viaFastPath.trailer);
    expect(trailer.get("grpc-status")).toBe(String(Code.ResourceExhausted));
    expect(trailer.get("retry-after")).toBe("3");
    expect(trailer.get("grpc-status-details-bin")).toBeTruthy();
    expect(r.fastSaw).toStrictEqual(["first"]);
  });

  it("answers an error that is not a ConnectError as Connect does (internal)", async () => {
    const r = await both(() => request(frame(checkMessage("boom"))));
    expect(r.passedOn).toBe(0);
    expect(r.viaFastPath).toStrictEqual(r.viaConnect);
    expect(new Headers(r.viaFastPath.trailer).get("grpc-status")).toBe(String(Code.Internal));
  });

  it("honours grpc-timeout: the method's signal fires at the deadline, answered DeadlineExceeded", async () => {
    const started = Date.now();
    const r = await both(() => request(frame(checkMessage("wait")), { "grpc-timeout": "30m" }));
    expect(r.passedOn).toBe(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(55);
    expect(r.viaFastPath).toStrictEqual(r.viaConnect);
    expect(new Headers(r.viaFastPath.trailer).get("grpc-status")).toBe(String(Code.DeadlineExceeded));
  });

  it("takes a body in several chunks, grpc-encoding identity and application/grpc+proto", async () => {
    const whole = frame(checkMessage("x"));
    const r = await both(() => request([whole.subarray(0, 3), whole.subarray(3)], { "grpc-encoding": "identity", "content-type": "application/grpc+proto" }));
    expect(r.passedOn).toBe(0);
    expect(r.viaFastPath).toStrictEqual(r.viaConnect);
    expect(new Headers(r.viaFastPath.trailer).get("grpc-status")).toBe("0");
  });

  it("compresses the answer as Connect does when the client accepts gzip", async () => {
    const r = await both(() => request(frame(checkMessage()), { "grpc-accept-encoding": "gzip" }), { compressMinBytes: 0 });
    expect(r.passedOn).toBe(0);
    expect(new Headers(r.viaFastPath.header).get("grpc-encoding")).toBe("gzip");
    expect(r.viaFastPath.body[0]).toBe(1);
    expect(r.viaFastPath).toStrictEqual(r.viaConnect);
  });

  const json = Buffer.from(toJsonString(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service: "j" })));
  const fallThrough: [string, () => Promise<UniversalServerRequest>, string][] = [
    ["a compressed request", async () => request(frame(await compressionGzip.compress(checkMessage("z")), 1), { "grpc-encoding": "gzip" }), "0"],
    ["an unknown request compression", async () => request(frame(checkMessage()), { "grpc-encoding": "zstd" }), String(Code.Unimplemented)],
    ["gRPC with JSON", async () => request(frame(json), { "content-type": "application/grpc+json" }), "0"],
    ["another spelling of the Content-Type", async () => request(frame(checkMessage()), { "content-type": "Application/gRPC" }), "0"],
    ["two envelopes", async () => request(Buffer.concat([frame(checkMessage()), frame(checkMessage())])), String(Code.Unimplemented)],
    ["no envelope", async () => request(new Uint8Array(0)), String(Code.Unimplemented)],
    ["a truncated envelope", async () => request(frame(checkMessage("abc")).subarray(0, 7)), String(Code.InvalidArgument)],
    ["the compressed flag without an encoding", async () => request(frame(checkMessage(), 1)), String(Code.Internal)],
    ["a message that does not parse", async () => request(frame(Buffer.from([0x0a, 0x05, 0x61]))), String(Code.Internal)],
    ["an envelope over the read limit", async () => request(frame(checkMessage("y".repeat(READ_MAX)))), String(Code.ResourceExhausted)],
    [
      "a declared Content-Length over the limit",
      async () => request(frame(checkMessage()), { "content-length": String(READ_MAX + 1) }),
      String(Code.ResourceExhausted),
    ],
    ["a malformed grpc-timeout", async () => request(frame(checkMessage()), { "grpc-timeout": "soon" }), String(Code.InvalidArgument)],
  ];
  for (const [name, make, status] of fallThrough) {
    it(`hands ${name} to Connect's handler, answered as before`, async () => {
      const first = await make();
      const second = await make();
      const requests = [first, second];
      const r = await both(() => requests.shift()!);
      expect(new Headers(r.viaFastPath.trailer).get("grpc-status")).toBe(status);
      expect(r.viaFastPath).toStrictEqual(r.viaConnect);
    });
  }

  it("passes each fall-through case on to Connect's handler, not answering it itself", async () => {
    for (const [name, make] of fallThrough) {
      // The declared Content-Length is refused by the request gate, which the fast path runs too.
      if (name.startsWith("a declared")) continue;
      const h = handlers();
      await answer(await h.fast(await make()));
      expect(h.counter.passedOn, name).toBe(1);
    }
  });

  it("leaves the handlers of streaming methods as they are", () => {
    const options = { interceptors: [] };
    const router = createConnectRouter(options);
    router.service(Health, { check, watch: async function* () {}, list: () => ({}) } as never);
    const before = [...router.handlers];
    serveUnaryGrpcDirectly(
      router.handlers,
      Health.methods.map((m) => createMethodImplSpec(m, (() => ({})) as never)),
      options,
    );
    for (let i = 0; i < before.length; i++) {
      if (before[i].method.methodKind === "unary") expect(router.handlers[i]).not.toBe(before[i]);
      else expect(router.handlers[i]).toBe(before[i]);
    }
  });
});
