/**
 * Every statement on `webhook_deliveries` and `webhook_attempts`: queueing a call (in the
 * transaction of the state change that causes it), the workers' round-robin claim, recording an
 * attempt, and the operator's delivery log.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { WebhookAttempt as AttemptRecord } from "./webhook-attempt.entity.js";
import { WebhookDelivery, type WebhookEventType } from "./webhook-delivery.entity.js";
import { executeBound } from "../db/bound-sql.js";

/** A webhook call to make, written to the outbox in the caller's transaction. */
export interface WebhookCall {
  accountSid: string;
  /** Null for an account's event (BalanceLow). */
  messageSid: string | null;
  eventType: WebhookEventType;
  url: string;
  method: "POST" | "GET";
  payload: Record<string, string | number>;
  now: Date;
}

/** A webhook call as it enters the outbox, with its id and the host it counts against. */
export interface NewWebhookDelivery extends WebhookCall {
  id: string;
  targetHost: string;
}

/** Writes a Pending call, due at once, in the caller's transaction (every delivery report with a webhook passes here). */
export async function insertWebhookDelivery(em: EntityManager, call: NewWebhookDelivery): Promise<void> {
  await executeBound(
    em,
    `insert into webhook_deliveries (id, account_sid, message_sid, event_type, url, target_host, method, payload, status, attempts, next_attempt_at, created_at)
     values (?, ?, ?, ?, ?, ?, ?, ?::jsonb, 'Pending', 0, ?, ?)`,
    [call.id, call.accountSid, call.messageSid, call.eventType, call.url, call.targetHost, call.method, JSON.stringify(call.payload), call.now, call.now],
  );
}

/** A claimed webhook call, with what is needed to make and sign it. */
export interface DueWebhook {
  id: string;
  account_sid: string;
  target_host: string;
  message_sid: string | null;
  event_type: string;
  url: string;
  method: string;
  payload: Record<string, string | number> | string;
  attempts: number;
  created_at: Date | string;
  webhook_secret: string;
}

/** Calls this process has in flight to one (account, host). */
export interface BusyTarget {
  accountSid: string;
  host: string;
  inFlight: number;
}

/** What a claim may take. */
export interface ClaimLimits {
  now: Date;
  /** The claim lasts until then; an expired claim (a crashed worker's) is taken again. */
  claimUntil: Date;
  /** At most this many calls in all. */
  max: number;
  /** At most this many in flight per (account, host), counting `busy`. */
  perTarget: number;
  /** At most this many in flight per account, all its hosts together, counting `busy`. */
  perAccount: number;
  busy: BusyTarget[];
}

