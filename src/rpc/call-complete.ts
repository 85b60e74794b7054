import type { HandlerContext } from "@connectrpc/connect";
import { CALL_COMPLETE } from "../common/context.js";

/**
 * A step of the Connect router's request gate: gives the call's context the shared abort reason.
 * Connect aborts each call's signal without a reason when the call is complete (twice), and Node
 * then builds an AbortError DOMException with a stack trace each time, ~5 % of a gRPC call's CPU.
 * A reason Connect passes (an error) is kept.
 */
export function shareCallCompleteReason(ctx: HandlerContext): void {
  const abort = (ctx as HandlerContext & { abort?: (reason?: unknown) => void }).abort;
  if (typeof abort === "function") Object.assign(ctx, { abort: (reason: unknown = CALL_COMPLETE) => abort.call(ctx, reason) });
}
