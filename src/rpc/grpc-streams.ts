/**
 * gRPC over HTTP/2 served on Node's native streams: the bytes of each h2 stream go straight to
 * Connect's handler for the method (the same router handlers, wrappers and ordered interceptors
 * the Fastify plugin serves over HTTP/1.1), with no Node compatibility request/response objects
 * and no Fastify routing in between. A gRPC Send SMS spent about as much CPU in those layers as
 * in Connect and the send itself (docs/benchmarks.md, "gRPC through Connect"). A unary call in
 * the common shape is then answered by the handler's innermost layer without Connect's streaming
 * pipeline, still with Connect's own pieces (src/rpc/grpc-unary.ts).
 *
 * Only gRPC calls are taken (POST, a Connect route, a gRPC Content-Type that Fastify would have
 * handed to Connect untouched); every other h2 request (REST, Connect and gRPC-Web over h2, an
 * unknown path) goes on to Fastify as before. What Fastify did for these calls is done here:
 * the request id (the client's sane X-Request-Id or a UUID, echoed in the response headers), the
 * request's logger, the "request received" and completion lines and the metrics (through the
 * observability layer's startCall). Body limits, read errors and the charset rules live in the
 * handlers themselves; connection limits, GOAWAY on close and the drain are the server's.
 */
import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import type { FastifyBaseLogger } from "fastify";
import { lazyChildLoggerFactory } from "../common/logger.js";
import type { Observability } from "../ops/observability.js";
import { REQUEST_ID_HEADER, requestIdOf, webHeaders } from "../http/http-layer.js";
import type { StreamHandler } from "../http/polyglot-server.js";

/** The Content-Types Connect's gRPC handler serves; the Fastify plugin passes exactly these through unparsed. */
const GRPC_CONTENT_TYPE = /^application\/grpc(?:\+(?:(json)(?:; ?charset=utf-?8)?|proto))?$/i;

/** An authority safe to put in the call's URL (Connect builds one; nothing routes on it). */
const SANE_AUTHORITY = /^[\w.-]+(?::\d{1,5})?$|^\[[\d:a-f.]+\](?::\d{1,5})?$/i;

type Logger = Parameters<typeof lazyChildLoggerFactory>[0];

/** What serving gRPC calls on streams needs. */
export interface GrpcStreamOptions {
  /** The Connect router's handlers, as the Fastify plugin serves them. */
  handlers: readonly UniversalHandler[];
  /** The app's logger: each call logs through a child carrying its request id. */
  log: FastifyBaseLogger;
  /** The observability layer: context values, completion line and metrics of each call. */
  startCall: Observability["startCall"];
}

/** The stream handler serving gRPC calls of `handlers` on native HTTP/2 streams. */
export function grpcStreamHandler(opts: GrpcStreamOptions): StreamHandler {
  const byPath = new Map<string, UniversalHandler>();
  for (const h of opts.handlers) byPath.set(h.requestPath, h);
  return (stream, headers) => {
    if (headers[":method"] !== "POST") return false;
    const contentType = headers["content-type"];
    if (contentType === undefined || !GRPC_CONTENT_TYPE.test(contentType)) return false;
    const path = headers[":path"] ?? "";
    const q = path.indexOf("?");
    const handler = byPath.get(q < 0 ? path : path.slice(0, q));
    if (!handler) return false;
    // Node emits 'stream' while nghttp2 is still reading the packet the HEADERS came in, and runs
    // promise callbacks between its frames: a RST_STREAM right behind them (a rapid reset) closes
    // the stream only later. Once the packet is read (the loop's check phase) a reset stream shows
    // as closed, and it gets no work at all: no log line, no metrics, no handler, no answer.
    // Its error (a reset with a code other than NO_ERROR or CANCEL) must have a listener from
    // now on: an 'error' event nobody listens to would end the process.
    stream.on("error", ignore);
    setImmediate(startCall, opts, handler, stream, headers);
    return true;
  };
}

