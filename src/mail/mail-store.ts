/**
 * Every statement on `emails`: queueing a forwarded reply, the mail worker's claim and outcomes,
 * and the operator's list. Only the claim is raw SQL (FOR UPDATE SKIP LOCKED with RETURNING).
 */
import { raw } from "@mikro-orm/core";
import type { EntityManager } from "@mikro-orm/sql";
import { Email } from "./email.entity.js";
import { executeBound } from "../db/bound-sql.js";

/** An e-mail to send, written to the outbox in the caller's transaction. */
export interface OutgoingEmail {
  accountSid: string;
  messageSid: string;
  from: string;
  to: string;
  subject: string;
  body: string;
  now: Date;
}

/** An e-mail as it enters the outbox, with its id. */
export interface NewEmail extends OutgoingEmail {
  id: string;
}

/** Writes a Pending e-mail, due at once, in the caller's transaction. */
export async function insertEmail(em: EntityManager, mail: NewEmail): Promise<void> {
  await em.insert(Email, {
    id: mail.id,
    accountSid: mail.accountSid,
    messageSid: mail.messageSid,
    mailFrom: mail.from,
    mailTo: mail.to,
    subject: mail.subject,
    body: mail.body,
    status: "Pending",
    attempts: 0,
    nextAttemptAt: mail.now,
    createdAt: mail.now,
  });
}

/** A claimed e-mail, with what is needed to send it. */
export interface DueMail {
  id: string;
  message_sid: string;
  mail_from: string;
  mail_to: string;
  subject: string;
  body: string;
  attempts: number;
  created_at: Date | string;
}

/** Claims up to 20 due e-mails until `claimUntil`; SKIP LOCKED, so concurrent workers take different ones. */
export function claimDueEmails(em: EntityManager, now: Date, claimUntil: Date): Promise<DueMail[]> {
  return executeBound<DueMail>(
    em,
    `update emails set claimed_until = ?
          where id in (select id from emails where status = 'Pending' and next_attempt_at <= ? and (claimed_until is null or claimed_until < ?)
                        order by next_attempt_at limit 20 for update skip locked)
        returning id, message_sid, mail_from, mail_to, subject, body, attempts, created_at`,
    [claimUntil, now, now],
  );
}

/** Keeps an e-mail for the operator (no SMTP server configured), releasing its claim. */
export async function markEmailKept(em: EntityManager, id: string): Promise<void> {
  await em.nativeUpdate(Email, { id }, { status: "Kept", claimedUntil: null });
}

/** Records a successful send, releasing the claim. */
export async function markEmailSent(em: EntityManager, id: string, at: Date): Promise<void> {
  await em.nativeUpdate(Email, { id }, { status: "Sent", sentAt: at, attempts: raw("attempts + 1"), claimedUntil: null, lastError: "" });
}

/** Records a failed attempt: Pending again and due at `nextAttemptAt`, or Failed when given up; releases the claim. */
export async function markEmailFailed(
  em: EntityManager,
  id: string,
  f: { giveUp: boolean; attempts: number; nextAttemptAt: Date; error: string },
): Promise<void> {
  await em.nativeUpdate(
    Email,
    { id },
    { status: f.giveUp ? "Failed" : "Pending", attempts: f.attempts, nextAttemptAt: f.nextAttemptAt, lastError: f.error, claimedUntil: null },
  );
}

/** One page of the outbox for the operator, newest first, and the number of e-mails in all. */
export function listEmails(em: EntityManager, page: { limit: number; offset: number }): Promise<[Email[], number]> {
  return em.findAndCount(Email, {}, { orderBy: { createdAt: "desc", id: "asc" }, limit: page.limit, offset: page.offset });
}

/** Deletes the forwarded e-mails of these messages (retention); how many went. */
export async function deleteEmailsOfMessages(tx: EntityManager, messageSids: string[]): Promise<number> {
  const rows = await executeBound<{ id: string }>(tx, `delete from emails where message_sid = any(?::text[]) returning id`, [messageSids]);
  return rows.length;
}

/** Empties the body of the settled e-mails of these messages (redaction: a forwarded reply's words). */
export async function redactEmailsOfMessages(tx: EntityManager, messageSids: string[]): Promise<void> {
  await executeBound(tx, `update emails set body = '' where message_sid = any(?::text[]) and status <> 'Pending'`, [messageSids]);
}
