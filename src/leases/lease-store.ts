/**
 * Every statement on `leases`: the allocation's hand-tuned SQL (on the send path of leased
 * senders), the reply's match of an inbound SMS to the lease it answers, and the operator's reads.
 */
import { raw } from "@mikro-orm/core";
import type { EntityManager } from "@mikro-orm/sql";
import { Lease } from "./lease.entity.js";
import { executeBound } from "../db/bound-sql.js";

/** A lease as allocation writes it. */
export interface NewLease {
  sid: string;
  poolNumber: string;
  recipient: string;
  accountSid: string;
  messageSid: string;
  slot: number;
  createdAt: Date;
  expiresAt: Date;
}

/** Serializes allocations for one recipient across every process until the transaction ends. */
export async function lockRecipientLeases(em: EntityManager, recipient: string): Promise<void> {
  await executeBound(em, "select pg_advisory_xact_lock(hashtext(?))", [`lease:${recipient}`]);
}

/** Marks the recipient's expired leases (every account's) released, lazily at its next allocation, freeing their slots and numbers. */
export async function releaseExpiredLeases(em: EntityManager, recipient: string, now: Date): Promise<void> {
  await executeBound(em, "update leases set released = true where recipient = ? and not released and expires_at <= ?", [recipient, now]);
}

/** The slots (1..5) the account's unreleased leases to the recipient hold. */
export async function liveLeaseSlots(em: EntityManager, recipient: string, accountSid: string): Promise<number[]> {
  const live = await executeBound<{ slot: number }>(em, "select slot from leases where account_sid = ? and recipient = ? and not released", [
    accountSid,
    recipient,
  ]);
  return live.map((r) => Number(r.slot));
}

/** The first pool number (by number) not lent to the recipient now, by any account, if any. */
export async function freePoolNumber(em: EntityManager, recipient: string): Promise<string | undefined> {
  const free = await executeBound<{ number: string }>(
    em,
    `select n.number from numbers n
      where n.account_sid is null
        and not exists (select 1 from leases l where l.pool_number = n.number and l.recipient = ? and not l.released)
      order by n.number limit 1`,
    [recipient],
  );
  return free[0]?.number;
}

/** Writes a new live lease; the partial unique indexes refuse a slot the account holds or a pool number lent to the recipient. */
export async function insertLease(em: EntityManager, l: NewLease): Promise<void> {
  await executeBound(
    em,
    `insert into leases (sid, pool_number, recipient, account_sid, message_sid, slot, created_at, expires_at, released)
     values (?, ?, ?, ?, ?, ?, ?, ?, false)`,
    [l.sid, l.poolNumber, l.recipient, l.accountSid, l.messageSid, l.slot, l.createdAt, l.expiresAt],
  );
}

/** Ends one lease now, freeing its account's slot for the recipient. */
export async function markLeaseReleased(em: EntityManager, leaseSid: string): Promise<void> {
  await em.nativeUpdate(Lease, { sid: leaseSid }, { released: true });
}

/**
 * Releases the leases of messages that failed before reaching a carrier (issue 41): one
 * conditional statement, in the caller's transaction (the one that wrote the failures). A lease is
 * released only when every message naming it (messages_lease_sid_idx) is Failed or Canceled and
 * none was ever submitted: a lease another message still has queued, claimed or at a carrier stays
 * (that message may yet go out, and replies to it must match), whichever commits first. Returns
 * the Sids released.
 */
export async function releaseUnsubmittedLeases(em: EntityManager, messageSids: string[]): Promise<string[]> {
  if (messageSids.length === 0) return [];
  const rows = await executeBound<{ sid: string }>(
    em,
    `update leases l set released = true
       from messages m
      where m.sid = any(?::text[]) and m.lease_sid is not null and l.sid = m.lease_sid and not l.released
        and m.status = 'Failed' and m.submitted_at is null
        and not exists (select 1 from messages o
                         where o.lease_sid = l.sid and (o.submitted_at is not null or o.status not in ('Failed', 'Canceled')))
      returning l.sid`,
    [messageSids],
  );
  return rows.map((r) => r.sid);
}

/**
 * Live leases per pool number, for the operator's number list: live as allocation counts them,
 * except that an expired lease is not live even before the next allocation marks it released.
 */
export async function liveLeaseCounts(em: EntityManager, poolNumbers: string[], now: Date): Promise<Map<string, number>> {
  if (poolNumbers.length === 0) return new Map();
  const rows = await em
    .createQueryBuilder(Lease)
    .select(["poolNumber", raw("count(*) as n")])
    .where({ released: false, expiresAt: { $gt: now }, poolNumber: { $in: poolNumbers } })
    .groupBy("poolNumber")
    .execute<{ poolNumber: string; n: number | string }[]>("all");
  return new Map(rows.map((r) => [r.poolNumber, Number(r.n)]));
}

