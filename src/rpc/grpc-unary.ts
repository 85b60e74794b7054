/**
 * A unary gRPC call in its common shape, answered with Connect's own protocol pieces but without
 * Connect's streaming pipeline: Connect's gRPC handler runs every call, unary or not, through a
 * chain of async generators (split, decompress, parse, invoke, serialize, compress, join, catch),
 * which cost a gRPC Send SMS about twice REST's CPU (docs/benchmarks.md).
 *
 * It sits where Connect's gRPC handler sits: innermost, inside the router handlers' wrappers
 * (body limit, charset, blame for unreadable requests), so that everything around a handler
 * stays as it is. And it decides nothing itself: Connect's method serialization parses and
 * serializes (with Connect's read and write limits), Connect's createHandlerContext makes the
 * context (deadline from Connect's parseTimeout, the request and shutdown signals), Connect's
 * invokeUnaryImplementation runs the router's request gate and interceptors around the method
 * exactly as the full handler does (the same list: markRequestRead, then createInterceptors),
 * Connect's compression negotiation and envelope code write the answer, and Connect's
 * setTrailerStatus writes the status, error details and metadata.
 *
 * Only this shape is taken: POST, Content-Type exactly application/grpc or application/grpc+proto,
 * no request compression (grpc-encoding absent or identity), a valid grpc-timeout if any, and a
 * body that is exactly one uncompressed envelope within the read limit whose message parses.
 * Anything else (streaming methods, compression, +json, another spelling of the Content-Type, an
 * empty, malformed, oversized or second envelope, a body that fails to read, a message that does
 * not parse) goes to Connect's full handler, which is given the bytes already read followed by
 * the rest of the body (or the read error), so that it answers exactly as it would have.
 */
import { Code, ConnectError, createHandlerContext, type ConnectRouterOptions, type Interceptor, type MethodImplSpec } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import {
  compressionNegotiate,
  contentTypeProto,
  createMethodSerializationLookup,
  encodeEnvelope,
  envelopeCompress,
  grpcStatusOk,
  headerAcceptEncoding,
  headerContentType,
  headerEncoding,
  headerGrpcStatus,
  headerTimeout,
  invokeUnaryImplementation,
  parseTimeout,
  setTrailerStatus,
  validateUniversalHandlerOptions,
} from "../common/internals.js";
import { envelopeLength } from "../http/body-limit.js";

/** A unary method of the router: its descriptor and the function its handlers call. */
type UnarySpec = Extract<MethodImplSpec, { kind: "unary" }>;

/**
 * Puts the unary fast path in front of Connect's handler of each unary method in `specs`.
 * `options` is the object the Connect plugin was given, read once the plugin has completed it
 * (call this inside its `routes` callback). The innermost wrapper of the router's handler list
 * (src/rpc/handler-wrappers.ts); other handlers are returned as they are.
 */
export function unaryGrpcFastPath(
  specs: readonly MethodImplSpec[],
  options: ConnectRouterOptions & { shutdownTimeoutMs?: number },
): (handler: UniversalHandler) => UniversalHandler {
  // The plugin makes the shutdown signal from shutdownTimeoutMs before it calls `routes`: the
  // fast path must see the one the full handlers got.
  if (options.shutdownTimeoutMs !== undefined && options.shutdownSignal === undefined) {
    throw new Error("unaryGrpcFastPath: the Connect plugin has not set its shutdown signal yet (call it from the plugin's routes callback)");
  }
  const opt = validateUniversalHandlerOptions(options);
  const byMethod = new Map(specs.map((s) => [s.method, s]));
  return (full) => {
    const spec = byMethod.get(full.method);
    if (spec?.kind !== "unary") return full;
    return Object.assign(unaryFastPath(full, spec, opt), full);
  };
}

/** The fast path alone in front of `handlers` (in place), for tests that compare it with Connect's handler. */
export function serveUnaryGrpcDirectly(
  handlers: UniversalHandler[],
  specs: readonly MethodImplSpec[],
  options: ConnectRouterOptions & { shutdownTimeoutMs?: number },
): void {
  const wrap = unaryGrpcFastPath(specs, options);
  for (let i = 0; i < handlers.length; i++) handlers[i] = wrap(handlers[i]);
}

type Options = ReturnType<typeof validateUniversalHandlerOptions>;

