import type { Interceptor } from "@connectrpc/connect";
import { kLog } from "../common/context.js";
import { isClientError, toConnectError } from "../common/errors.js";
import { isDatabaseUnavailable } from "../common/pg-errors.js";

/**
 * The interceptor that answers every failure of a call as the ConnectError a client gets
 * (toConnectError: a lost database is ServiceUnavailable, anything else unknown is internal) and
 * logs those the server caused, with the detail the client never sees. A lost database is logged
 * at warn: expected while it lasts, and every call says so.
 */
export const reportFailures: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (reason) {
    const err = toConnectError(reason);
    if (isDatabaseUnavailable(reason)) req.contextValues.get(kLog)?.warn({ err: reason }, "call failed: database unavailable");
    else if (!isClientError(err)) req.contextValues.get(kLog)?.error({ err: reason }, "call failed");
    throw err;
  }
};
