/** Statements on `numbers` outside the operator's and customers' entity reads and writes. */
import type { EntityManager } from "@mikro-orm/sql";
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
  const rows = await executeBound<{ number: string; account_sid: string | null }>(em, "select number, account_sid from numbers where number = any(?::text[])", [numbers]);
  return new Map(rows.map((r) => [r.number, r.account_sid]));
}