/** What an inbound reply needs of the outbound message whose live lease it answers (the forward's own rules are the send pipeline's). */
export interface LeaseMatch {
  message_sid: string;
  account_sid: string;
  property_sid: string;
  webhook_uri: string;
  webhook_method: string;
  forward_to_sms: string;
  forward_from_sms: string;
  forward_to_email: string;
  forward_from_email: string;
  /** Whether the reply's sender (the lease's recipient) is one of the deployment's own numbers. */
  recipient_ours: boolean;
  /** The account's AllowedCountries, for the forward's destination permissions. */
  allowed_countries: string[];
}

/**
 * The newest live lease of `poolNumber` to `recipient` at `at`, with its message's reply settings
 * and whether the recipient is one of the deployment's own numbers (a forwarding loop); undefined
 * when none is live.
 */
export async function findLiveLeaseMatch(em: EntityManager, poolNumber: string, recipient: string, at: Date): Promise<LeaseMatch | undefined> {
  const rows = await executeBound<LeaseMatch>(
    em,
    `select m.sid as message_sid, m.account_sid, m.property_sid, m.webhook_uri, m.webhook_method,
              m.forward_to_sms, m.forward_from_sms, m.forward_to_email, m.forward_from_email,
              exists (select 1 from numbers n where n.number = l.recipient) as recipient_ours, a.allowed_countries
         from leases l join messages m on m.sid = l.message_sid
         join accounts a on a.sid = m.account_sid
        where l.pool_number = ? and l.recipient = ? and not l.released and l.expires_at > ?
        order by l.created_at desc limit 1`,
    [poolNumber, recipient, at],
  );
  return rows[0];
}

/** Whether `poolNumber` was ever lent to `recipient` (a reply to an ended lease, rather than to none). */
export async function wasEverLeased(em: EntityManager, poolNumber: string, recipient: string): Promise<boolean> {
  return (await em.count(Lease, { poolNumber, recipient })) > 0;
}

/** The operator's lease list filters; an undefined filter matches every lease. */
export interface LeaseFilter {
  poolNumber?: string;
  accountSid?: string;
  /** false: only live leases (unreleased and unexpired at `now`). */
  includeEnded: boolean;
}

/** A lease as the operator's list reads it, with the property of the message that took it; times in Unix seconds. */
export interface LeaseRow {
  sid: string;
  poolNumber: string;
  accountSid: string;
  propertySid: string;
  recipient: string;
  messageSid: string;
  created: number;
  expires: number;
  live: boolean;
}

/** A page of the leases matching the filter, newest first, and how many match. */
export async function listLeases(em: EntityManager, f: LeaseFilter, page: { limit: number; offset: number }, now: Date): Promise<[LeaseRow[], number]> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (f.poolNumber !== undefined) {
    where.push("l.pool_number = ?");
    params.push(f.poolNumber);
  }
  if (f.accountSid !== undefined) {
    where.push("l.account_sid = ?");
    params.push(f.accountSid);
  }
  if (!f.includeEnded) {
    where.push("not l.released and l.expires_at > ?");
    params.push(now);
  }
  const clause = where.length > 0 ? `where ${where.join(" and ")}` : "";
  const rows = await executeBound<{
    sid: string;
    pool_number: string;
    account_sid: string;
    property_sid: string | null;
    recipient: string;
    message_sid: string;
    created: number | string;
    expires: number | string;
    live: boolean;
  }>(
    em,
    `select l.sid, l.pool_number, l.account_sid, m.property_sid, l.recipient, l.message_sid,
            floor(extract(epoch from l.created_at))::bigint as created, floor(extract(epoch from l.expires_at))::bigint as expires,
            (not l.released and l.expires_at > ?) as live
       from leases l left join messages m on m.sid = l.message_sid
      ${clause}
      order by l.created_at desc, l.sid desc limit ? offset ?`,
    [now, ...params, page.limit, page.offset],
  );
  const counted = await executeBound<{ n: number | string }>(em, `select count(*) as n from leases l ${clause}`, params);
  return [
    rows.map((r) => ({
      sid: r.sid,
      poolNumber: r.pool_number,
      accountSid: r.account_sid,
      propertySid: r.property_sid ?? "",
      recipient: r.recipient,
      messageSid: r.message_sid,
      created: Number(r.created),
      expires: Number(r.expires),
      live: r.live,
    })),
    Number(counted[0]?.n ?? 0),
  ];
}
