/**
 * Statements on `account_balances` and `balance_entries` (and its view `balance_ledger`, one entry
 * per charge; docs/billing.md): the conditional
 * charge (sql/sb_charge.sql), refunds keyed by message (once, whatever races), top-ups and
 * adjustments, and the ledger's pages. Every change of a balance is one ledger entry written in
 * the same transaction, so the balance always equals the sum of the entries. Amounts cross to and
 * from the driver as text: bigint micro-units, never a JavaScript number.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import type { BalanceEntryType, LowBalanceState } from "./balance.entity.js";

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

/**
 * The charge as common table expressions of a caller's statement (the send's facts statement,
 * messaging/message-send-store.ts): `sends` names a CTE of the sends to charge, with columns `i`
 * (the send's order), `account_sid`, `sid` (its message) and `amount` (micro-units, more than 0).
 * The fragment defines `charged (i, accepted)` and takes one parameter, the time (`?`).
 *
 * The same rule as sql/sb_charge.sql, in the statement: the batch's balance rows are locked in
 * account order (as sb_charge locks them, so two statements never wait for each other in a cycle);
 * an account whose balance (with its credit) covers all of its sends of the batch is charged the
 * sum in one conditional update, with its ledger row (one Charge, or one Charges row holding the
 * charges) and its low-balance crossing; the sends of an account it cannot cover in full, or
 * without a balance row yet, go to sb_charge, which takes them in order and refuses only what does
 * not fit. The common case is thus one update and one insert per account, and no PL/pgSQL call.
 * The conditional update re-reads a row another transaction changed (EvalPlanQual), so the sum is
 * checked against the balance it replaces, exactly.
 */
