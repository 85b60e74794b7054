/**
 * The account's side of billing (docs/billing.md): BillingService's balance, ledger list and usage statement. The operator's
 * side (top-ups, adjustments, the account's billing settings) is admin/account-billing.ts; the
 * statements are in balance-store.ts.
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type BalanceEntry as BalanceEntryPb,
  BalanceEntrySchema,
  BalanceSchema,
  type GetBalanceRequest,
  type BillingService,
  type GetUsageRequest,
  type ListBalanceEntriesRequest,
  ListBalanceEntriesResponseSchema,
  UsageResponseSchema,
} from "../../gen/switchboard/v2/billing_pb.js";
import { requireAccount } from "../accounts/account-context.js";
import { ownAccountPath } from "../addresses/address-service.js";
import { unixSeconds } from "../common/clock.js";
import { requestEm } from "../common/context.js";
import { fieldErrors, notFound } from "../common/errors.js";
import { formatMoney } from "../common/money.js";
import { checkedPage } from "../common/paging.js";
import { type BalanceEntryRecord, balanceSummary, listBalanceEntries } from "./balance-store.js";
import { groupByOf, usageDays } from "./usage-rules.js";
import { usageBy } from "./usage-store.js";

/** A ledger entry as every wire shows it: amounts as decimal strings. */
export function toBalanceEntryPb(e: BalanceEntryRecord): BalanceEntryPb {
  return create(BalanceEntrySchema, {
    entryId: e.id,
    accountSid: e.accountSid,
    type: e.type,
    amount: formatMoney(e.amount),
    balanceAfter: formatMoney(e.balanceAfter),
    messageSid: e.messageSid ?? "",
    reference: e.reference,
    created: BigInt(unixSeconds(e.createdAt)),
  });
}

/** Creates the BillingService implementation; `currency` is the deployment's BILLING_CURRENCY. */
export function createBillingService(deps: { currency: string }): ServiceImpl<typeof BillingService> {
  return {
    async listBalanceEntries(req: ListBalanceEntriesRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      // Another account's Sid is a 404, as on every /v2 account path: its existence is not revealed.
      ownAccountPath(account, req.accountSid);
      const page = checkedPage(req);
      const { entries, total } = await listBalanceEntries(requestEm(ctx), account.sid, page.limit, page.offset);
      return create(ListBalanceEntriesResponseSchema, { balanceEntries: entries.map(toBalanceEntryPb), totalCount: total, priceUnit: deps.currency });
    },
    async getBalance(req: GetBalanceRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      ownAccountPath(account, req.accountSid);
      // Read together, now: the settings as the charge reads them, not the request's cached account.
      const summary = await balanceSummary(requestEm(ctx), account.sid);
      if (!summary) throw notFound("Account", req.accountSid);
      return create(BalanceSchema, {
        accountSid: account.sid,
        balance: formatMoney(summary.balance),
        billingMode: summary.billingMode,
        creditLimit: summary.creditLimit === null ? undefined : formatMoney(summary.creditLimit),
        priceUnit: deps.currency,
      });
    },
    async getUsage(req: GetUsageRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      ownAccountPath(account, req.accountSid);
      const days = usageDays(req.startDate, req.endDate);
      const groupBy = groupByOf(req.groupBy, ["Day", "Country"]);
      const problems = [...(Array.isArray(days) ? days : []), ...(typeof groupBy === "string" ? [] : [groupBy])];
      if (problems.length > 0) throw fieldErrors(problems);
      const { startDay, endDay } = days as Exclude<typeof days, unknown[]>;
      const by = groupBy === "Country" ? "country" : "day";
      const sums = await usageBy(requestEm(ctx), { accountSid: account.sid, startDay, endDay, by });
      return create(UsageResponseSchema, {
        usage: sums.map((s) => ({
          ...(by === "day" ? { date: s.key } : { country: s.key }),
          messages: s.messages,
          segments: s.segments,
          price: formatMoney(s.price),
        })),
        priceUnit: deps.currency,
      });
    },
  };
}
