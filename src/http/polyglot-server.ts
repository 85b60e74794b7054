import { Server as HttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Http2Server, Http2Session, IncomingHttpHeaders, ServerHttp2Stream } from "node:http2";
import type { Socket } from "node:net";
import { createServer } from "@httptoolkit/httpolyglot";
import { checkInternals, compatStreamListener, connectionsTrackingListeners, innerServers, unmarkStreamBase } from "../common/internals.js";
import { continueOnlyWithinLimit, refuseConnectMethod, refusedForMissingHost } from "./early-answers.js";
import { closeWhenIdle, http1Options, http2Options, oneRequestAtATime } from "./connection-limits.js";
import { type ConnectionLimits } from "../config.js";

/** How long requests in flight get to finish once the server drains before their connections are cut, ms. */
export const DRAIN_TIMEOUT_MS = 5000;

interface Connection {
  kind: "unknown" | "h1" | "h2";
  /** HTTP/1.1 responses not yet closed on this connection. */
  responses: Set<ServerResponse>;
}

/** Takes an h2 stream and serves it, or returns false to leave it to Node's compatibility layer (and Fastify). */
export type StreamHandler = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => boolean;

/** The listening server plus the two close hooks Fastify calls (with forceCloseConnections "idle"). */
export type PolyglotServer = HttpServer & {
  closeIdleConnections(): void;
  closeHttp2Sessions(): void;
  /** Lets `handler` take h2 streams before Node's compatibility layer (and so Fastify) sees them. */
  serveStreams(handler: StreamHandler): void;
};

function endSocket(socket: Socket): void {
  if (socket.destroyed) return;
  socket.once("finish", () => socket.destroy());
  socket.end();
}

/**
 * httpolyglot marks every sniffed h2c socket "not stream-base" (a workaround for HTTP/2 tunnelled
 * in HTTP/2), so Node ran each gRPC session through a JavaScript stream wrapper: about twice the
 * CPU of the native path per call. For a plain TCP socket the native path is safe (Node hands the
 * session the bytes httpolyglot sniffed and put back), so this undoes the mark before Node's own
 * HTTP/2 connection listener sees the socket.
 */
function nativeH2c(server: object): void {
  innerServers(server).http2.prependListener("connection", unmarkStreamBase);
}

/**
 * Puts `take` in front of Node's HTTP/2 compatibility layer: each new stream is offered to it
 * first, and only the streams it leaves become request/response objects for Fastify. The
 * compatibility layer is the 'stream' listener Node adds when the h2 server gets its request
 * listener (checkInternals has made sure it is there).
 */
function divertStreams(server: object): (take: StreamHandler) => void {
  const h2 = innerServers(server).http2;
  const compat = compatStreamListener(h2);
  return (take) => {
    if (!compat) return;
    const listener = function (this: Http2Server, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, ...rest: unknown[]) {
      if (!take(stream, headers)) compat.call(this, stream, headers, ...rest);
    };
    h2.removeListener("stream", compat);
    h2.prependListener("stream", listener);
  };
}

/**
 * Refuses an HTTP/1.1 request without Host (HTTP/1.1 requires one), and gives a request that
 * names no authority (HTTP/1.0 without Host, an h2 stream without :authority) a placeholder one. Connect builds each call's URL from it and refuses the call when
 * there is none, which connect-fastify turned into an empty 200; routing only reads the path.
 */
function withAuthority(handler: (req: IncomingMessage, res: ServerResponse) => void): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (refusedForMissingHost(req, res)) return;
    if ("authority" in req) {
      if ((req as { authority?: string }).authority === undefined) Object.defineProperty(req, "authority", { value: "localhost" });
    } else if (req.headers.host === undefined) {
      req.headers.host = "localhost";
    }
    handler(req, res);
  };
}

