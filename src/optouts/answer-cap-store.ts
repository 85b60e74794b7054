/**
 * The cap on keyword answers (docs/api.md#opt-out-stop-start-help): an account answers each kind of
 * keyword (STOP, START, HELP) at most once per handset per UTC day. Every statement on
 * `keyword_answers` is here.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import type { KeywordKind } from "./keywords.js";

/**
 * Claims today's answer of `kind` to `recipient` for the account: true when none was claimed yet
 * today (the caller answers), false when one was (no answer). One conditional upsert, in the
 * caller's transaction: a concurrent claim of the same key waits for this one's commit and then
 * finds the day taken (or, if this one rolled back, takes it), so across processes one wins.
 */
export async function claimAnswer(tx: EntityManager, accountSid: string, recipient: string, kind: KeywordKind, now: Date): Promise<boolean> {
  const day = now.toISOString().slice(0, 10);
  const rows = await executeBound<{ day: unknown }>(
    tx,
    `insert into keyword_answers (account_sid, recipient, kind, day) values (?, ?, ?, ?::date)
     on conflict (account_sid, recipient, kind) do update set day = excluded.day where keyword_answers.day < excluded.day
     returning day`,
    [accountSid, recipient, kind, day],
  );
  return rows.length > 0;
}