function unaryFastPath(full: UniversalHandler, spec: UnarySpec, opt: Options): (req: UniversalServerRequest) => Promise<UniversalServerResponse> {
  // The same lookup Connect's gRPC handler makes for the method (jsonOptions do not matter: binary only).
  const serialization = createMethodSerializationLookup(spec.method, opt.binaryOptions, opt.jsonOptions, opt);
  const input = serialization.getI(true);
  const output = serialization.getO(true);
  // Innermost: a call whose client has gone (a reset stream) or whose deadline passed while the
  // interceptors ran (authentication reads the database) does not reach the method.
  const interceptors = [...opt.interceptors, stopWhenAborted];
  return async (req) => {
    const contentType = req.header.get(headerContentType);
    if (req.method !== "POST" || (contentType !== "application/grpc" && contentType !== contentTypeProto)) return full(req);
    const encoding = req.header.get(headerEncoding);
    if (encoding !== null && encoding !== "identity") return full(req);
    const timeout = parseTimeout(req.header.get(headerTimeout), opt.maxTimeoutMs);
    if (timeout.error) return full(req);
    const body = req.body;
    if (typeof body !== "object" || body === null || !(Symbol.asyncIterator in body)) return full(req);

    // The whole body: a unary request is usually one chunk, then the end.
    const it = (body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      let r: IteratorResult<Uint8Array>;
      try {
        r = await it.next();
      } catch (e) {
        // The client reset the stream: nothing reads or answers a call nobody waits for.
        req.signal.throwIfAborted();
        return full({ ...req, body: replay(chunks, it, e) });
      }
      if (r.done === true) break;
      chunks.push(r.value);
      size += r.value.byteLength;
      if (size > opt.readMaxBytes + 5) return full({ ...req, body: replay(chunks, it) });
    }
    const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
    if (size < 5 || bytes[0] !== 0 || envelopeLength(bytes) !== size - 5 || size - 5 > opt.readMaxBytes) {
      return full({ ...req, body: replay(chunks) });
    }
    let message: ReturnType<typeof input.parse>;
    try {
      message = input.parse(bytes.subarray(5));
    } catch {
      return full({ ...req, body: replay(chunks) });
    }

    req.signal.throwIfAborted();
    // From here on as Connect's gRPC handler (protocol-grpc/handler-factory.js) answers a unary call.
    const context = createHandlerContext({
      ...spec,
      service: spec.method.parent,
      requestMethod: "POST",
      protocolName: "grpc",
      timeoutMs: timeout.timeoutMs,
      shutdownSignal: opt.shutdownSignal,
      requestSignal: req.signal,
      requestHeader: req.header,
      url: req.url,
      responseHeader: { [headerContentType]: contentTypeProto },
      responseTrailer: { [headerGrpcStatus]: grpcStatusOk },
      contextValues: req.contextValues,
    });
    const compression = compressionNegotiate(opt.acceptCompression, encoding, req.header.get(headerAcceptEncoding), headerAcceptEncoding);
    if (compression.response) context.responseHeader.set(headerEncoding, compression.response.name);
    let answer: Uint8Array | undefined;
    try {
      if (opt.requestGate) await opt.requestGate(context);
      const result = await invokeUnaryImplementation(spec, context, message, interceptors);
      const enveloped = await envelopeCompress({ flags: 0, data: output.serialize(result) }, compression.response, opt.compressMinBytes);
      answer = encodeEnvelope(enveloped.flags, enveloped.data);
      context.abort(); // the call is complete (the request gate gives it a shared reason)
    } catch (e) {
      context.abort(e);
      // A status Connect cannot write (it throws) rejects the call, as in Connect's handler.
      setTrailerStatus(context.responseTrailer, e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e));
    }
    return { status: 200, header: context.responseHeader, trailer: context.responseTrailer, body: new Once(answer) };
  };
}

/** Throws the signal's reason (the client's reset, the deadline) instead of calling the method. */
const stopWhenAborted: Interceptor = (next) => (req) => {
  req.signal.throwIfAborted();
  return next(req);
};

/** The answer's body: its one envelope, or nothing (an error: the status is in the trailers). */
class Once implements AsyncIterable<Uint8Array>, AsyncIterator<Uint8Array> {
  #chunk: Uint8Array | undefined;

  constructor(chunk: Uint8Array | undefined) {
    this.#chunk = chunk;
  }

  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    return this;
  }

  next(): Promise<IteratorResult<Uint8Array>> {
    const chunk = this.#chunk;
    this.#chunk = undefined;
    return Promise.resolve(chunk === undefined ? { done: true, value: undefined } : { done: false, value: chunk });
  }

  return(): Promise<IteratorResult<Uint8Array>> {
    this.#chunk = undefined;
    return Promise.resolve({ done: true, value: undefined });
  }
}

/**
 * The request body for Connect's full handler when the fast path steps aside: the chunks already
 * read, then the rest of the body (or the error reading it failed with).
 */
function replay(chunks: readonly Uint8Array[], rest?: AsyncIterator<Uint8Array>, failure?: unknown): AsyncIterable<Uint8Array> {
  return {
    async *[Symbol.asyncIterator]() {
      yield* chunks;
      if (failure !== undefined) throw failure;
      if (!rest) return;
      let done = false;
      try {
        for (let r = await rest.next(); !(done = r.done === true); r = await rest.next()) yield r.value;
      } finally {
        // Connect stopped early (a limit): the rest is dropped, as when it reads the body itself.
        if (!done) await rest.return?.();
      }
    },
  };
}
