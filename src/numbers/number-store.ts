/**
 * Statements on `numbers`: the services, the operator API and the demo seed call these, never the
 * EntityManager's queries themselves. Entities these return or add are managed by the
 * EntityManager, so a caller's changes to them are written by its flush.
 */
import type { RequiredEntityData } from "@mikro-orm/core";
import type { EntityManager } from "@mikro-orm/sql";
import type { Page } from "../accounts/account-store.js";
import { executeBound } from "../db/bound-sql.js";
import { PhoneNumber } from "./phone-number.entity.js";

/** Whether `number` is one of the account's own numbers (not a pool number, not another account's). */
export async function accountOwnsNumber(em: EntityManager, accountSid: string, number: string): Promise<boolean> {
  return (await em.count(PhoneNumber, { number, accountSid })) > 0;
}

/**
 * Of the given numbers, those that are the deployment's own (pool numbers and every account's),
 * each with the account that owns it (null: a pool number). One probe of the number's unique
 * index per number, in one statement.
 */
export async function deploymentNumbers(em: EntityManager, numbers: string[]): Promise<Map<string, string | null>> {
  if (numbers.length === 0) return new Map();
  const rows = await executeBound<{ number: string; account_sid: string | null }>(em, "select number, account_sid from numbers where number = any(?::text[])", [
    numbers,
  ]);
  return new Map(rows.map((r) => [r.number, r.account_sid]));
}

/** The number (E164), whoever holds it (of this account only, when given), or null. */
export function findNumber(em: EntityManager, number: string, accountSid?: string): Promise<PhoneNumber | null> {
  return em.findOne(PhoneNumber, accountSid === undefined ? { number } : { number, accountSid });
}

/** Which numbers a list takes: an account's, or (without one) the pool's (pool true), the accounts' (false), or all. */
export type NumberFilter = { accountSid: string } | { accountSid?: undefined; pool?: boolean };

/** A page of numbers in number order, and how many match. */
export function listNumbers(em: EntityManager, filter: NumberFilter, page: Page): Promise<[PhoneNumber[], number]> {
  const where =
    filter.accountSid !== undefined ? { accountSid: filter.accountSid } : filter.pool === undefined ? {} : { accountSid: filter.pool ? null : { $ne: null } };
  return em.findAndCount(PhoneNumber, where, { orderBy: { number: "asc" }, limit: page.limit, offset: page.offset });
}

/** Whether any number is registered against the address. */
export async function addressHasNumbers(em: EntityManager, addressSid: string): Promise<boolean> {
  return (await em.count(PhoneNumber, { addressSid })) > 0;
}

/** A new number, written by the caller's next flush. */
export function addNumber(em: EntityManager, data: RequiredEntityData<PhoneNumber>): PhoneNumber {
  const number = em.create(PhoneNumber, data);
  em.persist(number);
  return number;
}
