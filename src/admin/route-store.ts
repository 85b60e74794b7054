/**
 * Statements on `routes` (issue 30): the ordered route table, read by every dispatching process
 * and replaced as a whole by the operator.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import type { RouteStrategy } from "./route.entity.js";

/** One route: the first in order whose prefix and account match a message carries it. */
export interface RouteRecord {
  /** An E164 prefix such as "+61"; null: any destination. */
  prefix: string | null;
  /** null: any account. */
  accountSid: string | null;
  /** The carriers' Sids, in order. */
  carriers: string[];
  strategy: RouteStrategy;
}

/** The route table in order. */
export async function listRoutes(em: EntityManager): Promise<RouteRecord[]> {
  const rows = await executeBound<{ prefix: string | null; account_sid: string | null; carriers: string[]; strategy: RouteStrategy }>(
    em,
    `select prefix, account_sid, carriers, strategy from routes order by position`,
    [],
  );
  return rows.map((r) => ({ prefix: r.prefix, accountSid: r.account_sid, carriers: [...r.carriers], strategy: r.strategy }));
}

/**
 * Replaces the whole table in the caller's transaction. The table lock makes concurrent replaces
 * take turns (the last one wins whole, never a mix of two).
 */
export async function replaceRoutes(tx: EntityManager, routes: RouteRecord[], now: Date): Promise<void> {
  await executeBound(tx, `lock table routes in exclusive mode`, []);
  await executeBound(tx, `delete from routes`, []);
  if (routes.length === 0) return;
  await executeBound(
    tx,
    `insert into routes (position, prefix, account_sid, carriers, strategy, updated_at)
     select r.position, r.prefix, r.account_sid, array(select jsonb_array_elements_text(r.carriers)), r.strategy, ?
       from unnest(?::int[], ?::text[], ?::text[], ?::jsonb[], ?::text[]) as r(position, prefix, account_sid, carriers, strategy)`,
    [
      now,
      routes.map((_, i) => i + 1),
      routes.map((r) => r.prefix),
      routes.map((r) => r.accountSid),
      routes.map((r) => JSON.stringify(r.carriers)),
      routes.map((r) => r.strategy),
    ],
  );
}
