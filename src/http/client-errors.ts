/**
 * Errors Node's HTTP/1.1 parser raises before any request exists (Node's `clientError` event):
 * an unknown method token, a header line without a colon, headers over the limit, a client too
 * slow to send its headers or its body. They are answered on the raw socket, wherever the
 * connection still allows an answer, with the documented ResponseStatus body and an
 * X-Request-Id, as every other error; then the connection is closed (the parser cannot go on).
 */
import { randomUUID } from "node:crypto";
import { STATUS_CODES, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { ConnectError } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { apiError } from "../common/errors.js";
import { responseOn } from "../common/internals.js";
import type { ConnectionLimits } from "../config.js";
import { errorAnswer, JSON_CONTENT_TYPE, REQUEST_ID_HEADER } from "./http-layer.js";

/** What Node passes with `clientError`: llhttp's code (HPE_…) or Node's, and llhttp's reason. */
type ParserError = Error & { code?: string; reason?: string };

/** The API error a parser error stands for, in the words a client can act on. */
export function clientErrorOf(err: ParserError, limits: ConnectionLimits): ConnectError {
  switch (err.code) {
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return apiError(
        "RequestTimeout",
        `The request did not arrive in time: its headers must arrive within ${limits.headersTimeoutMs} ms and the whole request within ${limits.requestTimeoutMs} ms.`,
      );
    case "HPE_HEADER_OVERFLOW":
      return apiError("HeadersTooLarge", `The request headers are larger than the limit of ${limits.maxHeaderBytes} bytes.`);
    case "HPE_INVALID_METHOD":
      return malformed("the method is not one HTTP knows");
    case "HPE_INVALID_HEADER_TOKEN":
      return malformed("a header line is not `Name: value`");
    default:
      return malformed(err.reason ? err.reason.replace(/\.$/, "") : "it cannot be parsed");
  }
}

function malformed(why: string): ConnectError {
  return apiError("MalformedRequest", `The request is not valid HTTP/1.1: ${why}.`);
}

/**
 * An error answer written outside Fastify's reply: the body and status of the HTTP layer's one
 * error writer (errorAnswer), the error's metadata (Allow…), its content type, an X-Request-Id,
 * and `Connection: close`.
 */
export function closingErrorResponse(
  reason: unknown,
  requestId: string = randomUUID(),
): { httpStatus: number; headers: Record<string, string>; body: string; requestId: string } {
  const { httpStatus, body } = errorAnswer(reason);
  const headers: Record<string, string> = {};
  if (reason instanceof ConnectError) reason.metadata.forEach((value, name) => (headers[name] = value));
  Object.assign(headers, {
    "content-type": JSON_CONTENT_TYPE,
    "content-length": String(Buffer.byteLength(body)),
    [REQUEST_ID_HEADER]: requestId,
    connection: "close",
  });
  return { httpStatus, headers, body, requestId };
}

/** The same as a whole HTTP/1.1 response in bytes, for a socket no request object was made for. */
export function rawErrorResponse(reason: unknown, givenId?: string): { text: string; httpStatus: number; requestId: string } {
  const { httpStatus, headers, body, requestId } = closingErrorResponse(reason, givenId);
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return { text: `HTTP/1.1 ${httpStatus} ${STATUS_CODES[httpStatus] ?? "Error"}\r\n${lines.join("")}\r\n${body}`, httpStatus, requestId };
}

/**
 * The `clientErrorHandler` server option of Fastify (its own writes `{"error","statusCode"}`
 * without a request id). When requests before the refused one are still being answered on the
 * connection (pipelining), the refusal waits for their answers; a timeout refuses the request
 * in flight itself, so it is answered at once unless that answer has begun (writing one then
 * would corrupt it on the wire: the connection is only cut).
 */
export function createClientErrorHandler(limits: ConnectionLimits): (this: FastifyInstance, err: ParserError, socket: Socket) => void {
  return function (err, socket) {
    if (err.code === "ECONNRESET" || socket.destroyed) return;
    const log = this.log;
    const error = clientErrorOf(err, limits);
    const timedOut = err.code === "ERR_HTTP_REQUEST_TIMEOUT";
    // A peer that never lets earlier answers finish does not hold the connection for ever.
    const giveUp = setTimeout(() => socket.destroy(), limits.requestTimeoutMs + LINGER_MS);
    giveUp.unref();
    socket.once("close", () => clearTimeout(giveUp));
    let done = false;
    let waitingOn: ServerResponse | undefined;
    const answer = () => {
      if (done || socket.destroyed) return;
      const res = responseOn(socket);
      if (res && !timedOut) {
        // Answers to earlier requests first; the next one Node assigns is checked in turn.
        if (res === waitingOn) return;
        waitingOn = res;
        const next = () => setImmediate(answer);
        res.once("finish", next);
        res.once("close", next);
        return;
      }
      done = true;
      if (!socket.writable || res?.headersSent) {
        socket.destroy();
        return;
      }
      const { text, httpStatus, requestId } = rawErrorResponse(error);
      log.info({ requestId, status: httpStatus, parserCode: err.code, protocol: "http" }, "request refused before routing");
      // The parser's state is lost: the connection cannot go on. A lingering close (end, then
      // destroy a moment later) rather than Node's write-and-destroy, so that bytes the client
      // is still sending do not make the kernel reset the connection before the answer is read.
      socket.end(text);
      const cut = setTimeout(() => socket.destroy(), LINGER_MS);
      cut.unref();
      socket.once("close", () => clearTimeout(cut));
    };
    answer();
  };
}

/** How long a refused connection may linger after its answer before it is cut, ms. */
const LINGER_MS = 2000;