export function chargeCtes(sends: string): string {
  const crossed = `t.total <> 0 and ab.low_balance_state = 'Above' and t.low_balance_webhook_uri is not null and ab.balance - t.total < t.low_balance_threshold`;
  return `charge_now as (select ?::timestamptz as t),
charge_totals as materialized (
  select p.account_sid, sum(p.amount)::bigint as total, a.billing_mode, a.credit_limit, a.low_balance_threshold, a.low_balance_webhook_uri
    from ${sends} p join accounts a on a.sid = p.account_sid
   group by p.account_sid, a.sid),
charge_locks as materialized (
  select ab.account_sid from account_balances ab
   where ab.account_sid in (select account_sid from charge_totals)
   order by ab.account_sid
     for update),
charge_whole as materialized (
  update account_balances ab
     set balance = ab.balance - t.total, updated_at = n.t,
         low_balance_state = case when ${crossed} then 'Pending' else ab.low_balance_state end,
         low_balance_balance = case when ${crossed} then ab.balance - t.total else ab.low_balance_balance end,
         low_balance_at = case when ${crossed} then n.t else ab.low_balance_at end
    from charge_totals t join charge_locks l on l.account_sid = t.account_sid cross join charge_now n
   where ab.account_sid = t.account_sid
     and ((t.billing_mode = 'Postpaid' and t.credit_limit is null) or ab.balance - t.total >= -coalesce(t.credit_limit, 0))
  returning ab.account_sid, ab.balance + t.total as before),
charge_rows as materialized (
  select e.account_sid, count(*)::int as n, -sum(e.amount)::bigint as amount, array_agg(e.sid order by e.i) as sids,
         array_agg(-e.amount order by e.i) as amounts, array_agg(e.after order by e.i) as balances
    from (select p.account_sid, p.i, p.sid, p.amount, w.before - sum(p.amount) over (partition by p.account_sid order by p.i) as after
            from ${sends} p join charge_whole w on w.account_sid = p.account_sid) e
   group by e.account_sid),
charge_entries as (
  insert into balance_entries (id, account_sid, type, amount, balance_after, message_sid, reference, created_at,
                               charge_ids, charge_message_sids, charge_amounts, charge_balances)
  select g.ids[r.n], r.account_sid, case when r.n = 1 then 'Charge' else 'Charges' end, r.amount, r.balances[r.n],
         case when r.n = 1 then r.sids[1] end, '', n.t,
         case when r.n > 1 then g.ids end, case when r.n > 1 then r.sids end, case when r.n > 1 then r.amounts end, case when r.n > 1 then r.balances end
    from charge_rows r cross join charge_now n
   cross join lateral (select array(select nextval('balance_entries_id_seq') from generate_series(1, r.n)) as ids) g),
charge_rest as materialized (
  select array_agg(p.i order by p.i) as ids, array_agg(p.account_sid order by p.i) as accounts,
         array_agg(p.amount order by p.i) as amounts, array_agg(p.sid order by p.i) as sids
    from ${sends} p where not exists (select 1 from charge_whole w where w.account_sid = p.account_sid)),
charged as materialized (
  select p.i, true as accepted from ${sends} p join charge_whole w on w.account_sid = p.account_sid
  union all
  select r.ids[c.ord], c.accepted from charge_rest r cross join charge_now n cross join lateral sb_charge(r.accounts, r.amounts, r.sids, n.t) as c
   where r.ids is not null)`;
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
  // An entry that brings the balance back to the LowBalanceThreshold arms its webhook again
  // (docs/billing.md#low-balance): Sent becomes Above; a Pending crossing stays for the worker,
  // which arms it once it has queued the webhook.
  const rows = await executeBound<{ balance: string }>(
    tx,
    `update account_balances ab set balance = ab.balance + ?::bigint, updated_at = ?,
            low_balance_state = case when ab.low_balance_state = 'Sent' and ab.balance + ?::bigint >= a.low_balance_threshold
                                     then 'Above' else ab.low_balance_state end
       from accounts a
      where ab.account_sid = ? and a.sid = ab.account_sid
     returning ab.balance::text as balance`,
    [entry.amount.toString(), now, entry.amount.toString(), entry.accountSid],
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
       from balance_ledger where account_sid = ? and message_sid = ?`,
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
  // One entry per charge (the view balance_ledger opens the Charges rows), in the rows' order (the
  // table's primary key) and within a row by entry id. Ordered by the view's columns: a bare `id`
  // would be the output's `id::text`, and "9" sorts after "10".
  const rows = await executeBound<EntryDbRow>(
    em,
    `select ${ENTRY_COLUMNS} from balance_ledger where account_sid = ? order by balance_ledger.row_id desc, balance_ledger.id desc limit ? offset ?`,
    [accountSid, limit, offset],
  );
  const total = await executeBound<{ n: number | string }>(
    em,
    `select coalesce(sum(coalesce(cardinality(charge_ids), 1)), 0) as n from balance_entries where account_sid = ?`,
    [accountSid],
  );
  return { entries: rows.map(toEntry), total: Number(total[0].n) };
}

/** What GetBalance shows of an account: its balance (0 before its first entry), BillingMode and CreditLimit, read together. */
export async function balanceSummary(
  em: EntityManager,
  accountSid: string,
): Promise<{ balance: bigint; billingMode: string; creditLimit: bigint | null } | undefined> {
  const rows = await executeBound<{ balance: string; billing_mode: string; credit_limit: string | null }>(
    em,
    `select coalesce(ab.balance, 0)::text as balance, a.billing_mode, a.credit_limit::text as credit_limit
       from accounts a left join account_balances ab on ab.account_sid = a.sid
      where a.sid = ?`,
    [accountSid],
  );
  if (rows.length === 0) return undefined;
  const r = rows[0];
  return { balance: BigInt(r.balance), billingMode: r.billing_mode, creditLimit: r.credit_limit === null ? null : BigInt(r.credit_limit) };
}

/** A low-balance crossing waiting for its webhook (docs/billing.md#low-balance), with the account's settings now. */
export interface LowBalanceCrossing {
  accountSid: string;
  /** The balance after the charge that took it below the threshold. */
  balance: bigint;
  at: Date;
  threshold: bigint | null;
  webhookUri: string | null;
}

/**
 * Locks up to `limit` Pending crossings (the partial index's rows), in account order as every
 * charge locks balance rows, until the caller's transaction ends. A row another worker settled
 * while this one waited for its lock is re-checked and left out, so each crossing is taken once.
 */
export async function lockLowBalanceCrossings(tx: EntityManager, limit: number): Promise<LowBalanceCrossing[]> {
  const rows = await executeBound<{ account_sid: string; balance: string; at: Date | string; threshold: string | null; uri: string | null }>(
    tx,
    `select ab.account_sid, ab.low_balance_balance::text as balance, ab.low_balance_at as at,
            a.low_balance_threshold::text as threshold, a.low_balance_webhook_uri as uri
       from account_balances ab join accounts a on a.sid = ab.account_sid
      where ab.low_balance_state = 'Pending'
      order by ab.account_sid
      limit ?
        for update of ab`,
    [limit],
  );
  return rows.map((r) => ({
    accountSid: r.account_sid,
    balance: BigInt(r.balance),
    at: new Date(r.at),
    threshold: r.threshold === null ? null : BigInt(r.threshold),
    webhookUri: r.uri,
  }));
}

/**
 * Settles locked crossings once their webhooks are queued: Sent, or Above at once when the balance
 * is back at the threshold (a top-up came before the worker; it left the Pending crossing alone).
 */
export async function settleLowBalanceCrossings(tx: EntityManager, accountSids: readonly string[]): Promise<void> {
  if (accountSids.length === 0) return;
  await executeBound(
    tx,
    `update account_balances ab
        set low_balance_state = case when a.low_balance_threshold is null or ab.balance >= a.low_balance_threshold then 'Above' else 'Sent' end
       from accounts a
      where ab.account_sid = any(?::text[]) and a.sid = ab.account_sid and ab.low_balance_state = 'Pending'`,
    [[...accountSids]],
  );
}

/**
 * Arms the account's low-balance webhook again (Above), when its LowBalanceThreshold or
 * LowBalanceWebhookUri changes: the next charge that leaves the balance below the (new)
 * threshold sends one, even when the balance is below it already. A crossing not yet queued is
 * dropped: it was about the settings the operator just replaced.
 */
export async function rearmLowBalance(tx: EntityManager, accountSid: string): Promise<void> {
  await executeBound(tx, `update account_balances set low_balance_state = 'Above' where account_sid = ? and low_balance_state <> 'Above'`, [accountSid]);
}

/** An account's low-balance state (docs/billing.md#low-balance); Above before its first entry. */
export async function lowBalanceStateOf(em: EntityManager, accountSid: string): Promise<LowBalanceState> {
  const rows = await executeBound<{ s: LowBalanceState }>(em, `select low_balance_state as s from account_balances where account_sid = ?`, [accountSid]);
  return rows[0]?.s ?? "Above";
}