// Due calls are dealt round-robin. The (account, host) pairs with pending calls are listed by
// skipping through webhook_deliveries_target_idx (one index probe per pair, however long each
// queue is); each pair offers its first due calls, earliest due time first and at equal due time
// a first attempt before a retry, no more than its free slots (the per-host limit less the calls
// this process has in flight there); each account's offers are then numbered (its turn), turns
// past the account's free slots (the per-account limit less its calls in flight on every host)
// are dropped, so many hosts do not add up to more than one account's share, and the claim takes
// turn 1 of every account before turn 2 of any. The locking level repeats the
// conditions, so a row another worker claimed meanwhile is re-checked and skipped (SKIP LOCKED,
// as across processes).
const CLAIM = `
with recursive targets(account_sid, target_host) as (
    (select account_sid, target_host from webhook_deliveries
      where status = 'Pending'
      order by account_sid, target_host limit 1)
  union all
    select n.account_sid, n.target_host
      from targets t
      cross join lateral (
        select w.account_sid, w.target_host from webhook_deliveries w
         where w.status = 'Pending' and (w.account_sid, w.target_host) > (t.account_sid, t.target_host)
         order by w.account_sid, w.target_host limit 1) n
),
busy as (
  select * from jsonb_to_recordset(?::jsonb) as b(account_sid text, target_host text, in_flight int)
),
offers as (
  select h.id, h.account_sid, h.next_attempt_at, h.retry,
         row_number() over (partition by h.account_sid, h.target_host order by h.next_attempt_at, h.retry, h.id)
           + coalesce(b.in_flight, 0) as slot
    from targets t
    cross join lateral (
      select w.id, w.account_sid, w.target_host, w.next_attempt_at, w.attempts > 0 as retry
        from webhook_deliveries w
       where w.status = 'Pending' and w.account_sid = t.account_sid and w.target_host = t.target_host
         and w.next_attempt_at <= ? and (w.claimed_until is null or w.claimed_until < ?)
       order by w.next_attempt_at, w.attempts > 0, w.id
       limit ?) h
    left join busy b on b.account_sid = h.account_sid and b.target_host = h.target_host
),
turns as (
  select o.id, o.account_sid, o.next_attempt_at, o.retry,
         row_number() over (partition by o.account_sid order by o.next_attempt_at, o.retry, o.id) as turn
    from offers o
   where o.slot <= ?
),
open_turns as (
  select r.* from turns r
   left join (select account_sid, sum(in_flight) as in_flight from busy group by account_sid) a on a.account_sid = r.account_sid
  where r.turn + coalesce(a.in_flight, 0) <= ?
)
update webhook_deliveries d
   set claimed_until = ?
  from accounts a
 where a.sid = d.account_sid and d.id in (
   select c.id
     from webhook_deliveries c
     join open_turns r on r.id = c.id
    where c.status = 'Pending' and c.next_attempt_at <= ? and (c.claimed_until is null or c.claimed_until < ?)
    order by r.turn, r.next_attempt_at, r.retry, r.id
    limit ?
    for update of c skip locked)
returning d.id, d.account_sid, d.target_host, d.message_sid, d.event_type, d.url, d.method, d.payload, d.attempts, d.created_at, a.webhook_secret`;

/** Claims due webhook calls round-robin across accounts, within the given limits. */
export function claimDueWebhooks(em: EntityManager, l: ClaimLimits): Promise<DueWebhook[]> {
  return executeBound<DueWebhook>(em, CLAIM, [
    // One JSON parameter, whatever the number of busy targets (none included).
    JSON.stringify(l.busy.map((b) => ({ account_sid: b.accountSid, target_host: b.host, in_flight: b.inFlight }))),
    l.now,
    l.now,
    l.perTarget,
    l.perTarget,
    l.perAccount,
    l.claimUntil,
    l.now,
    l.now,
    l.max,
  ]);
}

/** The outcome of one attempt. */
export interface WebhookAttempt {
  id: string;
  startedAt: Date;
  now: Date;
  statusCode: number | null;
  /** Empty when the call succeeded. */
  error: string;
  durationMs: number;
  /** The attempt count after this one. */
  attempts: number;
  /** When not delivered: true to give up (Failed), else it is Pending again, due at `nextAttemptAt`. */
  giveUp: boolean;
  nextAttemptAt: Date;
}

/** Records an attempt in the log and the call's new state, releasing its claim. */
export async function recordWebhookAttempt(em: EntityManager, a: WebhookAttempt): Promise<void> {
  await em.transactional(async (tx) => {
    await tx.insert(AttemptRecord, { deliveryId: a.id, attemptedAt: a.startedAt, statusCode: a.statusCode, error: a.error, durationMs: a.durationMs });
    const common = { attempts: a.attempts, lastStatusCode: a.statusCode, lastError: a.error, claimedUntil: null };
    if (a.error === "") {
      await tx.nativeUpdate(WebhookDelivery, { id: a.id }, { ...common, status: "Delivered", deliveredAt: a.now });
      return;
    }
    await tx.nativeUpdate(WebhookDelivery, { id: a.id }, { ...common, status: a.giveUp ? "Failed" : "Pending", nextAttemptAt: a.nextAttemptAt });
  });
}

