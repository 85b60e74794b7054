/** Statements on `accounts` beyond the entity reads and writes of the services. */
import type { EntityManager } from "@mikro-orm/sql";

/**
 * The account's current token hash, read `for share` (in the caller's transaction, when it has
 * one: a rotation, an update of the row, then waits until that transaction ends). Raw SQL, not
 * the query builder: it refuses a lock mode outside a transaction, and some callers check first
 * and open their transaction after. Undefined for an unknown account.
 */
export async function tokenHashForShare(em: EntityManager, sid: string): Promise<string | undefined> {
  const rows = await em.execute<{ token_hash: string }[]>("select token_hash from accounts where sid = ? for share", [sid]);
  return rows[0]?.token_hash;
}
