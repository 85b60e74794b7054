/**
 * Statements on `sweep_positions`: where a sweep of messages_submitted_at_idx stopped, shared by
 * the processes that run it and kept across restarts.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import type { SubmittedKey } from "../messaging/message-receipt-store.js";

type Em = EntityManager;

/** The position the sweep `name` reached, or undefined before its first round. */
export async function readSweepPosition(em: Em, name: string): Promise<SubmittedKey | undefined> {
  const [row] = await executeBound<SubmittedKey>(em, `select submitted_at, sid from sweep_positions where name = ?`, [name]);
  return row ? { submitted_at: new Date(row.submitted_at), sid: row.sid } : undefined;
}

/** Moves the sweep `name` to `to`, only forward: a process that handled an earlier batch never moves it back. */
export async function advanceSweepPosition(em: Em, name: string, to: SubmittedKey): Promise<void> {
  await executeBound(
    em,
    `insert into sweep_positions (name, submitted_at, sid) values (?, ?, ?)
     on conflict (name) do update set submitted_at = excluded.submitted_at, sid = excluded.sid
      where (sweep_positions.submitted_at, sweep_positions.sid) < (excluded.submitted_at, excluded.sid)`,
    [name, to.submitted_at, to.sid],
  );
}
