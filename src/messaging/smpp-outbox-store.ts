/**
 * Statements on `smpp_outbox` (docs/smpp-server.md#receipts-and-replies): the receipts and replies
 * waiting for an account's SMPP receiver and transceiver binds, on whichever process holds them.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { bindByName, executeBound } from "../db/bound-sql.js";

/** How long receipts and replies wait for a bind, counted from their row: 72 hours. */
export const SMPP_OUTBOX_KEEP_MS = 72 * 3600_000;
/** How long a process's claim on a row lasts; a process killed with it leaves it to another after this. */
export const SMPP_OUTBOX_CLAIM_MS = 30_000;

/** A message sent by submit_sm that asked for a receipt (registered_delivery 1: on any final state; 2: only on failure). */
export interface SmppReceiptRow {
  accountSid: string;
  messageSid: string;
  registeredDelivery: number;
  now: Date;
}

const RECEIPT_FIELDS = ["accountSid", "messageSid", "registeredDelivery", "now"] as const satisfies readonly (keyof SmppReceiptRow)[];

/**
 * Records the receipts these messages asked for, in the transaction that stores them (send-pipeline.ts):
 * each is due once its message is Delivered or Failed (the claim reads the message).
 */
export async function addSmppReceiptRows(em: EntityManager, rows: readonly SmppReceiptRow[]): Promise<void> {
  if (rows.length === 0) return;
  await executeBound(
    em,
    `insert into smpp_outbox (account_sid, message_sid, kind, registered_delivery, created_at)
     select account_sid, message_sid, 'Receipt', registered_delivery, created_at
       from unnest(?::text[], ?::text[], ?::smallint[], ?::timestamptz[]) as r(account_sid, message_sid, registered_delivery, created_at)`,
    bindByName(RECEIPT_FIELDS, rows),
  );
}

/**
 * In a reply's transaction: queues it for the account's binds when the account chose SMPP for its
 * replies (its credentials' DeliverReplies); otherwise writes nothing.
 */
export async function queueSmppReply(tx: EntityManager, row: { accountSid: string; messageSid: string; now: Date }): Promise<void> {
  await executeBound(
    tx,
    `insert into smpp_outbox (account_sid, message_sid, kind, created_at)
     select account_sid, ?, 'Reply', ? from smpp_credentials where account_sid = ? and deliver_replies`,
    [row.messageSid, row.now, row.accountSid],
  );
}

/** A claimed receipt or reply, with what its deliver_sm says. */
export interface SmppOutboxItem {
  id: string;
  kind: "Receipt" | "Reply";
  accountSid: string;
  messageSid: string;
  sender: string;
  recipient: string;
  text: string;
  status: string;
  errorCode: string;
  createdAt: Date;
  doneAt: Date | null;
}

/**
 * Claims up to `limit` due rows of these accounts, oldest first, until `now + claimMs`: rows no
 * other process holds a live claim on (skip locked: two processes never take the same row).
 */
export async function claimSmppOutbox(
  em: EntityManager,
  accountSids: readonly string[],
  now: Date,
  limit: number,
  claimMs = SMPP_OUTBOX_CLAIM_MS,
): Promise<SmppOutboxItem[]> {
  if (accountSids.length === 0) return [];
  const rows = await executeBound<{
    id: string | number;
    kind: "Receipt" | "Reply";
    account_sid: string;
    sid: string;
    sender: string;
    recipient: string;
    text: string;
    status: string;
    error_code: string;
    created_at: Date | string;
    done_at: Date | string | null;
  }>(
    em,
    `with due as (
       select o.id from smpp_outbox o join messages m on m.sid = o.message_sid
        where o.account_sid = any(?::text[]) and (o.claimed_until is null or o.claimed_until < ?)
          and (o.kind = 'Reply' or (m.status = 'Failed' or (m.status = 'Delivered' and o.registered_delivery <> 2)))
        order by o.id limit ? for update of o skip locked)
     update smpp_outbox o set claimed_until = ? from due, messages m
      where o.id = due.id and m.sid = o.message_sid
      returning o.id, o.kind, o.account_sid, m.sid, m.sender, m.recipient, m.text, m.status, m.error_code, m.created_at,
                coalesce(m.delivered_at, m.received_at, m.submitted_at) as done_at`,
    [accountSids, now, limit, new Date(now.getTime() + claimMs)],
  );
  return rows
    .map((r) => ({
      id: String(r.id),
      kind: r.kind,
      accountSid: r.account_sid,
      messageSid: r.sid,
      sender: r.sender,
      recipient: r.recipient,
      text: r.text,
      status: r.status,
      errorCode: r.error_code,
      createdAt: new Date(r.created_at),
      doneAt: r.done_at === null ? null : new Date(r.done_at),
    }))
    .sort((a, b) => Number(BigInt(a.id) - BigInt(b.id)));
}

/** A row the client acknowledged (deliver_sm_resp 0): gone. */
export async function deleteSmppOutboxRow(em: EntityManager, id: string): Promise<void> {
  await executeBound(em, `delete from smpp_outbox where id = ?`, [id]);
}

/** A claimed row not delivered (the bind went, the client refused it): free for the next claim. */
export async function releaseSmppOutboxRow(em: EntityManager, id: string): Promise<void> {
  await executeBound(em, `update smpp_outbox set claimed_until = null where id = ?`, [id]);
}

/**
 * Forgets what waited longer than SMPP_OUTBOX_KEEP_MS, receipts never due (registered_delivery 2
 * of a Delivered message, a Canceled one), and rows whose message is gone (retention).
 */
export async function purgeSmppOutbox(em: EntityManager, now: Date): Promise<number> {
  const rows = await executeBound<{ id: string }>(
    em,
    `delete from smpp_outbox o where o.created_at < ?
        or not exists (select 1 from messages m where m.sid = o.message_sid)
        or (o.kind = 'Receipt' and exists (select 1 from messages m where m.sid = o.message_sid
              and (m.status = 'Canceled' or (m.status = 'Delivered' and o.registered_delivery = 2))))
      returning o.id`,
    [new Date(now.getTime() - SMPP_OUTBOX_KEEP_MS)],
  );
  return rows.length;
}
