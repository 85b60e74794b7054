import type { HandlerContext } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { payloadTooLarge } from "./http-layer.js";

/**
 * A step of the Connect router's request gate: a declared Content-Length over the limit is
 * refused before any of the body is read (Connect's own check would refuse it too, but in its own words).
 */
export function bodyLimitGate(limit: number): (ctx: HandlerContext) => void {
  return (ctx) => {
    if (Number(ctx.requestHeader.get("content-length") ?? "") > limit) throw payloadTooLarge(limit);
  };
}

/**
 * Makes each Connect/gRPC/gRPC-Web handler refuse a request body (as sent: gRPC's 5-byte frame
 * header counts) over `limit` bytes with PayloadTooLarge as soon as it passes the limit, before
 * the method runs. Connect reads the raw stream itself, so Fastify's bodyLimit never sees these
 * bodies; Connect's own readMaxBytes (set to the same limit) still guards decompressed sizes.
 * A wrapper of the router's handler list (src/rpc/handler-wrappers.ts).
 */
export function limitRequestBody(limit: number): (handler: UniversalHandler) => UniversalHandler {
  return (handler) => {
    const limited = (req: UniversalServerRequest) => handler({ ...req, body: capped(req, limit) });
    return Object.assign(limited, handler);
  };
}

/** Content-Types whose body is 5-byte-framed messages (gRPC, gRPC-Web binary, Connect streaming); not gRPC-Web's base64 text. */
const ENVELOPED = /^application\/(?:grpc(?:-web)?(?![-\w])|connect\+)/i;

/** The message length a 5-byte envelope header announces (bytes 1–4, big-endian), read from the start of `bytes`. */
export function envelopeLength(bytes: Uint8Array): number {
  return ((bytes[1] << 24) | (bytes[2] << 16) | (bytes[3] << 8) | bytes[4]) >>> 0;
}

function capped(req: UniversalServerRequest, limit: number): UniversalServerRequest["body"] {
  const body = req.body;
  if (typeof body !== "object" || body === null || !(Symbol.asyncIterator in body)) return body;
  const source = body as AsyncIterable<Uint8Array>;
  // A plain iterator, not an async generator: this sits on every RPC's read path, and a generator
  // costs a few allocations and microtask hops per chunk.
  return {
    [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
      const it = source[Symbol.asyncIterator]();
      let read = 0;
      let refused = false;
      return {
        async next() {
          const r = await it.next();
          if (r.done) return r;
          const first = read === 0;
          read += r.value.byteLength;
          // A frame header announcing a message over the limit is refused at once, as a declared
          // Content-Length is: Connect would otherwise refuse it in its own words (readMaxBytes).
          const announced = first && r.value.byteLength >= 5 && ENVELOPED.test(req.header.get("content-type") ?? "") ? 5 + envelopeLength(r.value) : 0;
          if (read > limit || announced > limit) {
            refused = true;
            void discardRest(it);
            throw payloadTooLarge(limit);
          }
          return r;
        },
        // Once refused, the rest of the body is the discarder's: returning the source would cut it.
        return: async (v?: unknown) => (it.return && !refused ? it.return(v) : { done: true, value: undefined }),
        throw: async (e?: unknown) => (it.throw ? it.throw(e) : Promise.reject(e as Error)),
      };
    },
  };
}

/**
 * Reads and drops the rest of a refused body while the answer goes out, so that the client can
 * finish sending it. Returning the source instead (what this did, and what a `for await` does
 * when it stops early) destroys Node's request: on HTTP/1.1 nothing reads the connection any more
 * after the answer, the client stays blocked sending its body until REQUEST_TIMEOUT_MS cuts the
 * connection (ECONNRESET, often before the client has read the answer), and on h2 (Connect,
 * gRPC-Web) the answered stream never closes. Drained, the HTTP/1.1 connection serves its next
 * request and the h2 stream closes once the client ends it; a client's time stays bounded as for
 * any body (REQUEST_TIMEOUT_MS on HTTP/1.1).
 */
async function discardRest(it: AsyncIterator<Uint8Array>): Promise<void> {
  try {
    while (!(await it.next()).done);
  } catch {
    // The body failed (the client reset it): nothing is left to drop.
  }
}
