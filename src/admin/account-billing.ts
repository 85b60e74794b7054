/**
 * The operator's side of an account's billing (docs/billing.md): its RateCard, BillingMode and
 * CreditLimit as CreateAccount and UpdateAccount take them, LowBalanceThreshold and
 * LowBalanceWebhookUri as UpdateAccount takes them, and AdminService's AddBalanceEntry
 * (top-ups and adjustments) and ListBalanceEntries (any account's ledger, for the console). Every bad value is a 400 naming its field, all of them at once;
 * the ledger's statements are in billing/balance-store.ts.
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import type { AddBalanceEntryRequest, AdminService, ListBalanceEntriesRequest } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { ListBalanceEntriesResponseSchema } from "../../gen/switchboard/v2/billing_pb.js";
import { type Account, BILLING_MODES, type BillingMode } from "../accounts/account.entity.js";
import { addBalanceEntry, listBalanceEntries } from "../billing/balance-store.js";
import { toBalanceEntryPb } from "../billing/billing-service.js";
import { findRateCard } from "../billing/rate-card-store.js";
import { cardNameProblem } from "../billing/rate-rules.js";
import type { Clock } from "../common/clock.js";
import { fieldErrors, type FieldProblem, quoted } from "../common/errors.js";
import { formatMoney, inRange, MAX_MICROS, moneyOrProblem } from "../common/money.js";
import { checkedPage } from "../common/paging.js";
import { webhookUriProblem } from "../webhooks/url-guard.js";
import { findAccount } from "./admin-lists.js";

/** The billing fields of CreateAccountRequest and UpdateAccountRequest (omitted: unchanged, or the default on create). */
export interface AccountBillingInput {
  rateCard?: string;
  billingMode?: string;
  creditLimit?: string;
  /** UpdateAccount only (docs/billing.md#low-balance). */
  lowBalanceThreshold?: string;
  lowBalanceWebhookUri?: string;
}

/** The checked billing settings: undefined where the request left a field out, null where it cleared it. */
export interface AccountBillingChange {
  rateCard?: string | null;
  billingMode?: BillingMode;
  creditLimit?: bigint | null;
  lowBalanceThreshold?: bigint | null;
  lowBalanceWebhookUri?: string | null;
}

/** Longest Reference a top-up or adjustment keeps. */
export const MAX_REFERENCE_CHARS = 255;

/**
 * Checks the request's RateCard (an existing card, or "" for none), BillingMode (Postpaid or
 * Prepaid) and CreditLimit (an amount of at least 0, or "" for none); a 400 naming every bad one.
 * An unknown card is a 400 rather than a 404: it is a reference in the body, as CreateNumber's
 * AccountSid is, and the path's account was found.
 */
export async function checkAccountBilling(em: EntityManager, req: AccountBillingInput, opts: { webhookAllowPrivate: boolean }): Promise<AccountBillingChange> {
  const problems: FieldProblem[] = [];
  const change: AccountBillingChange = {};
  if (req.rateCard !== undefined) {
    if (req.rateCard === "") change.rateCard = null;
    else {
      const shape = cardNameProblem(req.rateCard, "RateCard");
      if (shape) problems.push(shape);
      else if (!(await findRateCard(em, req.rateCard))) {
        problems.push({ field: "RateCard", code: "InvalidParameter", message: `RateCard ${quoted(req.rateCard)} is not a rate card.` });
      } else change.rateCard = req.rateCard;
    }
  }
  if (req.billingMode !== undefined) {
    const mode = BILLING_MODES.find((m) => m === req.billingMode);
    if (mode) change.billingMode = mode;
    else
      problems.push({
        field: "BillingMode",
        code: "InvalidParameter",
        message: `BillingMode must be ${BILLING_MODES.join(" or ")}; got ${quoted(req.billingMode)}.`,
      });
  }
  if (req.creditLimit !== undefined) {
    if (req.creditLimit === "") change.creditLimit = null;
    else {
      const limit = moneyOrProblem("CreditLimit", req.creditLimit);
      if (typeof limit === "bigint") change.creditLimit = limit;
      else problems.push(limit);
    }
  }
  // Low balance (docs/billing.md#low-balance): any amount, a sign allowed (a threshold below zero
  // warns a credit account); the URI is checked as a send's webhook URIs are.
  if (req.lowBalanceThreshold !== undefined) {
    if (req.lowBalanceThreshold === "") change.lowBalanceThreshold = null;
    else {
      const threshold = moneyOrProblem("LowBalanceThreshold", req.lowBalanceThreshold, { signed: true });
      if (typeof threshold === "bigint") change.lowBalanceThreshold = threshold;
      else problems.push(threshold);
    }
  }
  if (req.lowBalanceWebhookUri !== undefined) {
    const uri = req.lowBalanceWebhookUri.trim();
    const problem = uri === "" ? undefined : webhookUriProblem(uri, opts.webhookAllowPrivate);
    if (problem) problems.push({ field: "LowBalanceWebhookUri", code: "InvalidWebhookUri", message: `LowBalanceWebhookUri ${problem}.` });
    else change.lowBalanceWebhookUri = uri === "" ? null : uri;
  }
  if (problems.length > 0) throw fieldErrors(problems);
  return change;
}

