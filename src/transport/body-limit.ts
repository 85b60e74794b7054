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
 * Replaces the router's handlers in place, inside the plugin's `routes` callback.
 */
export function limitRequestBodies(handlers: UniversalHandler[], limit: number): void {
  for (let i = 0; i < handlers.length; i++) {
    const handler = handlers[i];
    const limited = (req: UniversalServerRequest) => handler({ ...req, body: capped(req, limit) });
    handlers[i] = Object.assign(limited, handler);
  }
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
      return {
        async next() {
          const r = await it.next();
          if (r.done) return r;
          read += r.value.byteLength;
          if (read > limit) {
            await it.return?.();
            throw payloadTooLarge(limit);
          }
          return r;
        },
        return: async (v?: unknown) => (it.return ? it.return(v) : { done: true, value: undefined }),
        throw: async (e?: unknown) => (it.throw ? it.throw(e) : Promise.reject(e as Error)),
      };
    },
  };
}