/** A message's webhook calls, oldest first, each with its attempts in order, for the operator. */
export async function listWebhookDeliveries(em: EntityManager, messageSid: string): Promise<{ delivery: WebhookDelivery; attempts: AttemptRecord[] }[]> {
  const deliveries = await em.find(WebhookDelivery, { messageSid }, { orderBy: { createdAt: "asc", id: "asc" } });
  const attempts = deliveries.length ? await em.find(AttemptRecord, { deliveryId: { $in: deliveries.map((d) => d.id) } }, { orderBy: { id: "asc" } }) : [];
  return deliveries.map((delivery) => ({ delivery, attempts: attempts.filter((a) => a.deliveryId === delivery.id) }));
}

/**
 * Deletes up to `limit` of an account's settled webhook calls that belong to no message (BalanceLow)
 * created before `before`, with their attempts (retention: they follow the account's RetentionDays
 * as its messages' calls do); how many went. A call still Pending stays whatever its age.
 */
export async function deleteAccountCallsWithoutMessage(tx: EntityManager, accountSid: string, before: Date, limit: number): Promise<number> {
  const ids = await executeBound<{ id: string }>(
    tx,
    `select id from webhook_deliveries
      where account_sid = ? and message_sid is null and status <> 'Pending' and created_at < ?
      order by created_at limit ? for update skip locked`,
    [accountSid, before, limit],
  );
  if (ids.length === 0) return 0;
  const list = ids.map((r) => r.id);
  await executeBound(tx, `delete from webhook_attempts where delivery_id = any(?::text[])`, [list]);
  await executeBound(tx, `delete from webhook_deliveries where id = any(?::text[])`, [list]);
  return list.length;
}

/** Deletes the webhook calls of these messages and their attempts (retention); how many calls went. */
export async function deleteWebhookDeliveriesOfMessages(tx: EntityManager, messageSids: string[]): Promise<number> {
  await executeBound(tx, `delete from webhook_attempts where delivery_id in (select id from webhook_deliveries where message_sid = any(?::text[]))`, [
    messageSids,
  ]);
  const rows = await executeBound<{ id: string }>(tx, `delete from webhook_deliveries where message_sid = any(?::text[]) returning id`, [messageSids]);
  return rows.length;
}

/** Empties the Text of the settled Response calls of these messages (redaction: the reply's words). */
export async function redactWebhookPayloadsOfMessages(tx: EntityManager, messageSids: string[]): Promise<void> {
  await executeBound(
    tx,
    `update webhook_deliveries set payload = jsonb_set(payload, '{Text}', '""')
      where message_sid = any(?::text[]) and event_type = 'Response' and status <> 'Pending'`,
    [messageSids],
  );
}

/** One webhook call with its attempts in order, or undefined, for the operator. */
export async function findWebhookDelivery(em: EntityManager, id: string): Promise<{ delivery: WebhookDelivery; attempts: AttemptRecord[] } | undefined> {
  const delivery = await em.findOne(WebhookDelivery, { id }, { refresh: true });
  if (!delivery) return undefined;
  return { delivery, attempts: await em.find(AttemptRecord, { deliveryId: id }, { orderBy: { id: "asc" } }) };
}

/**
 * Makes a Failed call Pending again, due at `now`: a conditional update, so of two retries at
 * the same moment only one moves it. Whether it moved.
 */
export async function retryFailedWebhook(em: EntityManager, id: string, now: Date): Promise<boolean> {
  return (await em.nativeUpdate(WebhookDelivery, { id, status: "Failed" }, { status: "Pending", nextAttemptAt: now, claimedUntil: null })) === 1;
}

/** The outbox at `now`: Pending calls, those due, and when the oldest due one became due. */
export async function webhookFigures(em: EntityManager, now: Date): Promise<{ pending: number; due: number; oldestDue: Date | null }> {
  const [row] = await executeBound<{ pending: string | number; due: string | number; oldest: Date | string | null }>(
    em,
    `select count(*) as pending, count(*) filter (where next_attempt_at <= ?) as due,
            min(next_attempt_at) filter (where next_attempt_at <= ?) as oldest
       from webhook_deliveries where status = 'Pending'`,
    [now, now],
  );
  return { pending: Number(row.pending), due: Number(row.due), oldestDue: row.oldest === null ? null : new Date(row.oldest) };
}
