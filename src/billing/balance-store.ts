/**
 * Statements on `account_balances` and `balance_entries` (docs/billing.md): the conditional
 * charge (sql/sb_charge.sql), refunds keyed by message (once, whatever races), top-ups and
 * adjustments, and the ledger's pages. Every change of a balance is one ledger entry written in
 * the same transaction, so the balance always equals the sum of the entries. Amounts cross to and
 * from the driver as text: bigint micro-units, never a JavaScript number.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import type { BalanceEntryType } from "./balance.entity.js";

/** One send to charge: its account, price in micro-units (0 or more) and message. */
export interface ChargeItem {
  accountSid: string;
  amount: bigint;
  messageSid: string;
}

/** What the charge did with one send: accepted with the balance after it, or refused. */
export type ChargeResult = { accepted: true; balanceAfter: bigint } | { accepted: false };

/** One ledger entry. */
export interface BalanceEntryRecord {
  id: string;
  accountSid: string;
  type: BalanceEntryType;
  /** Micro-units, signed: a charge is negative. */
  amount: bigint;
  balanceAfter: bigint;
  messageSid: string | null;
  reference: string;
  createdAt: Date;
}

interface EntryDbRow {
  id: string | number;
  account_sid: string;
  type: BalanceEntryType;
  amount: string;
  balance_after: string;
  message_sid: string | null;
  reference: string;
  created_at: Date | string;
}

const ENTRY_COLUMNS = "id::text as id, account_sid, type, amount::text as amount, balance_after::text as balance_after, message_sid, reference, created_at";

function toEntry(r: EntryDbRow): BalanceEntryRecord {
  return {
    id: String(r.id),
    accountSid: r.account_sid,
    type: r.type,
    amount: BigInt(r.amount),
    balanceAfter: BigInt(r.balance_after),
    messageSid: r.message_sid,
    reference: r.reference,
    createdAt: new Date(r.created_at),
  };
}

/**
 * Charges each send in order, only those that fit the balance and credit (sb_charge), in the
 * caller's transaction; the results are in the items' order.
 */
export async function chargeSends(tx: EntityManager, items: readonly ChargeItem[], now: Date): Promise<ChargeResult[]> {
  if (items.length === 0) return [];
  const rows = await executeBound<{ ord: number; accepted: boolean; balance_after: string | null }>(
    tx,
    `select c.ord, c.accepted, c.balance_after::text as balance_after
       from sb_charge(?::text[], ?::bigint[], ?::text[], ?::timestamptz) as c order by c.ord`,
    [items.map((i) => i.accountSid), items.map((i) => i.amount.toString()), items.map((i) => i.messageSid), now],
  );
  return rows.map((r) => (r.accepted ? { accepted: true, balanceAfter: BigInt(r.balance_after!) } : { accepted: false }));
}

/** Locks an account's balance row (made at 0 if it has none) until the transaction ends; its balance. */
async function lockBalance(tx: EntityManager, accountSid: string, now: Date): Promise<bigint> {
  await executeBound(tx, `insert into account_balances (account_sid, balance, updated_at) values (?, 0, ?) on conflict (account_sid) do nothing`, [
    accountSid,
    now,
  ]);
  const rows = await executeBound<{ balance: string }>(tx, `select balance::text as balance from account_balances where account_sid = ? for update`, [
    accountSid,
  ]);
  return BigInt(rows[0].balance);
}

async function addToBalance(
  tx: EntityManager,
  entry: { accountSid: string; type: BalanceEntryType; amount: bigint; messageSid: string | null; reference: string },
  now: Date,
): Promise<BalanceEntryRecord> {
  const rows = await executeBound<{ balance: string }>(
    tx,
    `update account_balances set balance = balance + ?::bigint, updated_at = ? where account_sid = ? returning balance::text as balance`,
    [entry.amount.toString(), now, entry.accountSid],
  );
  const inserted = await executeBound<EntryDbRow>(
    tx,
    `insert into balance_entries (account_sid, type, amount, balance_after, message_sid, reference, created_at)
     values (?, ?, ?::bigint, ?::bigint, ?, ?, ?) returning ${ENTRY_COLUMNS}`,
    [entry.accountSid, entry.type, entry.amount.toString(), rows[0].balance, entry.messageSid, entry.reference, now],
  );
  return toEntry(inserted[0]);
}

