/** Statements on `accounts` beyond the entity reads and writes of the services. */
import { LockMode } from "@mikro-orm/core";
import type { EntityManager } from "@mikro-orm/sql";
import { Account } from "./account.entity.js";

/**
 * The account's current token hash, read `for share` in the caller's transaction: a rotation
 * (an update of the row) then waits until that transaction ends. Undefined for an unknown account.
 */
export async function tokenHashForShare(tx: EntityManager, sid: string): Promise<string | undefined> {
  const row = await tx
    .createQueryBuilder(Account)
    .select(["tokenHash"])
    .where({ sid })
    .setLockMode(LockMode.PESSIMISTIC_READ)
    .execute<{ tokenHash: string } | undefined>("get");
  return row?.tokenHash;
}
