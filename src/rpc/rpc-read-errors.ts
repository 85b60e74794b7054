/**
 * Connect-ES blames the server for requests it cannot read: a binary body that is not a valid
 * protobuf message ("parse binary: premature EOF", invalid UTF-8) is `internal` (HTTP 500), and
 * an unknown Content-Encoding, a missing or an extra message in a unary gRPC stream are
 * `unimplemented` (HTTP 501). They are the client's doing, so they are answered here as
 * `invalid_argument` (HTTP 400 over Connect, grpc-status 3 over gRPC and gRPC-Web).
 *
 * Only errors raised before the interceptors ran are touched: until then Connect has only been
 * reading the request. An error of a method or of an interceptor is left as it is.
 *
 * And a call always ends with a status: when Connect fails to write its own (its gRPC status
 * writer throws on a message holding an unpaired surrogate, which its JSON parser quotes from
 * the request), the status is written here.
 */
import { Code, ConnectError, createContextKey, createContextValues, type Interceptor } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import {
  codeFromString,
  codeToHttpStatus,
  codeToString,
  encodeEnvelope,
  errorToJsonBytes,
  trailerFlag,
  trailerParse,
  trailerSerialize,
} from "../common/internals.js";

/** Set by markRequestRead: the request message was read and the interceptors are about to run. */
const kRequestRead = createContextKey<boolean>(false, { description: "request message read" });

/**
 * The Connect plugin's first interceptor (before the list every wire runs): Connect has read the
 * request message and the method's interceptors are about to run.
 */
export const markRequestRead: Interceptor = (next) => (req) => {
  req.contextValues.set(kRequestRead, true);
  return next(req);
};

/** Codes that put the fault on the server, which Connect uses for some unreadable requests. */
const SERVER_CODES = new Set<Code>([Code.Internal, Code.Unknown, Code.Unimplemented, Code.DataLoss]);

type Protocol = "connect" | "grpc" | "grpc-web";

function protocolOf(contentType: string): Protocol {
  if (contentType.startsWith("application/grpc-web")) return "grpc-web";
  if (contentType.startsWith("application/grpc")) return "grpc";
  return "connect";
}

/** A wrapper of the router's handler list (src/rpc/handler-wrappers.ts). */
export function blameClientForUnreadableRequests(handler: UniversalHandler): UniversalHandler {
  const wrapped = async (request: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
    // The Connect plugin always passes its contextValues: no copy of the request then.
    const values = request.contextValues ?? createContextValues();
    const unread = () => !values.get(kRequestRead);
    /** The status to end a call with when Connect could not write its own. */
    const lostStatus = () =>
      unread() ? new ConnectError("The request could not be read.", Code.InvalidArgument) : new ConnectError("internal error", Code.Internal);
    let response: UniversalServerResponse;
    try {
      response = await handler(request.contextValues ? request : { ...request, contextValues: values });
    } catch {
      return statusOnly(request.header.get("content-type") ?? "", lostStatus());
    }
    const contentType = response.header?.get("content-type") ?? "";
    switch (protocolOf(contentType)) {
      case "grpc-web":
        return relay(response, {
          chunk: (c) => fixGrpcWebTrailer(c, unread),
          error: () => grpcWebTrailer(lostStatus()),
        });
      case "grpc": {
        const trailer = response.trailer ?? new Headers();
        return relay(
          { ...response, trailer },
          {
            end: () => fixGrpcTrailer(trailer, unread),
            error: () => setStatus(trailer, lostStatus()),
          },
        );
      }
      case "connect":
        if (response.status >= 500 && unread() && !response.header?.has("content-encoding")) return fixConnectUnary(response);
        return response;
    }
  };
  return Object.assign(wrapped, {
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    supportedContentType: handler.supportedContentType,
    protocolNames: handler.protocolNames,
    allowedMethods: handler.allowedMethods,
  });
}

/** A Connect unary error: `{"code": ..., "message": ...}` with the code's HTTP status. */
async function fixConnectUnary(response: UniversalServerResponse): Promise<UniversalServerResponse> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of response.body ?? []) chunks.push(chunk);
  const bytes = Buffer.concat(chunks);
  let error: { code?: unknown };
  try {
    error = JSON.parse(bytes.toString("utf8")) as { code?: unknown };
  } catch {
    return { ...response, body: once(bytes) };
  }
  const code = typeof error.code === "string" ? codeFromString(error.code) : undefined;
  if (code === undefined || !SERVER_CODES.has(code)) return { ...response, body: once(bytes) };
  const body = Buffer.from(JSON.stringify({ ...error, code: codeToString(Code.InvalidArgument) }));
  const header = new Headers(response.header);
  header.set("content-length", String(body.byteLength));
  return { ...response, status: codeToHttpStatus(Code.InvalidArgument), header, body: once(body) };
}