/** A TopUp (amount > 0) or an Adjustment (either sign), unconditional, in the caller's transaction. */
export async function addBalanceEntry(
  tx: EntityManager,
  accountSid: string,
  type: "TopUp" | "Adjustment",
  amount: bigint,
  reference: string,
  now: Date,
): Promise<BalanceEntryRecord> {
  await lockBalance(tx, accountSid, now);
  return addToBalance(tx, { accountSid, type, amount, messageSid: null, reference }, now);
}

/**
 * Gives back what a message was charged, once: the message's Charge entries are summed under the
 * account's balance lock, and a second refund (a race, a retry) finds the Refund entry and does
 * nothing. Null when there was nothing to refund (never charged, or refunded already).
 */
export async function refundMessage(tx: EntityManager, accountSid: string, messageSid: string, now: Date): Promise<BalanceEntryRecord | null> {
  await lockBalance(tx, accountSid, now);
  const rows = await executeBound<{ charged: string | null; refunded: number | string }>(
    tx,
    `select (-sum(amount) filter (where type = 'Charge'))::text as charged, count(*) filter (where type = 'Refund') as refunded
       from balance_entries where account_sid = ? and message_sid = ?`,
    [accountSid, messageSid],
  );
  const charged = rows[0].charged === null ? 0n : BigInt(rows[0].charged);
  if (Number(rows[0].refunded) > 0 || charged <= 0n) return null;
  return addToBalance(tx, { accountSid, type: "Refund", amount: charged, messageSid, reference: "" }, now);
}

/**
 * Gives back the price of each priced message of `messageSids` not refunded yet (sql/sb_refund.sql),
 * in the caller's transaction: a message that failed before a carrier took it, or was canceled.
 * Returns the refunds made (none for unpriced messages: one primary-key probe each).
 */
export async function refundMessages(tx: EntityManager, messageSids: readonly string[], now: Date): Promise<{ messageSid: string; amount: bigint }[]> {
  if (messageSids.length === 0) return [];
  const rows = await executeBound<{ message_sid: string; amount: string }>(
    tx,
    `select r.message_sid, r.amount::text as amount from sb_refund(?::text[], ?::timestamptz) as r`,
    [messageSids, now],
    "sb_refund",
  );
  return rows.map((r) => ({ messageSid: r.message_sid, amount: BigInt(r.amount) }));
}

/** An account's balance (0 before its first entry). */
export async function balanceOf(em: EntityManager, accountSid: string): Promise<bigint> {
  const rows = await executeBound<{ balance: string }>(em, `select balance::text as balance from account_balances where account_sid = ?`, [accountSid]);
  return rows[0] ? BigInt(rows[0].balance) : 0n;
}

/** The balances of these accounts, in one statement (a page of accounts); an account without a balance row is absent (its balance is 0). */
export async function balancesOf(em: EntityManager, accountSids: readonly string[]): Promise<Map<string, bigint>> {
  if (accountSids.length === 0) return new Map();
  const rows = await executeBound<{ account_sid: string; balance: string }>(
    em,
    `select account_sid, balance::text as balance from account_balances where account_sid = any(?::text[])`,
    [[...accountSids]],
  );
  return new Map(rows.map((r) => [r.account_sid, BigInt(r.balance)]));
}

/** The sum of an account's ledger entries: what its balance always equals. */
export async function ledgerSum(em: EntityManager, accountSid: string): Promise<bigint> {
  const rows = await executeBound<{ total: string }>(em, `select coalesce(sum(amount), 0)::text as total from balance_entries where account_sid = ?`, [
    accountSid,
  ]);
  return BigInt(rows[0].total);
}

/** A page of an account's ledger, newest first, and how many entries it has. */
export async function listBalanceEntries(
  em: EntityManager,
  accountSid: string,
  limit: number,
  offset: number,
): Promise<{ entries: BalanceEntryRecord[]; total: number }> {
  // Ordered by the table's column: a bare `id` would be the output's `id::text`, and "9" sorts after "10".
  const rows = await executeBound<EntryDbRow>(
    em,
    `select ${ENTRY_COLUMNS} from balance_entries where account_sid = ? order by balance_entries.id desc limit ? offset ?`,
    [accountSid, limit, offset],
  );
  const total = await executeBound<{ n: number | string }>(em, `select count(*) as n from balance_entries where account_sid = ?`, [accountSid]);
  return { entries: rows.map(toEntry), total: Number(total[0].n) };
}
