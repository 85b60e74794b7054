import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import { Code, ConnectError } from "@connectrpc/connect";

/** True when the call carried the operator's bearer token; set by the edge. */
export const kAdmin = createContextKey<boolean>(false, { description: "operator call" });

/**
 * The request's own EntityManager fork, made on first use (sends never need one); set by the edge
 * so one request shares one unit of work.
 */
export const kEm = createContextKey<(() => EntityManager) | undefined>(undefined, { description: "request EntityManager" });

/**
 * The client's address: the socket's remote address (no X-Forwarded-For is trusted); set by the
 * transports' context values, for the limit on failed authentications.
 */
export const kClientAddress = createContextKey<string | undefined>(undefined, { description: "client address" });

/**
 * A submit_sm's registered_delivery (1: a receipt on any final state, 2: only on failure), for a
 * receipt to the account's SMPP binds; set by the SMPP server. Its outbox row is written in the
 * transaction that stores the message (messaging/send-pipeline.ts).
 */
export const kSmppReceipt = createContextKey<1 | 2 | undefined>(undefined, { description: "SMPP receipt requested" });

/** The client's Idempotency-Key header, if any; set by the edge. */
export const kIdempotencyKey = createContextKey<string | undefined>(undefined, { description: "Idempotency-Key" });

/** What the RPC layer logs with: the request's logger (it carries the request id). */
export interface CallLogger {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** The request's logger; set by the transports' context values. */
export const kLog = createContextKey<CallLogger | undefined>(undefined, { description: "request logger" });

/** The request's EntityManager; the edge always sets one. */
export function requestEm(ctx: HandlerContext): EntityManager {
  const em = ctx.values.get(kEm);
  if (!em) throw new Error("no EntityManager in the handler context: the edge did not run");
  return em();
}

/**
 * The reason a call's signal carries once the call is complete. One shared value: aborting
 * without a reason builds a DOMException (with its stack) on every call, a few % of the CPU.
 */
export const CALL_COMPLETE = new ConnectError("the call is complete", Code.Canceled);
