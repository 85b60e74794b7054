/**
 * Statements on `messages` for the operator (AdminService's SearchMessages, GetMessageTimeline
 * and GetStats, which the console shows): cold paths, through the EntityManager or unprepared SQL.
 * None of them has an index of its own: the search by To or across accounts and the per-minute
 * counts read the table (an index for them would cost every send); READ_STATEMENT_TIMEOUT_MS
 * bounds them, as every read.
 */
import type { EntityManager } from "@mikro-orm/sql";
import type { Page } from "../accounts/account-store.js";
import { executeBound } from "../db/bound-sql.js";
import { Message, type MessageStatus } from "./message.entity.js";

/** Which messages the operator's search takes; absent fields match any. Created in [createdFrom, createdTo). */
export interface MessageSearch {
  accountSid?: string;
  propertySid?: string;
  recipient?: string;
  status?: MessageStatus;
  createdFrom?: Date;
  createdTo?: Date;
}

/** A page of the messages of every account matching the search, newest first, and how many match. */
export function searchMessages(em: EntityManager, s: MessageSearch, page: Page): Promise<[Message[], number]> {
  const created: Record<string, Date> = {};
  if (s.createdFrom !== undefined) created.$gte = s.createdFrom;
  if (s.createdTo !== undefined) created.$lt = s.createdTo;
  const where = {
    ...(s.accountSid !== undefined ? { accountSid: s.accountSid } : {}),
    ...(s.propertySid !== undefined ? { propertySid: s.propertySid } : {}),
    ...(s.recipient !== undefined ? { recipient: s.recipient } : {}),
    ...(s.status !== undefined ? { status: s.status } : {}),
    ...(Object.keys(created).length > 0 ? { createdAt: created } : {}),
  } as Parameters<typeof em.find<Message>>[1];
  return em.findAndCount(Message, where, { orderBy: { createdAt: "desc", sid: "desc" }, limit: page.limit, offset: page.offset });
}

/** Any account's message with this Sid, or null. */
export function findAnyMessage(em: EntityManager, sid: string): Promise<Message | null> {
  return em.findOne(Message, { sid });
}

/**
 * The other messages of a message's conversation, oldest first: the message it answers, the
 * replies to it (and to that one), and the messages sent or received on the same lease.
 */
export function conversationOf(em: EntityManager, m: Pick<Message, "sid" | "inReplyTo" | "leaseSid">): Promise<Message[]> {
  const roots = [m.sid, ...(m.inReplyTo ? [m.inReplyTo] : [])];
  const or: object[] = [{ sid: { $in: roots } }, { inReplyTo: { $in: roots } }];
  if (m.leaseSid) or.push({ leaseSid: m.leaseSid });
  return em.find(Message, { $and: [{ sid: { $ne: m.sid } }, { $or: or }] } as never, { orderBy: { createdAt: "asc", sid: "asc" } });
}

/** Outbound messages per minute and per event, for the minutes in [from, to). */
export interface MinuteCount {
  kind: "accepted" | "submitted" | "delivered" | "failed";
  /** The minute's start, Unix seconds. */
  minute: number;
  n: number;
}

/**
 * How many outbound messages were accepted, submitted, delivered and failed in each minute of
 * [from, to). A failure counts at its final report (delivered_at), or at its submission or
 * creation when it failed before any report (refused, or at dispatch).
 */
export async function outboundMinuteCounts(em: EntityManager, from: Date, to: Date): Promise<MinuteCount[]> {
  const bucket = (col: string) => `(floor(extract(epoch from ${col}) / 60) * 60)::bigint`;
  const failedAt = "coalesce(delivered_at, submitted_at, created_at)";
  const rows = await executeBound<{ kind: MinuteCount["kind"]; minute: string | number; n: string | number }>(
    em,
    `select 'accepted' as kind, ${bucket("created_at")} as minute, count(*) as n from messages
      where direction = 'Transmit' and created_at >= ? and created_at < ? group by 2
     union all
     select 'submitted', ${bucket("submitted_at")}, count(*) from messages
      where direction = 'Transmit' and submitted_at >= ? and submitted_at < ? group by 2
     union all
     select 'delivered', ${bucket("delivered_at")}, count(*) from messages
      where direction = 'Transmit' and status = 'Delivered' and delivered_at >= ? and delivered_at < ? group by 2
     union all
     select 'failed', ${bucket(failedAt)}, count(*) from messages
      where direction = 'Transmit' and status = 'Failed' and ${failedAt} >= ? and ${failedAt} < ? group by 2`,
    [from, to, from, to, from, to, from, to],
  );
  return rows.map((r) => ({ kind: r.kind, minute: Number(r.minute), n: Number(r.n) }));
}

/** The dispatcher's queue at `now`: messages due and not yet handed to a carrier, the oldest one's due time, and those due later. */
export async function queueFigures(em: EntityManager, now: Date): Promise<{ due: number; oldestDue: Date | null; later: number }> {
  const [row] = await executeBound<{ due: string | number; oldest: Date | string | null; later: string | number }>(
    em,
    `select count(*) filter (where send_at <= ?) as due, min(send_at) filter (where send_at <= ?) as oldest,
            count(*) filter (where send_at > ?) as later
       from messages where queued`,
    [now, now, now],
  );
  return { due: Number(row.due), oldestDue: row.oldest === null ? null : new Date(row.oldest), later: Number(row.later) };
}

/**
 * The segments of the account's outgoing messages stored since `since` (GetAccount's SegmentsToday
 * for an account without a DailySegmentQuota, whose sends no bucket counts). Read through the
 * index on (property_sid, created_at), one range per property of the account.
 */
export async function segmentsStoredSince(em: EntityManager, accountSid: string, since: Date): Promise<number> {
  const rows = await executeBound<{ n: number | string | null }>(
    em,
    `select coalesce(sum(m.num_segments), 0)::int8 as n
       from properties p join messages m on m.property_sid = p.sid and m.created_at >= ?
      where p.account_sid = ? and m.direction = 'Transmit'`,
    [since, accountSid],
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * Of these messages, the ones still stored, and whether each one's text was redacted (the
 * simulator's Handsets view shows no text the retention purge deleted or redacted).
 */
export async function redactionOf(em: EntityManager, sids: readonly string[]): Promise<Map<string, boolean>> {
  if (sids.length === 0) return new Map();
  const rows = await executeBound<{ sid: string; redacted: boolean }>(em, "select sid, redacted from messages where sid = any(?::text[])", [
    [...new Set(sids)],
  ]);
  return new Map(rows.map((r) => [r.sid, r.redacted]));
}
