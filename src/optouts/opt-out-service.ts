import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type CreateOptOutRequest,
  type DeleteOptOutRequest,
  DeleteOptOutResponseSchema,
  type ListOptOutsRequest,
  ListOptOutsResponseSchema,
  type OptOut as OptOutPb,
  OptOutSchema,
  type OptOutService,
} from "../../gen/switchboard/v2/opt_outs_pb.js";
import { requireAccount } from "../accounts/account-context.js";
import { recheckCredentials } from "../accounts/auth.js";
import { ownAccountPath } from "../addresses/address-service.js";
import { type Clock, unixSeconds } from "../common/clock.js";
import { requestEm } from "../common/context.js";
import { apiError, fieldError, quoted } from "../common/errors.js";
import { checkedPage } from "../common/paging.js";
import { canonicalE164, parseE164, writeItAs } from "../common/phone.js";
import { optOutNumber } from "./opt-out.js";
import { listOptOuts, type OptOutEntry, removeOptOutNamed } from "./opt-out-store.js";

/** The OptOut resource. */
export function toOptOutPb(o: OptOutEntry): OptOutPb {
  return create(OptOutSchema, { number: o.number, source: o.source, created: BigInt(unixSeconds(o.createdAt)) });
}

/** The Number of an add: E164 with the +, else a 400 naming Number. */
function checkNumber(value: string): string {
  const number = value.trim();
  if (number === "") throw fieldError("Number", "MissingParameter", "Number is required: the E164 number to opt out, e.g. +61412345678.");
  if (!parseE164(number))
    throw fieldError("Number", "InvalidParameter", `Number ${quoted(value)} is not a valid E164 number such as +61412345678.${writeItAs(number)}`);
  return number;
}

/** Creates the OptOutService implementation (docs/api.md#opt-out-stop-start-help). */
export function createOptOutService(deps: { clock: Clock }): ServiceImpl<typeof OptOutService> {
  return {
    async listOptOuts(req: ListOptOutsRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      ownAccountPath(account, req.accountSid);
      const page = checkedPage(req);
      const [rows, total] = await listOptOuts(requestEm(ctx), account.sid, page);
      return create(ListOptOutsResponseSchema, { optOuts: rows.map(toOptOutPb), totalCount: total });
    },

    async createOptOut(req: CreateOptOutRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      ownAccountPath(account, req.accountSid);
      const number = checkNumber(req.number);
      return requestEm(ctx).transactional(async (tx) => {
        await recheckCredentials(tx, account);
        // As a STOP would: what is still queued to the number is not sent.
        const { optOut } = await optOutNumber(tx, { accountSid: account.sid, number, source: "Api", now: deps.clock.now() });
        return toOptOutPb(optOut);
      });
    },

    async deleteOptOut(req: DeleteOptOutRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      ownAccountPath(account, req.accountSid);
      // Any entry the list shows: an E164 number (the path carries it without "+", as a "+" in a
      // path is easily mangled; either is accepted), or what else a keyword put there (the
      // alphanumeric sender a STOP came from, say), named exactly as listed.
      const written = req.number.trim();
      const digits = written.replace(/^\+/, "");
      const e164 = /^\d{8,15}$/.test(digits) ? `+${digits}` : undefined;
      const names = [...new Set([e164, req.number, written].filter((n): n is string => !!n))];
      return requestEm(ctx).transactional(async (tx) => {
        await recheckCredentials(tx, account);
        const removed = names.length > 0 ? await removeOptOutNamed(tx, account.sid, names) : undefined;
        if (removed !== undefined) return create(DeleteOptOutResponseSchema, { number: removed });
        // A number is listed in its one spelling: another spelling of it (a trunk prefix after the
        // country code) that is not listed as written is refused, as on an add.
        const canonical = e164 === undefined ? undefined : canonicalE164(e164);
        if (canonical !== undefined && canonical !== e164) {
          throw fieldError(
            "Number",
            "InvalidParameter",
            `Number ${quoted(req.number)} is not how E164 writes this number: write it ${canonical.slice(1)} (the country code, then the number without its trunk prefix such as 0).`,
          );
        }
        if (e164) throw apiError("NotFound", `${e164} is not on the account's opt-out list.`);
        throw fieldError(
          "Number",
          "InvalidParameter",
          `Number ${quoted(req.number)} is neither on the account's opt-out list nor an E164 number (digits without the +, e.g. 61412345678).`,
        );
      });
    },
  };
}
