import type { IncomingMessage, RequestListener, ServerOptions as HttpServerOptions, ServerResponse } from "node:http";
import type { Http2Session, ServerOptions as Http2ServerOptions, ServerHttp2Stream } from "node:http2";
import type { Socket } from "node:net";
import { apiError } from "../common/errors.js";
import { closingErrorResponse } from "./client-errors.js";
import { requestIdOf } from "./http-layer.js";
import type { ConnectionLimits } from "../config.js";

/**
 * Streams a client may reset on one HTTP/2 connection at once (nghttp2's token bucket: this many,
 * refilled at STREAM_RESET_RATE a second); past it, nghttp2 answers GOAWAY and the connection ends.
 * Twice the streams a connection may have open, so that a client cancelling every call it has in
 * flight, twice, is never cut off; a rapid-reset flood is, after a few hundred streams.
 */
export function streamResetBurst(limits: ConnectionLimits): number {
  return Math.max(200, 2 * limits.maxStreamsPerConnection);
}

/** Resets a second the bucket above refills with (nghttp2's default). */
export const STREAM_RESET_RATE = 33;

/**
 * Streams Node refuses on one connection (ENHANCE_YOUR_CALM, opened past what the session can
 * take) and frames nghttp2 finds invalid before the session is closed: Node's defaults are 100
 * and 1000; a client that honours the protocol never gets near either.
 */
export const MAX_SESSION_REJECTED_STREAMS = 100;
export const MAX_SESSION_INVALID_FRAMES = 100;

/** Options of the HTTP/1.1 server behind the one port. */
export function http1Options(limits: ConnectionLimits): HttpServerOptions {
  return {
    maxHeaderSize: limits.maxHeaderBytes,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    // Node checks both timeouts on this period (30 s by default, which would let a slow client
    // hold a connection up to 30 s past them).
    connectionsCheckingInterval: Math.max(100, Math.min(1000, limits.headersTimeoutMs)),
    // Node answers a missing Host with a bare 400; src/http/early-answers.ts answers it documented.
    requireHostHeader: false,
  };
}

/** Options of the h2c server behind the one port. */
export function http2Options(limits: ConnectionLimits): Http2ServerOptions {
  return {
    settings: { maxConcurrentStreams: limits.maxStreamsPerConnection, maxHeaderListSize: limits.maxHeaderBytes },
    // Both must be set for nghttp2 to take either.
    streamResetBurst: streamResetBurst(limits),
    streamResetRate: STREAM_RESET_RATE,
    maxSessionRejectedStreams: MAX_SESSION_REJECTED_STREAMS,
    maxSessionInvalidFrames: MAX_SESSION_INVALID_FRAMES,
  };
}

/**
 * Closes an HTTP/2 session (GOAWAY, then the connection) once it has had no stream open and no
 * frame for `idleMs`: an idle session otherwise holds its socket, and its file descriptor, for as
 * long as the client likes. A session with a stream in flight is not idle, however long the
 * stream takes.
 */
export function closeWhenIdle(session: Http2Session, idleMs: number): void {
  let open = 0;
  session.on("stream", (stream: ServerHttp2Stream) => {
    open++;
    stream.once("close", () => open--);
  });
  session.on("timeout", () => {
    if (session.closed || session.destroyed) return;
    // Busy: look again after another period (the timer restarts with each frame anyway).
    if (open > 0) session.setTimeout(idleMs);
    else session.close();
  });
  session.setTimeout(idleMs);
}

interface SocketQueue {
  /** Requests parsed but not started, in order. */
  waiting: (() => void)[];
  /** Set once a request was refused: the connection closes after that answer, so nothing later may run. */
  refusing: boolean;
  /** A request of the connection is being served. */
  busy: boolean;
  /** Starts the next waiting request when the one being served closes (one per connection, not per request). */
  next: () => void;
}

/**
 * Serves an HTTP/1.1 connection's pipelined requests one after the other, as HTTP/1.1 answers
 * them, instead of all at once (Node starts every pipelined request it has parsed). At most
 * `maxQueued` may wait; a request past that is answered 429 RateLimited with `Connection: close`,
 * after the answers to those before it, and nothing after it runs. HTTP/2 passes straight through:
 * its streams are capped by SETTINGS_MAX_CONCURRENT_STREAMS.
 */
export function oneRequestAtATime(handler: RequestListener, maxQueued: number): RequestListener {
  const queues = new WeakMap<Socket, SocketQueue>();
  const start = (self: unknown, q: SocketQueue, req: IncomingMessage, res: ServerResponse) => {
    q.busy = true;
    res.once("close", q.next);
    handler.call(self, req, res);
  };
  return function (this: unknown, req: IncomingMessage, res: ServerResponse) {
    if (req.httpVersionMajor !== 1) return handler.call(this, req, res);
    const socket = req.socket;
    // One queue per connection for its whole life (not one per request: a WeakMap entry, or
    // closures, made and dropped per request are garbage-collector work on every call).
    let q = queues.get(socket);
    if (!q) {
      const queue: SocketQueue = {
        waiting: [],
        refusing: false,
        busy: false,
        next: () => {
          // Requests a closed connection was still holding never run: nobody would see their answer.
          const following = socket.destroyed ? undefined : queue.waiting.shift();
          if (following) following();
          else queue.busy = false;
        },
      };
      queues.set(socket, (q = queue));
    }
    if (!q.busy && !q.refusing) {
      start(this, q, req, res);
    } else if (q.refusing || q.waiting.length >= maxQueued) {
      q.refusing = true;
      refusePipelined(req, res, maxQueued);
    } else {
      const queue = q;
      q.waiting.push(() => start(this, queue, req, res));
    }
  };
}

function refusePipelined(req: IncomingMessage, res: ServerResponse, maxQueued: number): void {
  const { httpStatus, headers, body } = closingErrorResponse(
    apiError(
      "RateLimited",
      `Too many pipelined requests on one connection: at most ${maxQueued} may wait behind the one being served. This connection closes after this answer; send the rest on a new one.`,
    ),
    requestIdOf(req),
  );
  res.writeHead(httpStatus, headers);
  res.end(body);
}