/** A reset stream's error: its 'close' (and rstCode) reports it. */
function ignore(): void {}

function startCall(opts: GrpcStreamOptions, handler: UniversalHandler, stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
  if (stream.closed || stream.destroyed) return;
  serve(opts, handler, stream, headers);
}

function serve(opts: GrpcStreamOptions, handler: UniversalHandler, stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
  const requestId = requestIdOf({ headers });
  const log = lazyChildLoggerFactory(opts.log as Logger, { requestId }, {}) as unknown as FastifyBaseLogger;
  const route = handler.requestPath;
  log.debug({ method: "POST", route }, "request received");
  const call = opts.startCall({ method: "POST", route, protocol: "grpc", log, clientAddress: stream.session?.socket?.remoteAddress });
  // Aborted only when the stream closes before the answer is complete (the client went away or
  // reset it): no AbortError is made for a call that ends normally.
  const abort = new AbortController();
  let status = 200;
  const answer: AnswerState = { ended: false, trailersSent: false };
  stream.once("close", () => {
    // Served when the client got the whole answer (its trailers went out, or it ended and the
    // stream closed cleanly). Else the client reset the stream: the abort stops the call at its
    // next step (src/rpc/grpc-unary.ts), its answer is never written, and it counts as cut off.
    if (answer.trailersSent || (answer.ended && stream.rstCode === constants.NGHTTP2_NO_ERROR)) return call.finish(status, false);
    abort.abort(new ConnectError(`the client closed the stream (HTTP/2 code ${stream.rstCode ?? 0})`, Code.Canceled));
    call.finish(status, true);
  });
  const authority = headers[":authority"] ?? headers.host;
  const url = `http://${authority !== undefined && SANE_AUTHORITY.test(authority) ? authority : "localhost"}${headers[":path"]}`;
  handler({
    httpVersion: "2.0",
    method: "POST",
    url,
    header: webHeaders(headers),
    body: requestBody(stream),
    signal: abort.signal,
    contextValues: call.values,
  })
    .then((res) => {
      status = res.status;
      return writeResponse(res, stream, requestId, answer);
    })
    .catch((reason: unknown) => {
      if (ConnectError.from(reason).code !== Code.Aborted && !stream.closed)
        log.error({ err: reason }, `handler for rpc ${handler.method.name} of ${handler.service.typeName} failed`);
      // Never leave the client waiting on a stream nobody will answer.
      if (!stream.closed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
    });
}

/** How far the answer of a call got: its body ended, its trailers sent. */
interface AnswerState {
  ended: boolean;
  trailersSent: boolean;
}

function nodeHeaders(from: Headers, into: Record<string, string>): Record<string, string> {
  from.forEach((value, name) => {
    into[name] = value;
  });
  return into;
}

/**
 * The request body as the async iterable Connect reads: each read takes what the stream has
 * buffered (paused mode, so HTTP/2 flow control holds a client back while Connect is busy).
 * If Connect stops early (a body over the limit), the rest is read and dropped, so that the
 * stream can finish once the answer is sent.
 */
function requestBody(stream: ServerHttp2Stream): AsyncIterable<Uint8Array> {
  return { [Symbol.asyncIterator]: () => new BodyReader(stream) };
}

const DONE: IteratorResult<Uint8Array> = Object.freeze({ done: true, value: undefined });

/**
 * One reader per call, with one set of stream listeners for the whole body (a unary request is
 * usually one chunk and the end): a reader made of closures per read allocated ~3 KB a call.
 */
class BodyReader implements AsyncIterator<Uint8Array> {
  #stream: ServerHttp2Stream;
  #stopped = false;
  #listening = false;
  #wake: (() => void) | undefined;

  constructor(stream: ServerHttp2Stream) {
    this.#stream = stream;
  }

  #onEvent = (): void => {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  };

  #unlisten(): void {
    if (!this.#listening) return;
    this.#listening = false;
    this.#stream.off("readable", this.#onEvent).off("end", this.#onEvent).off("close", this.#onEvent);
  }

  next(): Promise<IteratorResult<Uint8Array>> {
    if (this.#stopped) return Promise.resolve(DONE);
    const stream = this.#stream;
    // A stream closed before its answer was reset by the client, even when its body ended
    // (RST_STREAM with NO_ERROR ends it cleanly): nobody can get an answer, so the call stops here.
    if (stream.closed || stream.destroyed) {
      this.#unlisten();
      return Promise.reject(closedEarly(stream));
    }
    const chunk = stream.read() as Buffer | null;
    if (chunk !== null) return Promise.resolve({ done: false, value: chunk });
    if (stream.readableEnded) {
      this.#unlisten();
      return Promise.resolve(DONE);
    }
    if (!this.#listening) {
      this.#listening = true;
      stream.on("readable", this.#onEvent).on("end", this.#onEvent).on("close", this.#onEvent);
    }
    return new Promise<void>((resolve) => (this.#wake = resolve)).then(() => this.next());
  }

  return(): Promise<IteratorResult<Uint8Array>> {
    if (!this.#stopped) {
      this.#stopped = true;
      this.#unlisten();
      // Read and drop the rest, so that the stream can finish once the answer is sent.
      this.#stream.on("data", () => undefined);
      this.#stream.resume();
    }
    return Promise.resolve(DONE);
  }

  throw(e?: unknown): Promise<IteratorResult<Uint8Array>> {
    return this.return().then(() => Promise.reject(e as Error));
  }
}

function closedEarly(stream: ServerHttp2Stream): ConnectError {
  return new ConnectError(`the request stream closed before its end (HTTP/2 code ${stream.rstCode ?? 0})`, Code.Canceled);
}

/**
 * Writes Connect's answer on the stream as connect-node writes it on a response: the headers
 * once the first body chunk is there (the method may still set headers until then), the body,
 * then the trailers (gRPC's status). A write error is reported to the handler through its
 * iterator's throw, as connect-node does.
 */
async function writeResponse(res: UniversalServerResponse, stream: ServerHttp2Stream, requestId: string, answer: AnswerState): Promise<void> {
  const it = res.body?.[Symbol.asyncIterator]();
  let writing = false;
  try {
    let chunk: IteratorResult<Uint8Array> = it ? await it.next() : { done: true, value: undefined };
    if (stream.destroyed) throw new ConnectError("the client closed the stream", Code.Aborted);
    const head: Record<string, string> = { ":status": String(res.status), [REQUEST_ID_HEADER]: requestId };
    const trailer = res.trailer;
    stream.respond(res.header ? nodeHeaders(res.header, head) : head, { waitForTrailers: trailer !== undefined });
    if (trailer) {
      stream.once("wantTrailers", () => {
        stream.sendTrailers(nodeHeaders(trailer, {}));
        answer.trailersSent = true;
      });
    }
    for (; chunk.done !== true; chunk = await it!.next()) {
      writing = true;
      await write(stream, chunk.value);
      writing = false;
    }
    answer.ended = true;
    await new Promise<void>((resolve, reject) => {
      stream.end((err?: Error | null) => (err ? reject(err) : resolve()));
    });
  } catch (e) {
    if (writing) it?.throw?.(e).catch(() => undefined);
    throw e;
  } finally {
    it?.return?.().catch(() => undefined);
  }
}

function write(stream: ServerHttp2Stream, data: Uint8Array): Promise<void> {
  if (stream.write(data)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      stream.off("drain", onDrain);
      stream.off("close", onClose);
      if (err) reject(err);
      else resolve();
    };
    const onDrain = () => done();
    const onClose = () => done(new ConnectError("the client closed the stream", Code.Aborted));
    stream.on("drain", onDrain);
    stream.on("close", onClose);
  });
}
