/**
 * The layers around each handler of the Connect router, in one ordered list: what happens to a
 * Connect, gRPC or gRPC-Web request between the HTTP layer and Connect's protocol handler. They
 * are handler wrappers, not interceptors, because they act on bytes and statuses Connect deals
 * with before (or instead of) running the interceptors. REST does not pass through them: it has
 * its own body limit, charset and error body (src/rest/).
 */
import type { ConnectRouterOptions, MethodImplSpec } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { limitRequestBody } from "../http/body-limit.js";
import { unaryGrpcFastPath } from "./grpc-unary.js";
import { decideRpcCharset } from "./rpc-json.js";
import { blameClientForUnreadableRequests } from "./rpc-read-errors.js";
import { documentRpcRefusals } from "./rpc-refusals.js";

/** One layer: takes a handler and returns it wrapped (keeping its properties: method, protocols). */
export type HandlerWrapper = (handler: UniversalHandler) => UniversalHandler;

/** What the wrappers need. */
export interface HandlerWrapperOptions {
  /** The router's method specs (the unary fast path serves the unary ones). */
  specs: readonly MethodImplSpec[];
  /** The options the Connect plugin was given, once it has completed them (inside its `routes` callback). */
  connectOptions: ConnectRouterOptions & { shutdownTimeoutMs?: number };
  /** The request body limit in bytes. */
  bodyLimit: number;
}

/** The wrappers, innermost first: each wraps all the ones above it. */
export function rpcHandlerWrappers(opts: HandlerWrapperOptions): HandlerWrapper[] {
  return [
    // Innermost, where Connect's gRPC handler sits: common unary gRPC calls answered with
    // Connect's own pieces, without its streaming pipeline (grpc-unary.ts). Inside every other
    // wrapper, so that each holds for the fast path exactly as for Connect's handler.
    unaryGrpcFastPath(opts.specs, opts.connectOptions),
    // The body as sent, cut with PayloadTooLarge once it passes the limit; both the fast path
    // and Connect's handler read the capped body (src/http/body-limit.ts).
    limitRequestBody(opts.bodyLimit),
    // A JSON Content-Type's charset decided before Connect looks at it: another charset than
    // UTF-8 is 415 with a message, any spelling of UTF-8 passes as Connect's own (rpc-json.ts).
    decideRpcCharset,
    // Errors Connect raises for a request it could not read (before the interceptors ran) become
    // the client's invalid_argument, and a call always ends with a status: outside everything
    // that reads or answers a call, so that it sees all their answers (rpc-read-errors.ts).
    blameClientForUnreadableRequests,
    // Outermost: Connect's bodiless 405, 415 and 505 (and any other answer without a
    // Content-Type) in the documented body, whichever layer gave it (rpc-refusals.ts).
    documentRpcRefusals,
  ];
}

/** Wraps each of the router's handlers (in place) in `wrappers`, innermost first. */
export function wrapRpcHandlers(handlers: UniversalHandler[], wrappers: readonly HandlerWrapper[]): void {
  for (let i = 0; i < handlers.length; i++) {
    let handler = handlers[i];
    for (const wrap of wrappers) handler = wrap(handler);
    handlers[i] = handler;
  }
}
