/**
 * The operator's usage statement (AdminService.GetUsage, docs/billing.md#usage): every account's
 * (or one's) messages, segments, price, carrier cost and margin between two UTC days, by account
 * or by carrier. The sums are the account statement's (billing/usage-store.ts), with Cost.
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import { type AdminService, type GetUsageRequest, OperatorUsageResponseSchema } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { fieldErrors, type FieldProblem, quoted } from "../common/errors.js";
import { formatMoney } from "../common/money.js";
import { isSid } from "../common/sid.js";
import { findAccountBySid } from "../accounts/account-store.js";
import { groupByOf, usageDays } from "../billing/usage-rules.js";
import { usageBy } from "../billing/usage-store.js";

/** Creates the operator's GetUsage. */
export function createOperatorUsage(deps: {
  em: (ctx: HandlerContext) => EntityManager;
  currency: string;
}): Pick<ServiceImpl<typeof AdminService>, "getUsage"> {
  return {
    async getUsage(req: GetUsageRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const days = usageDays(req.startDate, req.endDate);
      const groupBy = groupByOf(req.groupBy, ["Account", "Carrier", "Day"]);
      const accountSid = req.accountSid.trim();
      const problems: FieldProblem[] = [...(Array.isArray(days) ? days : []), ...(typeof groupBy === "string" ? [] : [groupBy])];
      // A query filter naming no account is a 400 naming it, as in the other operator lists.
      if (accountSid !== "" && !(isSid(accountSid, "AC") && (await findAccountBySid(em, accountSid)))) {
        problems.push({ field: "AccountSid", code: "InvalidParameter", message: `AccountSid ${quoted(accountSid)} is not an account.` });
      }
      if (problems.length > 0) throw fieldErrors(problems);
      const { startDay, endDay } = days as Exclude<typeof days, unknown[]>;
      const by = groupBy === "Carrier" ? "carrier" : groupBy === "Day" ? "day" : "account";
      const sums = await usageBy(em, { accountSid: accountSid === "" ? null : accountSid, startDay, endDay, by });
      return create(OperatorUsageResponseSchema, {
        usage: sums.map((s) => ({
          ...(by === "account" ? { accountSid: s.key } : by === "day" ? { date: s.key } : { carrier: s.key }),
          messages: s.messages,
          segments: s.segments,
          price: formatMoney(s.price),
          cost: formatMoney(s.cost),
          margin: formatMoney(s.price - s.cost),
        })),
        priceUnit: deps.currency,
      });
    },
  };
}
