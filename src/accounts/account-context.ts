import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { apiError } from "../common/errors.js";
import type { Account } from "./account.entity.js";

/** The authenticated account of an account-facing call; set by the edge, undefined elsewhere. */
export const kAccount = createContextKey<Account | undefined>(undefined, { description: "authenticated account" });

/** The account of the call, or a 401 if the edge did not authenticate one. */
export function requireAccount(ctx: HandlerContext): Account {
  const account = ctx.values.get(kAccount);
  if (!account) throw apiError("Unauthorized", "Authentication required: use HTTP Basic with your AccountSid and token.");
  return account;
}
