/**
 * The store of `opt_outs` (docs/api.md#opt-out-stop-start-help): every statement on it. One row per account and
 * recipient, keyed (account_sid, number): the send's `left join opt_outs` and every statement
 * here reach a row through that key.
 */
import type { EntityManager } from "@mikro-orm/sql";
import type { Page } from "../accounts/account-store.js";
import { executeBound } from "../db/bound-sql.js";

/** How a number came on the list: the recipient texted an opt-out keyword, or the account added it. */
export type OptOutSource = "Keyword" | "Api";

/** One opted-out number of an account. */
export interface OptOutEntry {
  number: string;
  source: OptOutSource;
  createdAt: Date;
}

interface OptOutRow {
  number: string;
  source: OptOutSource;
  created_at: Date | string;
}

const toOptOut = (r: OptOutRow): OptOutEntry => ({ number: r.number, source: r.source, createdAt: new Date(r.created_at) });

/**
 * Opts `number` out of the account; idempotent: a number already on the list keeps its row (its
 * first Source and Created). Returns the row as it stands and whether this call added it.
 */
export async function addOptOut(
  em: EntityManager,
  o: { accountSid: string; number: string; source: OptOutSource; createdAt: Date },
): Promise<{ optOut: OptOutEntry; added: boolean }> {
  // One statement whether or not the row exists: the insert's row, or (on a conflict) the existing one.
  const rows = await executeBound<OptOutRow & { added: boolean }>(
    em,
    `with ins as (
       insert into opt_outs (account_sid, number, source, created_at) values (?, ?, ?, ?)
       on conflict (account_sid, number) do nothing
       returning number, source, created_at)
     select number, source, created_at, true as added from ins
     union all
     select number, source, created_at, false as added from opt_outs where account_sid = ? and number = ? and not exists (select 1 from ins)`,
    [o.accountSid, o.number, o.source, o.createdAt, o.accountSid, o.number],
  );
  // A concurrent remove between the conflict and the read leaves no row: the caller's add then stands as this one.
  if (rows.length === 0) return addOptOut(em, o);
  return { optOut: toOptOut(rows[0]), added: rows[0].added };
}

/** Removes the number from the account's list; false when it was not on it. */
export async function removeOptOut(em: EntityManager, accountSid: string, number: string): Promise<boolean> {
  const rows = await executeBound<{ number: string }>(em, "delete from opt_outs where account_sid = ? and number = ? returning number", [accountSid, number]);
  return rows.length > 0;
}

/**
 * Removes the account's entry named by any of `names` (the forms a caller may name one entry by);
 * the entry's number as listed, or undefined when none was on the list.
 */
export async function removeOptOutNamed(em: EntityManager, accountSid: string, names: readonly string[]): Promise<string | undefined> {
  const rows = await executeBound<{ number: string }>(em, "delete from opt_outs where account_sid = ? and number = any(?::text[]) returning number", [
    accountSid,
    names,
  ]);
  return rows[0]?.number;
}

/** A page of the account's opted-out numbers, newest first, and how many there are. */
export async function listOptOuts(em: EntityManager, accountSid: string, page: Page): Promise<[OptOutEntry[], number]> {
  const rows = await executeBound<OptOutRow & { total: string | number }>(
    em,
    `select number, source, created_at, count(*) over () as total from opt_outs
      where account_sid = ? order by created_at desc, number limit ? offset ?`,
    [accountSid, page.limit, page.offset],
  );
  if (rows.length > 0 || page.offset === 0) return [rows.map(toOptOut), Number(rows[0]?.total ?? 0)];
  // A page past the end has no row to carry the count.
  const [{ total }] = await executeBound<{ total: string | number }>(em, "select count(*) as total from opt_outs where account_sid = ?", [accountSid]);
  return [[], Number(total)];
}

/** Of the given numbers, those opted out of the account: one probe of the key per number, in one statement. */
export async function optedOutAmong(em: EntityManager, accountSid: string, numbers: readonly string[]): Promise<Set<string>> {
  if (numbers.length === 0) return new Set();
  const rows = await executeBound<{ number: string }>(em, "select number from opt_outs where account_sid = ? and number = any(?::text[])", [
    accountSid,
    numbers,
  ]);
  return new Set(rows.map((r) => r.number));
}
