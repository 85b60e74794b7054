/**
 * The statements on `unmatched_inbound` (an inbound SMS that answered no live lease), and the
 * retention purge's on it and on `inbound_parts`: the two tables whose texts no message owns.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import { UnmatchedInbound, type UnmatchedReason } from "./unmatched-inbound.entity.js";

/** Keeps an SMS that belongs to no account, in the caller's transaction. */
export async function insertUnmatchedInbound(
  em: EntityManager,
  sms: { sender: string; recipient: string; text: string; receivedAt: Date; reason: UnmatchedReason },
): Promise<void> {
  await em.insert(UnmatchedInbound, sms);
}

/** The tables holding inbound texts that belong to no message (yet): both have id, sender, recipient, text, received_at. */
export type InboundTextTable = "unmatched_inbound" | "inbound_parts";

/**
 * Whose such a row is: the account that owns the number it was sent to, or an account whose lease
 * (live or ended) joined its two ends, the pool number and the sender (a late reply). `?` is the
 * account, twice.
 */
const OF_ACCOUNT = `(exists (select 1 from numbers n where n.number = u.recipient and n.account_sid = ?)
   or exists (select 1 from leases l where l.pool_number = u.recipient and l.recipient = u.sender and l.account_sid = ?))`;

/** A row of no account: neither to an owned number nor ever between a lease's two ends. */
const OF_NO_ACCOUNT = `not exists (select 1 from numbers n where n.number = u.recipient and n.account_sid is not null)
   and not exists (select 1 from leases l where l.pool_number = u.recipient and l.recipient = u.sender)`;

/**
 * Deletes up to `limit` of the account's rows received before `before` (retention; row locks
 * skipped, as the message purge's); how many.
 */
export async function deleteInboundTextsOfAccount(
  em: EntityManager,
  table: InboundTextTable,
  accountSid: string,
  before: Date,
  limit: number,
): Promise<number> {
  const rows = await executeBound<{ id: string }>(
    em,
    `delete from ${table} where id in (
       select u.id from ${table} u where u.received_at < ? and ${OF_ACCOUNT} order by u.id limit ? for update skip locked)
     returning id`,
    [before, accountSid, accountSid, limit],
  );
  return rows.length;
}

/** Empties the text of up to `limit` of the account's unmatched SMS received before `before` (redaction); how many. */
export async function redactUnmatchedOfAccount(em: EntityManager, accountSid: string, before: Date, limit: number): Promise<number> {
  const rows = await executeBound<{ id: string }>(
    em,
    `update unmatched_inbound set text = '' where id in (
       select u.id from unmatched_inbound u where u.received_at < ? and u.text <> '' and ${OF_ACCOUNT} order by u.id limit ? for update skip locked)
     returning id`,
    [before, accountSid, accountSid, limit],
  );
  return rows.length;
}

/** Deletes up to `limit` rows of no account received before `before` (MESSAGE_RETENTION_DAYS); how many. */
export async function deleteInboundTextsOfNoAccount(em: EntityManager, table: InboundTextTable, before: Date, limit: number): Promise<number> {
  const rows = await executeBound<{ id: string }>(
    em,
    `delete from ${table} where id in (
       select u.id from ${table} u where u.received_at < ? and ${OF_NO_ACCOUNT} order by u.id limit ? for update skip locked)
     returning id`,
    [before, limit],
  );
  return rows.length;
}
