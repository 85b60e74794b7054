import { defineEntity, p } from "@mikro-orm/core";

/**
 * Schemas of the balances and their ledger (tables `account_balances`, `balance_entries`;
 * docs/billing.md). Declared for the schema only: every statement on them is in
 * balance-store.ts or sql/sb_charge.sql.
 */
/** Where an account stands with its LowBalanceThreshold (docs/billing.md#low-balance). */
export type LowBalanceState = "Above" | "Pending" | "Sent";

export const AccountBalanceEntity = defineEntity({
  name: "AccountBalance",
  tableName: "account_balances",
  properties: {
    accountSid: p.string().length(32).primary(),
    // Micro-units: always the sum of the account's balance_entries.
    balance: p.bigint(),
    updatedAt: p.datetime(),
    // Low balance (docs/billing.md#low-balance): Above (armed), Pending (a crossing to notify), Sent.
    lowBalanceState: p.text().$type<LowBalanceState>().default("Above"),
    // The balance after the charge that took it below the threshold, and that charge's time (Pending, Sent).
    lowBalanceBalance: p.bigint().nullable(),
    lowBalanceAt: p.datetime().nullable(),
  },
});

/** An account's balance. */
export class AccountBalance extends AccountBalanceEntity.class {}
AccountBalanceEntity.setClass(AccountBalance);

/** The kinds of ledger entry. */
export const BALANCE_ENTRY_TYPES = ["Charge", "Refund", "TopUp", "Adjustment"] as const;
/** One of BALANCE_ENTRY_TYPES. */
export type BalanceEntryType = (typeof BALANCE_ENTRY_TYPES)[number];

export const BalanceEntryEntity = defineEntity({
  name: "BalanceEntry",
  tableName: "balance_entries",
  properties: {
    // The primary key is (account_sid, id): the ledger is read by account (Migration20261205010000).
    accountSid: p.string().length(32).primary(),
    id: p.bigint().primary().autoincrement(),
    type: p.text().$type<BalanceEntryType>(),
    // Micro-units, signed: a charge is negative.
    amount: p.bigint(),
    balanceAfter: p.bigint(),
    messageSid: p.string().length(32).nullable(),
    reference: p.text().default(""),
    createdAt: p.datetime(),
    // A Charges row (several charges of one statement, sql/sb_charge.sql): each charge's entry id,
    // message, amount and balance after it; null on every other row. Read through balance_ledger.
    chargeIds: p.array().columnType("bigint[]").nullable(),
    chargeMessageSids: p.array().columnType("varchar(32)[]").nullable(),
    chargeAmounts: p.array().columnType("bigint[]").nullable(),
    chargeBalances: p.array().columnType("bigint[]").nullable(),
  },
});

/** One change of a balance. */
export class BalanceEntry extends BalanceEntryEntity.class {}
BalanceEntryEntity.setClass(BalanceEntry);
