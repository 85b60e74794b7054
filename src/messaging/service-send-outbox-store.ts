/**
 * Every statement on `service_send_outbox`: the forward of a reply by SMS and the answer to a
 * keyword, written in the inbound SMS's transaction (messaging/service-sends.ts queueServiceSend),
 * taken by the transaction that stores their message, claimed by the delivery engine's sweep when
 * that never happened (delivery/service-send-sweep.ts), and deleted when given up.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";

/** What kind of service send a row holds. */
export type ServiceSendKind = "forward" | "answer";

/** A row as it is written, in the caller's transaction. */
export interface NewServiceSend {
  id: string;
  kind: ServiceSendKind;
  accountSid: string;
  /** The ReplyForward or KeywordAnswer, its dates as ISO strings. */
  payload: Record<string, unknown>;
  createdAt: Date;
}

/** A row as the sweep claims it. */
export interface QueuedServiceSend {
  id: string;
  kind: ServiceSendKind;
  account_sid: string;
  payload: Record<string, unknown> | string;
  created_at: Date | string;
  /** The sweep's claims of it so far, this one included. */
  attempts: number;
}

/** Writes a service send to the outbox in the caller's transaction (the inbound SMS's). */
export async function insertServiceSend(tx: EntityManager, row: NewServiceSend): Promise<void> {
  await executeBound(tx, `insert into service_send_outbox (id, kind, account_sid, payload, created_at) values (?, ?, ?, ?::jsonb, ?)`, [
    row.id,
    row.kind,
    row.accountSid,
    JSON.stringify(row.payload),
    row.createdAt,
  ]);
}

/**
 * Takes the row in the caller's transaction (the one that stores its message): true when this
 * transaction deleted it, false when it was already gone (another process stored its message). A
 * concurrent take of the same row waits for this transaction and then finds nothing.
 */
export async function takeServiceSend(tx: EntityManager, id: string): Promise<boolean> {
  const rows = await executeBound<{ id: string }>(tx, `delete from service_send_outbox where id = ? returning id`, [id]);
  return rows.length > 0;
}

/** Deletes the row (its account is gone, nothing to send). */
export async function deleteServiceSend(em: EntityManager, id: string): Promise<void> {
  await executeBound(em, `delete from service_send_outbox where id = ?`, [id]);
}

/**
 * Claims up to `limit` rows written at or before `createdBefore` whose last claim (if any) has
 * ended: each claim holds 60 s, doubling with every claim of the row to at most 30 minutes, and
 * counts in `attempts`. SKIP LOCKED and the claim: two sweeps never take the same row at once.
 */
export function claimServiceSends(em: EntityManager, o: { createdBefore: Date; now: Date; limit: number }): Promise<QueuedServiceSend[]> {
  return executeBound<QueuedServiceSend>(
    em,
    `update service_send_outbox set attempts = attempts + 1,
            claimed_until = ?::timestamptz + least(interval '30 minutes', interval '60 seconds' * power(2, least(attempts, 10)))
      where id in (select id from service_send_outbox
                    where created_at <= ? and (claimed_until is null or claimed_until <= ?)
                    order by created_at limit ? for update skip locked)
      returning id, kind, account_sid, payload, created_at, attempts`,
    [o.now, o.createdBefore, o.now, o.limit],
  );
}

/** Deletes the rows written before `before` (given up); returns what they were, for the log. */
export function deleteServiceSendsBefore(em: EntityManager, before: Date): Promise<{ id: string; kind: ServiceSendKind; account_sid: string }[]> {
  return executeBound(em, `delete from service_send_outbox where created_at < ? returning id, kind, account_sid`, [before]);
}
