/**
 * The operator's read side of AdminService: accounts, properties, numbers with their lease
 * state, and addresses by review status across accounts. Nothing here returns a token hash or
 * a webhook secret.
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import {
  type Account as AccountPb,
  AccountSchema,
  type AdminService,
  type GetAccountRequest,
  type ListAccountsRequest,
  ListAccountsResponseSchema,
  type ListAddressesRequest,
  type ListNumbersRequest,
  ListNumbersResponseSchema,
  type ListPropertiesRequest,
  ListPropertiesResponseSchema,
  type Property as PropertyPb,
  PropertySchema,
} from "../../gen/switchboard/admin/v1/admin_pb.js";
import { ListAddressesResponseSchema } from "../../gen/switchboard/v2/addresses_pb.js";
import type { Account } from "../accounts/account.entity.js";
import { accountExists, findAccountBySid, listAccounts, listProperties } from "../accounts/account-store.js";
import type { Property } from "../accounts/property.entity.js";
import type { AddressStatus } from "../addresses/address.entity.js";
import { listAddresses } from "../addresses/address-store.js";
import { toAddressPb } from "../addresses/address-service.js";
import { balanceOf, balancesOf } from "../billing/balance-store.js";
import { type Clock, unixSeconds } from "../common/clock.js";
import { fieldErrors, type FieldProblem, notFound, quoted } from "../common/errors.js";
import { formatMoney } from "../common/money.js";
import { checkedPage, pageOf } from "../common/paging.js";
import { isSid } from "../common/sid.js";
import { liveLeaseCounts } from "../leases/lease-store.js";
import { listNumbers } from "../numbers/number-store.js";

/** What an account's answer shows of its money besides its own columns: its balance and the deployment's currency. */
export interface AccountMoney {
  balance: bigint;
  /** BILLING_CURRENCY. */
  priceUnit: string;
}

/** The operator's view of an account: no token hash, no webhook secret. */
export function toAccountPb(a: Account, money: AccountMoney, segmentsToday?: number): AccountPb {
  return create(AccountSchema, {
    accountSid: a.sid,
    name: a.name,
    smsEnabled: a.smsEnabled,
    restCompatibility: a.restCompatibility,
    retentionDays: a.retentionDays ?? undefined,
    redactAfterDays: a.redactAfterDays ?? undefined,
    created: BigInt(unixSeconds(a.createdAt)),
    optOutText: a.optOutText,
    optInText: a.optInText,
    helpText: a.helpText,
    optOutKeywords: a.optOutKeywords,
    allowedCountries: a.allowedCountries,
    // Number(): a double column may come back as its text.
    sendRatePerSecond: a.sendRatePerSecond == null ? undefined : Number(a.sendRatePerSecond),
    sendRateBurst: a.sendRateBurst ?? undefined,
    messagesPerSecond: a.messagesPerSecond == null ? undefined : Number(a.messagesPerSecond),
    dailySegmentQuota: a.dailySegmentQuota ?? undefined,
    segmentsToday,
    smartEncoding: a.smartEncoding,
    rateCard: a.rateCard ?? "",
    billingMode: a.billingMode,
    // BigInt(): a bigint column may come back as its text.
    creditLimit: a.creditLimit == null ? undefined : formatMoney(BigInt(a.creditLimit)),
    balance: formatMoney(money.balance),
    priceUnit: money.priceUnit,
    lowBalanceThreshold: a.lowBalanceThreshold == null ? undefined : formatMoney(BigInt(a.lowBalanceThreshold)),
    lowBalanceWebhookUri: a.lowBalanceWebhookUri ?? "",
  });
}

/** The operator's view of a property. */
export function toPropertyPb(p: Property): PropertyPb {
  return create(PropertySchema, {
    propertySid: p.sid,
    accountSid: p.accountSid,
    name: p.name,
    smsEnabled: p.smsEnabled,
    created: BigInt(unixSeconds(p.createdAt)),
  });
}

/** The account named by a path Sid, or 404. */
export async function findAccount(em: EntityManager, sid: string): Promise<Account> {
  const account = isSid(sid, "AC") ? await findAccountBySid(em, sid) : null;
  if (!account) throw notFound("Account", sid);
  return account;
}

const ADDRESS_STATUSES: AddressStatus[] = ["Pending", "Active", "Rejected"];

/**
 * Checks the paging fields and an optional AccountSid filter (a query field, so an unknown
 * account is a 400 naming it, as for CreateNumber's AccountSid; path Sids are 404), reporting
 * every problem at once.
 */
