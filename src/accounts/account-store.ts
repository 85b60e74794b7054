/**
 * Statements on `accounts` and `properties` (an account's properties belong to its aggregate):
 * the services, the operator API, authentication and the demo seed call these, never the
 * EntityManager's queries themselves. Cold paths, through the EntityManager; entities these
 * return or add are managed by it, so a caller's changes to them are written by its flush.
 */
import type { RequiredEntityData } from "@mikro-orm/core";
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import { Account } from "./account.entity.js";
import { Property } from "./property.entity.js";

/** One page of a list: how many rows to skip and return. */
export interface Page {
  limit: number;
  offset: number;
}

/**
 * The account's current token hash, read `for share` (in the caller's transaction, when it has
 * one: a rotation, an update of the row, then waits until that transaction ends). Raw SQL, not
 * the query builder: it refuses a lock mode outside a transaction, and some callers check first
 * and open their transaction after. Undefined for an unknown account.
 */
export async function tokenHashForShare(em: EntityManager, sid: string): Promise<string | undefined> {
  const rows = await executeBound<{ token_hash: string }>(em, "select token_hash from accounts where sid = ? for share", [sid]);
  return rows[0]?.token_hash;
}

/** The account with this Sid, or null. */
export function findAccountBySid(em: EntityManager, sid: string): Promise<Account | null> {
  return em.findOne(Account, { sid });
}

/** The account with this Sid as the database has it now (not the EntityManager's copy), for authentication; or null. */
export function readAccountFresh(em: EntityManager, sid: string): Promise<Account | null> {
  return em.findOne(Account, { sid }, { disableIdentityMap: true });
}

/** Whether an account has this Sid. */
export async function accountExists(em: EntityManager, sid: string): Promise<boolean> {
  return (await em.count(Account, { sid })) > 0;
}

/** Which of these Sids are accounts' (a route table's AccountSids, checked before it is stored). */
export async function existingAccountSids(em: EntityManager, sids: string[]): Promise<Set<string>> {
  if (sids.length === 0) return new Set();
  const rows = await executeBound<{ sid: string }>(em, "select sid from accounts where sid = any(?::text[])", [sids]);
  return new Set(rows.map((r) => r.sid));
}

/** Whether the database holds any account. */
export async function anyAccount(em: EntityManager): Promise<boolean> {
  return (await em.count(Account, {})) > 0;
}

/** A page of every account, newest first, and how many there are. */
export function listAccounts(em: EntityManager, page: Page): Promise<[Account[], number]> {
  return em.findAndCount(Account, {}, { orderBy: { createdAt: "desc", sid: "desc" }, limit: page.limit, offset: page.offset });
}

/** A new account, written by the caller's next flush. */
export function addAccount(em: EntityManager, data: RequiredEntityData<Account>): Account {
  const account = em.create(Account, data);
  em.persist(account);
  return account;
}

/** The property with this Sid (of this account, when given), or null. */
export function findProperty(em: EntityManager, sid: string, accountSid?: string): Promise<Property | null> {
  return em.findOne(Property, accountSid === undefined ? { sid } : { sid, accountSid });
}

/** A page of an account's properties, oldest first, and how many there are. */
export function listProperties(em: EntityManager, accountSid: string, page: Page): Promise<[Property[], number]> {
  return em.findAndCount(Property, { accountSid }, { orderBy: { createdAt: "asc", sid: "asc" }, limit: page.limit, offset: page.offset });
}

/** A new property, written by the caller's next flush. */
export function addProperty(em: EntityManager, data: RequiredEntityData<Property>): Property {
  const property = em.create(Property, data);
  em.persist(property);
  return property;
}

/** One property and its account's retention settings. */
export interface RetentionRow {
  account_sid: string;
  property_sid: string;
  retention_days: number | null;
  redact_after_days: number | null;
}

/**
 * Every property of the accounts the purge has work for: those with their own RetentionDays or
 * RedactAfterDays, and every account when the deployment has a default retention.
 */
export function listRetentionSettings(em: EntityManager, deploymentDefault: boolean): Promise<RetentionRow[]> {
  return executeBound<RetentionRow>(
    em,
    `select a.sid as account_sid, p.sid as property_sid, a.retention_days, a.redact_after_days
       from accounts a join properties p on p.account_sid = a.sid
      where ? or a.retention_days is not null or a.redact_after_days is not null
      order by a.sid, p.sid`,
    [deploymentDefault],
  );
}

/** The MessagesPerSecond of the given accounts that have one (the dispatcher's pacing, docs/limits.md). */
export async function findDispatchRates(em: EntityManager, sids: string[]): Promise<Map<string, number>> {
  if (sids.length === 0) return new Map();
  const rows = await executeBound<{ sid: string; messages_per_second: number }>(
    em,
    "select sid, messages_per_second from accounts where sid = any(?::text[]) and messages_per_second is not null",
    [sids],
  );
  return new Map(rows.map((r) => [r.sid, Number(r.messages_per_second)]));
}
