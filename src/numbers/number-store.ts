/** Statements on `numbers` outside the operator's and customers' entity reads and writes. */
import type { EntityManager } from "@mikro-orm/sql";
import { PhoneNumber } from "./phone-number.entity.js";

/** Whether `number` is one of the account's own numbers (not a pool number, not another account's). */
export async function accountOwnsNumber(em: EntityManager, accountSid: string, number: string): Promise<boolean> {
  return (await em.count(PhoneNumber, { number, accountSid })) > 0;
}