/** gRPC: the status is in the HTTP trailers, final once the body has been written. */
function fixGrpcTrailer(trailer: Headers, unread: () => boolean): void {
  if (isServerStatus(trailer) && unread()) trailer.set("grpc-status", String(Code.InvalidArgument));
}

/** gRPC-Web: the status is in a trailer frame (flag 0x80) at the end of the body. */
function fixGrpcWebTrailer(chunk: Uint8Array, unread: () => boolean): Uint8Array {
  if (chunk.byteLength < 5 || chunk[0] !== trailerFlag) return chunk;
  const length = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).readUInt32BE(1);
  if (length !== chunk.byteLength - 5) return chunk;
  const trailer = trailerParse(chunk.subarray(5));
  if (!isServerStatus(trailer) || !unread()) return chunk;
  trailer.set("grpc-status", String(Code.InvalidArgument));
  return encodeEnvelope(trailerFlag, trailerSerialize(trailer));
}

/** A server-blaming grpc-status without error details (Connect's own errors carry none). */
function isServerStatus(trailer: Headers): boolean {
  const status = Number(trailer.get("grpc-status") ?? "0");
  return SERVER_CODES.has(status as Code) && !trailer.has("grpc-status-details-bin");
}

function setStatus(trailer: Headers, error: ConnectError): void {
  trailer.set("grpc-status", String(error.code));
  trailer.set("grpc-message", encodeURIComponent(error.rawMessage));
}

function grpcWebTrailer(error: ConnectError): Uint8Array {
  const trailer = new Headers();
  setStatus(trailer, error);
  return encodeEnvelope(trailerFlag, trailerSerialize(trailer));
}

/** A whole answer that is only an error status, in the form of the request's protocol. */
function statusOnly(requestContentType: string, error: ConnectError): UniversalServerResponse {
  switch (protocolOf(requestContentType)) {
    case "grpc": {
      const trailer = new Headers();
      setStatus(trailer, error);
      return { status: 200, header: new Headers({ "content-type": requestContentType }), body: once(new Uint8Array(0)), trailer };
    }
    case "grpc-web":
      return { status: 200, header: new Headers({ "content-type": requestContentType }), body: once(grpcWebTrailer(error)) };
    case "connect": {
      const body = errorToJsonBytes(error, {});
      return { status: codeToHttpStatus(error.code), header: new Headers({ "content-type": "application/json" }), body: once(body) };
    }
  }
}

function once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  return (async function* () {
    yield bytes;
  })();
}

/**
 * The response with its body relayed: each chunk through `chunk`, `end` called once the body
 * is exhausted, and on a failure to produce the rest of the body, `error` (which may give a
 * last chunk) instead of the failure. throw and return are forwarded as they are, since
 * Connect's node adapter reports write errors to the handler through them.
 */
function relay(
  response: UniversalServerResponse,
  hooks: { chunk?: (c: Uint8Array) => Uint8Array; end?: () => void; error: () => Uint8Array | void },
): UniversalServerResponse {
  const body = response.body;
  if (!body) {
    hooks.end?.();
    return response;
  }
  return {
    ...response,
    body: {
      [Symbol.asyncIterator]() {
        const it = body[Symbol.asyncIterator]();
        let finished = false;
        return {
          async next(): Promise<IteratorResult<Uint8Array>> {
            if (finished) return { done: true, value: undefined };
            let r: IteratorResult<Uint8Array>;
            try {
              r = await it.next();
            } catch {
              finished = true;
              const last = hooks.error();
              return last ? { done: false, value: last } : { done: true, value: undefined };
            }
            if (r.done) {
              finished = true;
              hooks.end?.();
              return r;
            }
            return { done: false, value: hooks.chunk ? hooks.chunk(r.value) : r.value };
          },
          throw: async (e?: unknown) => (it.throw ? it.throw(e) : Promise.reject(e as Error)),
          return: async (v?: unknown) => (it.return ? it.return(v) : { done: true, value: undefined }),
        };
      },
    },
  };
}