/**
 * Applies checked billing settings to the account (written by the caller's flush); whether its
 * LowBalanceThreshold or LowBalanceWebhookUri changed, which re-arms its BalanceLow webhook
 * (billing/balance-store.ts rearmLowBalance).
 */
export function applyAccountBilling(account: Account, change: AccountBillingChange): boolean {
  if (change.rateCard !== undefined) account.rateCard = change.rateCard;
  if (change.billingMode !== undefined) account.billingMode = change.billingMode;
  if (change.creditLimit !== undefined) account.creditLimit = change.creditLimit;
  // BigInt(): a bigint column may come back as its text.
  const threshold = account.lowBalanceThreshold == null ? null : BigInt(account.lowBalanceThreshold);
  const thresholdChanged = change.lowBalanceThreshold !== undefined && change.lowBalanceThreshold !== threshold;
  const uriChanged = change.lowBalanceWebhookUri !== undefined && change.lowBalanceWebhookUri !== account.lowBalanceWebhookUri;
  if (thresholdChanged) account.lowBalanceThreshold = change.lowBalanceThreshold!;
  if (uriChanged) account.lowBalanceWebhookUri = change.lowBalanceWebhookUri!;
  return thresholdChanged || uriChanged;
}

type EntryType = "TopUp" | "Adjustment";

/** The Type, Amount and Reference of an AddBalanceEntry request, checked together; a 400 naming every bad one. */
function checkEntry(req: AddBalanceEntryRequest): { type: EntryType; amount: bigint; reference: string } {
  const problems: FieldProblem[] = [];
  let type: EntryType | undefined;
  if (req.type === "") problems.push({ field: "Type", code: "MissingParameter", message: "Type is required: TopUp or Adjustment." });
  else if (req.type === "TopUp" || req.type === "Adjustment") type = req.type;
  else problems.push({ field: "Type", code: "InvalidParameter", message: `Type must be TopUp or Adjustment; got ${quoted(req.type)}.` });
  // A TopUp only adds; an Adjustment corrects either way. With no valid Type, the amount is read as an adjustment's.
  const amount = moneyOrProblem("Amount", req.amount, { signed: type !== "TopUp" });
  if (typeof amount !== "bigint") problems.push(amount);
  else if (type === "TopUp" && amount === 0n) {
    problems.push({ field: "Amount", code: "InvalidParameter", message: `Amount of a TopUp must be more than 0; got ${quoted(req.amount)}.` });
  } else if (amount === 0n) {
    problems.push({ field: "Amount", code: "InvalidParameter", message: `Amount of an Adjustment must not be 0; got ${quoted(req.amount)}.` });
  }
  const reference = req.reference.trim();
  if ([...reference].length > MAX_REFERENCE_CHARS) {
    problems.push({
      field: "Reference",
      code: "InvalidParameter",
      message: `Reference is ${[...reference].length} characters long; the limit is ${MAX_REFERENCE_CHARS}.`,
    });
  }
  if (problems.length > 0 || type === undefined || typeof amount !== "bigint") throw fieldErrors(problems);
  return { type, amount, reference };
}

/**
 * Creates AdminService's AddBalanceEntry and ListBalanceEntries; `em` gives the request's
 * EntityManager once the caller is known to be the operator; `currency` is BILLING_CURRENCY.
 */
export function createBalanceAdmin(deps: {
  clock: Clock;
  currency: string;
  em(ctx: HandlerContext): EntityManager;
}): Pick<ServiceImpl<typeof AdminService>, "addBalanceEntry" | "listBalanceEntries"> {
  return {
    async listBalanceEntries(req: ListBalanceEntriesRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const account = await findAccount(em, req.accountSid);
      const page = checkedPage(req);
      // The account's own read (/v2) with the same statement: one answer shape on both sides.
      const { entries, total } = await listBalanceEntries(em, account.sid, page.limit, page.offset);
      return create(ListBalanceEntriesResponseSchema, { balanceEntries: entries.map(toBalanceEntryPb), totalCount: total, priceUnit: deps.currency });
    },

    async addBalanceEntry(req: AddBalanceEntryRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const account = await findAccount(em, req.accountSid);
      const { type, amount, reference } = checkEntry(req);
      // The balance row is locked, moved and the entry written in one transaction: the balance is
      // always the sum of the entries, whatever charges run at the same moment.
      const entry = await em.transactional(async (tx) => {
        const written = await addBalanceEntry(tx, account.sid, type, amount, reference, deps.clock.now());
        if (!inRange(written.balanceAfter)) {
          // Thrown inside the transaction: it rolls back, and nothing changed.
          throw fieldErrors([
            {
              field: "Amount",
              code: "InvalidParameter",
              message: `Amount would take the balance to ${formatMoney(written.balanceAfter)}, past the largest amount, ${formatMoney(MAX_MICROS)}.`,
            },
          ]);
        }
        return written;
      });
      return toBalanceEntryPb(entry);
    },
  };
}