export async function listInput(
  em: EntityManager,
  req: { resultsCount?: number; resultsSkip: number; accountSid: string },
  more: FieldProblem[] = [],
): Promise<{ limit: number; offset: number; accountSid: string | undefined }> {
  const page = pageOf(req);
  const problems = [...more, ...page.problems];
  const sid = req.accountSid.trim();
  if (sid !== "" && !(isSid(sid, "AC") && (await accountExists(em, sid)))) {
    problems.unshift({ field: "AccountSid", code: "InvalidParameter", message: `AccountSid ${quoted(req.accountSid)} is not an account.` });
  }
  if (problems.length > 0) throw fieldErrors(problems);
  return { limit: page.limit, offset: page.offset, accountSid: sid === "" ? undefined : sid };
}

/** The list methods of AdminService; `em` gives the request's EntityManager once the caller is known to be the operator. */
export function createAdminLists(deps: {
  clock: Clock;
  /** BILLING_CURRENCY, the PriceUnit of an account's Balance and CreditLimit. */
  currency: string;
  em: (ctx: HandlerContext) => EntityManager;
  /** The account's segments this UTC day (GetAccount): its DailySegmentQuota's count, or what it stored. */
  segmentsToday?: (account: Account, em: EntityManager) => Promise<number>;
}): Pick<ServiceImpl<typeof AdminService>, "listAccounts" | "getAccount" | "listProperties" | "listNumbers" | "listAddresses"> {
  return {
    async listAccounts(req: ListAccountsRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const page = checkedPage(req);
      const [rows, total] = await listAccounts(em, page);
      // The page's balances in one statement, not one per account.
      const balances = await balancesOf(
        em,
        rows.map((a) => a.sid),
      );
      return create(ListAccountsResponseSchema, {
        accounts: rows.map((a) => toAccountPb(a, { balance: balances.get(a.sid) ?? 0n, priceUnit: deps.currency })),
        totalCount: total,
      });
    },

    async getAccount(req: GetAccountRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const account = await findAccount(em, req.accountSid);
      const money = { balance: await balanceOf(em, account.sid), priceUnit: deps.currency };
      return toAccountPb(account, money, (await deps.segmentsToday?.(account, em)) ?? 0);
    },

    async listProperties(req: ListPropertiesRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const account = await findAccount(em, req.accountSid);
      const page = checkedPage(req);
      const [rows, total] = await listProperties(em, account.sid, page);
      return create(ListPropertiesResponseSchema, { properties: rows.map(toPropertyPb), totalCount: total });
    },

    async listNumbers(req: ListNumbersRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const input = await listInput(em, req);
      // Both filters must hold, and a pool number has no owner: AccountSid with Pool=true matches none.
      if (req.pool === true && input.accountSid !== undefined) return create(ListNumbersResponseSchema, { numbers: [], totalCount: 0 });
      const filter = input.accountSid !== undefined ? { accountSid: input.accountSid } : { pool: req.pool };
      const [rows, total] = await listNumbers(em, filter, input);
      const live = await liveLeaseCounts(
        em,
        rows.filter((n) => n.accountSid === null).map((n) => n.number),
        deps.clock.now(),
      );
      return create(ListNumbersResponseSchema, {
        totalCount: total,
        numbers: rows.map((n) => ({
          number: n.number,
          accountSid: n.accountSid ?? "",
          friendly: n.friendly,
          addressSid: n.addressSid ?? "",
          pool: n.accountSid === null,
          leased: (live.get(n.number) ?? 0) > 0,
          liveLeases: live.get(n.number) ?? 0,
          created: BigInt(unixSeconds(n.createdAt)),
        })),
      });
    },

    async listAddresses(req: ListAddressesRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const status = req.status.trim() === "" ? "Pending" : req.status.trim();
      const statusProblems: FieldProblem[] =
        status === "All" || ADDRESS_STATUSES.includes(status as AddressStatus)
          ? []
          : [{ field: "Status", code: "InvalidParameter", message: `Status must be Pending, Active, Rejected or All, not ${quoted(req.status)}.` }];
      const input = await listInput(em, req, statusProblems);
      // Oldest first: the review queue is worked through in the order customers submitted.
      const [rows, total] = await listAddresses(em, { status: status === "All" ? undefined : (status as AddressStatus), accountSid: input.accountSid }, input);
      return create(ListAddressesResponseSchema, { addresses: rows.map(toAddressPb), totalCount: total });
    },
  };
}