/**
 * HTTP/1.1 and h2c on one port: httpolyglot sniffs each connection (curl and browsers speak HTTP/1.1,
 * gRPC clients h2c). It is a bare net.Server, so the graceful close a node:http server has is built
 * here, for Fastify's close():
 * - closeIdleConnections: HTTP/1.1 connections with no request in flight (and connections that have
 *   not sent a request yet) are closed at once; the others are closed right after their last response.
 * - closeHttp2Sessions: every h2 session gets GOAWAY; its open streams finish, new ones are refused.
 * Meanwhile server.close() refuses new connections. Whatever is still open after drainTimeoutMs is cut.
 * The connection limits (src/http/connection-limits.ts) go to the inner servers: Fastify sets
 * its timeouts on the outer net.Server, where they do nothing.
 */
export function createPolyglotServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  opts: { limits: ConnectionLimits; bodyLimit: number; drainTimeoutMs?: number },
): PolyglotServer {
  const { limits } = opts;
  const server = createServer(
    { http: http1Options(limits), http2: http2Options(limits) },
    oneRequestAtATime(withAuthority(handler), limits.maxPipelinedRequests),
  );
  // Before anything relies on them: an upgrade that removed one stops the service here, by name.
  checkInternals({ server });
  nativeH2c(server);
  const serveStreams = divertStreams(server);
  // Node enforces headersTimeout/requestTimeout from a timer that an HTTP server starts when it
  // emits "listening", which the inner one never does: it is handed connections, not a port.
  const inner = innerServers(server).http1;
  // On the inner server itself: httpolyglot would add listeners of the outer one to the h2 server too.
  refuseConnectMethod(inner);
  continueOnlyWithinLimit(inner, opts.bodyLimit);
  let tracking = false;
  // httpolyglot adds listeners of the outer server to the inner ones too: hence the flag.
  server.on("listening", () => {
    if (tracking) return;
    tracking = true;
    // Only Node's own listener, which starts that timer: the inner server also holds copies of
    // the outer server's listeners (Fastify's "Server listening at" line among them), and those
    // must not run a second time.
    for (const l of connectionsTrackingListeners(inner)) l.call(inner);
  });
  // Stops that timer (the inner server holds no port, so close() frees nothing else).
  server.on("close", () => {
    if (!tracking) return;
    tracking = false;
    inner.close();
  });
  const connections = new Map<Socket, Connection>();
  const sessions = new Set<Http2Session>();
  let draining = false;
  let drainTimer: NodeJS.Timeout | undefined;

  const connection = (socket: Socket): Connection => {
    let c = connections.get(socket);
    if (!c) {
      c = { kind: "unknown", responses: new Set() };
      connections.set(socket, c);
      socket.once("close", () => connections.delete(socket));
    }
    return c;
  };

  // httpolyglot forwards every listener added to it to its sub-servers too; `this` tells which one calls.
  server.on("connection", function (this: unknown, socket: Socket) {
    const c = connection(socket);
    if (this instanceof HttpServer) c.kind = "h1";
    else if (this !== server) c.kind = "h2";
  });
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    if (req.httpVersionMajor !== 1) return;
    const socket = req.socket;
    const c = connection(socket);
    c.kind = "h1";
    c.responses.add(res);
    if (draining) res.shouldKeepAlive = false;
    res.once("close", () => {
      c.responses.delete(res);
      if (draining && c.responses.size === 0) endSocket(socket);
    });
  });
  server.on("session", (s: Http2Session) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
    closeWhenIdle(s, limits.idleTimeoutMs);
  });
  server.once("close", () => clearTimeout(drainTimer));

  const closeIdleConnections = () => {
    if (draining) return;
    draining = true;
    for (const [socket, c] of connections) {
      if (c.kind === "h2") continue; // closeHttp2Sessions sends those GOAWAY
      if (c.responses.size === 0) {
        socket.destroy();
        continue;
      }
      // Answer what is in flight with `Connection: close`; a response already under way ends the connection on close.
      for (const res of c.responses) if (!res.headersSent) res.shouldKeepAlive = false;
    }
    drainTimer = setTimeout(() => {
      for (const socket of connections.keys()) socket.destroy();
    }, opts.drainTimeoutMs ?? DRAIN_TIMEOUT_MS);
    drainTimer.unref();
  };
  const closeHttp2Sessions = () => {
    for (const s of sessions) s.close();
  };
  return Object.assign(server, { closeIdleConnections, closeHttp2Sessions, serveStreams }) as unknown as PolyglotServer;
}
