/**
 * Requests Node's HTTP/1.1 server would answer on its own, outside Fastify and the documented
 * body: an HTTP/1.1 request without `Host` (Node: a bare 400), the CONNECT method (Node: the
 * connection dropped without a word), and `Expect: 100-continue` (Node: `100 Continue` at once,
 * inviting a body the service is about to refuse). Each is decided here and answered in the
 * documented `{"ResponseStatus": …}` body with an X-Request-Id, or handed on to Fastify.
 */
import type { IncomingMessage, Server as HttpServer, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { apiError } from "../common/errors.js";
import { closingErrorResponse, rawErrorResponse } from "./client-errors.js";
import { requestIdOf } from "./http-layer.js";

/** The methods the service answers at all, the `Allow` of a CONNECT (which names no resource of ours). */
const SERVED_METHODS = "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS";

/** How long a refused CONNECT's connection may linger after its answer before it is cut, ms. */
const LINGER_MS = 2000;

/** The answer to an HTTP/1.1 request without `Host`, which HTTP/1.1 requires (RFC 9112, "Request Target"). */
export function missingHostError() {
  return apiError("MalformedRequest", "The request is not valid HTTP/1.1: it has no Host header.");
}

/** The answer to CONNECT: the service is no proxy. */
export function connectMethodError() {
  const err = apiError("MethodNotAllowed", `CONNECT is not allowed: this service is not a proxy; allowed: ${SERVED_METHODS}.`);
  err.metadata.set("allow", SERVED_METHODS);
  return err;
}

/**
 * True when the request was answered here (an HTTP/1.1 request without Host: 400
 * MalformedRequest, then the connection closes, as the request cannot be trusted to be framed as
 * the client meant). HTTP/1.0 needs no Host.
 */
export function refusedForMissingHost(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.httpVersionMajor !== 1 || req.httpVersionMinor === 0 || req.headers.host !== undefined) return false;
  const { httpStatus, headers, body } = closingErrorResponse(missingHostError(), requestIdOf(req));
  res.writeHead(httpStatus, headers);
  res.end(body);
  return true;
}

/**
 * Answers CONNECT on the HTTP/1.1 server (Node hands the socket over to a `connect` listener and,
 * without one, destroys it): 405 MethodNotAllowed in the documented body, then a lingering close
 * so that bytes the client still sends do not reset the connection before the answer is read.
 */
export function refuseConnectMethod(server: HttpServer): void {
  server.on("connect", (req: IncomingMessage, socket: Socket) => {
    if (socket.destroyed) return;
    const { text } = rawErrorResponse(connectMethodError(), requestIdOf(req));
    socket.on("error", () => socket.destroy());
    socket.end(text);
    socket.resume();
    const cut = setTimeout(() => socket.destroy(), LINGER_MS);
    cut.unref();
    socket.once("close", () => clearTimeout(cut));
  });
}

/**
 * Takes over Node's `Expect: 100-continue` handling: `100 Continue` only for a body the service
 * may accept. A declared Content-Length over `bodyLimit` is handed on without it, so the route
 * answers its 413 PayloadTooLarge (or whatever it answers first) before the client sends a byte
 * of the body; that connection then closes, as the unsent body leaves it unusable.
 */
export function continueOnlyWithinLimit(server: HttpServer, bodyLimit: number): void {
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    if (Number(req.headers["content-length"] ?? 0) > bodyLimit) res.shouldKeepAlive = false;
    else res.writeContinue();
    server.emit("request", req, res);
  });
}
