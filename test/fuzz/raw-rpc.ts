/**
 * Raw RPC requests (any headers, any bytes) over HTTP/1.1 and h2c, and reading their answers
 * back into ConnectErrors per protocol: for malformed framing that no generated client can send.
 */
import { request as httpRequest } from "node:http";
import { connect as http2Connect, type ClientHttp2Session, type IncomingHttpHeaders } from "node:http2";
import { gunzipSync } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeFromString, codeToHttpStatus, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";

/** The RPC wire protocols, as raw requests speak them. */
export type RawProtocol = "connect" | "grpc" | "grpc-web";

/** A raw request to `/<service>/<method>`. */
export interface RawRequest {
  protocol: RawProtocol;
  httpMethod: string;
  path: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** A raw answer: HTTP status, headers, trailers (h2 only), body. */
export interface RawAnswer {
  status: number;
  headers: Headers;
  trailers: Headers;
  body: Buffer;
}

function toHeaders(h: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(":") || v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [String(v)]) out.append(k, one);
  }
  return out;
}

/**
 * Sends over HTTP/1.1 (Connect, gRPC-Web), on a connection of its own: a server may close a
 * connection after refusing a request whose body it did not read, and a kept-alive socket
 * reused just then fails with ECONNRESET, which would be the test's doing, not the server's.
 */
export function sendHttp1(baseUrl: string, req: RawRequest, timeoutMs: number): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    // Content-Length always: a GET body without it is a broken HTTP message, not a broken RPC.
    const headers = { ...req.headers, "content-length": String(req.body.byteLength) };
    const r = httpRequest(baseUrl + req.path, { method: req.httpMethod, headers, timeout: timeoutMs, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, headers: toHeaders(res.headers), trailers: toHeaders(res.trailers), body: Buffer.concat(chunks) }),
      );
      res.on("error", reject);
    });
    r.on("timeout", () => r.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    r.on("error", reject);
    r.end(Buffer.from(req.body));
  });
}

/** Sends over an h2c session (gRPC). */
export function sendHttp2(session: ClientHttp2Session, req: RawRequest, timeoutMs: number): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    // endStream: false, or Node ends a GET's stream at once and the body cannot be written.
    const stream = session.request({ ":method": req.httpMethod, ":path": req.path, ...req.headers }, { endStream: false });
    const timer = setTimeout(() => stream.close(), timeoutMs);
    let head: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => (head = h));
    stream.on("trailers", (h) => (trailers = h));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      clearTimeout(timer);
      resolve({ status: Number(head[":status"] ?? 0), headers: toHeaders(head), trailers: toHeaders(trailers), body: Buffer.concat(chunks) });
    });
    stream.on("close", () => {
      clearTimeout(timer);
      if (head[":status"] === undefined) reject(new Error(`stream closed without an answer (rst code ${stream.rstCode})`));
    });
    stream.on("error", reject);
    stream.end(Buffer.from(req.body));
  });
}

/** An h2c session to the app (prior knowledge, as gRPC clients connect). */
export function h2Session(baseUrl: string): ClientHttp2Session {
  const session = http2Connect(baseUrl);
  session.on("error", () => undefined); // a refused stream is reported on the stream
  return session;
}

/** The frames of a gRPC / gRPC-Web body; `rest` holds bytes that do not make a whole frame. */
export function readFrames(body: Buffer): { frames: { flags: number; data: Buffer }[]; rest: Buffer } {
  const frames: { flags: number; data: Buffer }[] = [];
  let i = 0;
  while (body.length - i >= 5) {
    const length = body.readUInt32BE(i + 1);
    if (body.length - i - 5 < length) break;
    frames.push({ flags: body[i], data: body.subarray(i + 5, i + 5 + length) });
    i += 5 + length;
  }
  return { frames, rest: body.subarray(i) };
}

/** What a raw answer means: a success, an RPC error, or a plain HTTP refusal (405, 415...). */
export type RawOutcome =
  | { kind: "ok" }
  | { kind: "error"; error: ConnectError }
  /** A plain HTTP refusal (405, 415, 404...) before any RPC protocol answered: the REST error body (empty would be a defect). */
  | { kind: "http"; status: number; body: string }
  | { kind: "broken"; problem: string };

/** Reads a raw answer per protocol; `broken` when it is not a well-formed answer of that protocol. */
export function rawOutcome(protocol: RawProtocol, answer: RawAnswer): RawOutcome {
  const contentType = answer.headers.get("content-type") ?? "";
  const http = { kind: "http" as const, status: answer.status, body: answer.body.toString("utf8") };
  if (answer.body.length > 0 && contentType.startsWith("application/json") && answer.body.includes('"ResponseStatus"')) return http;
  if (protocol === "connect") {
    if (answer.status === 200) return { kind: "ok" };
    if (answer.body.length === 0) return http;
    if (!contentType.startsWith("application/json"))
      return { kind: "broken", problem: `error with content-type ${contentType}: ${answer.body.toString("utf8").slice(0, 200)}` };
    // An error body as large as the compression threshold comes compressed with the request's encoding, as Connect allows.
    const encoding = answer.headers.get("content-encoding") ?? "identity";
    if (encoding !== "identity" && encoding !== "gzip") return { kind: "broken", problem: `error body with content-encoding ${encoding}` };
    let body: Buffer;
    try {
      body = encoding === "gzip" ? gunzipSync(answer.body) : answer.body;
    } catch (e) {
      return { kind: "broken", problem: `error body that is not gzip: ${String(e)}` };
    }
    let error: ConnectError;
    try {
      error = errorFromJsonBytes(body, undefined, new ConnectError(`unreadable error body: ${body.toString("utf8").slice(0, 200)}`, Code.Unknown));
    } catch (e) {
      return { kind: "broken", problem: String(e) };
    }
    const json = JSON.parse(body.toString("utf8")) as { code?: string };
    if (json.code === undefined || codeFromString(json.code) === undefined)
      return { kind: "broken", problem: `error without a valid code: ${body.toString("utf8").slice(0, 200)}` };
    if (codeToHttpStatus(error.code) !== answer.status) return { kind: "broken", problem: `code ${json.code} sent with HTTP ${answer.status}` };
    return { kind: "error", error };
  }
  if (answer.status !== 200)
    return answer.body.length === 0 ? http : { kind: "broken", problem: `HTTP ${answer.status} with a body: ${http.body.slice(0, 200)}` };
  let trailer: Headers;
  if (protocol === "grpc") {
    trailer = answer.trailers.has("grpc-status") ? answer.trailers : answer.headers; // trailers-only answers carry it in the headers
  } else {
    const { frames, rest } = readFrames(answer.body);
    if (rest.length > 0) return { kind: "broken", problem: `${rest.length} trailing bytes` };
    const last = frames.at(-1);
    trailer = last && last.flags & 0x80 ? trailerParse(last.data) : answer.headers;
  }
  if (!trailer.has("grpc-status")) return { kind: "broken", problem: "no grpc-status" };
  const error = findTrailerError(trailer);
  return error ? { kind: "error", error } : { kind: "ok" };
}
