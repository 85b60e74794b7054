/**
 * The cap on keyword answers (docs/api.md#opt-out-stop-start-help): an account answers each kind of
 * keyword (STOP, START, HELP) at most once per handset per UTC day. Every statement on
 * `keyword_answers` is here.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import type { KeywordKind } from "./keywords.js";

/**
 * Claims today's answer of `kind` to `recipient` for the account, as the message `messageSid`: true
 * when none was claimed yet today (the caller answers), false when one was (no answer). One
 * conditional upsert, in the caller's transaction: a concurrent claim of the same key waits for
 * this one's commit and then finds the day taken (or, if this one rolled back, takes it), so
 * across processes one wins.
 */
export async function claimAnswer(
  tx: EntityManager,
  a: { accountSid: string; recipient: string; kind: KeywordKind; now: Date; messageSid: string },
): Promise<boolean> {
  const day = a.now.toISOString().slice(0, 10);
  const rows = await executeBound<{ day: unknown }>(
    tx,
    `insert into keyword_answers (account_sid, recipient, kind, day, message_sid) values (?, ?, ?, ?::date, ?)
     on conflict (account_sid, recipient, kind) do update set day = excluded.day, message_sid = excluded.message_sid
      where keyword_answers.day < excluded.day
     returning day`,
    [a.accountSid, a.recipient, a.kind, day, a.messageSid],
  );
  return rows.length > 0;
}

/** The Sids of the last answers (one per kind) the account gave the handset: what its opt-out spares. */
export async function answerSids(tx: EntityManager, accountSid: string, recipient: string): Promise<string[]> {
  const rows = await executeBound<{ message_sid: string }>(tx, `select message_sid from keyword_answers where account_sid = ? and recipient = ?`, [
    accountSid,
    recipient,
  ]);
  return rows.map((r) => r.message_sid);
}
