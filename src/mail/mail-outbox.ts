import { randomBytes } from "node:crypto";
import type { EntityManager, MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Transporter } from "nodemailer";
import type { Clock } from "../common/clock.js";

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

/** Queues an e-mail; the mail worker sends it (or keeps it when no SMTP server is configured). */
export async function enqueueEmail(em: EntityManager, mail: OutgoingEmail): Promise<string> {
  const id = `em_${randomBytes(18).toString("base64url")}`;
  await em.execute(
    `insert into emails (id, account_sid, message_sid, mail_from, mail_to, subject, body, status, attempts, next_attempt_at, created_at)
     values (?, ?, ?, ?, ?, ?, ?, 'Pending', 0, ?, ?)`,
    [id, mail.accountSid, mail.messageSid, mail.from, mail.to, mail.subject, mail.body, mail.now, mail.now],
  );
  return id;
}

/** Options of the mail worker. */
export interface MailWorkerOptions {
  orm: MikroORM;
  clock: Clock;
  /** nodemailer transport over SMTP_URL; undefined keeps mail in the database (status Kept). */
  transport?: Transporter;
  log?: Logger;
  /** How long sending is retried before the e-mail is given up (default 24 h). */
  retryForMs?: number;
}

interface DueMail {
  id: string;
  message_sid: string;
  mail_from: string;
  mail_to: string;
  subject: string;
  body: string;
  attempts: number;
  created_at: Date | string;
}

/** Delay after failed attempt n: 10 s doubling to at most 30 min. */
export function mailBackoffMs(attempt: number): number {
  return Math.min(1_800_000, 10_000 * 2 ** Math.max(0, attempt - 1));
}

/** Sends due e-mails; returns how many it handled. */
export function createMailWorker(opts: MailWorkerOptions): { tick(): Promise<number> } {
  const retryForMs = opts.retryForMs ?? 24 * 3600 * 1000;
  return {
    async tick() {
      const now = opts.clock.now();
      const em = opts.orm.em.fork();
      const rows = await em.execute<DueMail[]>(
        `update emails set claimed_until = ?
          where id in (select id from emails where status = 'Pending' and next_attempt_at <= ? and (claimed_until is null or claimed_until < ?)
                        order by next_attempt_at limit 20 for update skip locked)
        returning id, message_sid, mail_from, mail_to, subject, body, attempts, created_at`,
        [new Date(now.getTime() + 120_000), now, now],
      );
      for (const m of rows) {
        if (!opts.transport) {
          await em.execute("update emails set status = 'Kept', claimed_until = null where id = ?", [m.id]);
          continue;
        }
        try {
          await opts.transport.sendMail({ from: m.mail_from, to: m.mail_to, subject: m.subject, text: m.body, messageId: `<${m.id}@switchboard>` });
          await em.execute("update emails set status = 'Sent', sent_at = ?, attempts = attempts + 1, claimed_until = null, last_error = '' where id = ?", [opts.clock.now(), m.id]);
          opts.log?.debug({ emailId: m.id, messageSid: m.message_sid }, "e-mail sent");
        } catch (err) {
          const t = opts.clock.now();
          const attempts = m.attempts + 1;
          const giveUp = t.getTime() - new Date(m.created_at).getTime() >= retryForMs;
          opts.log?.warn({ emailId: m.id, messageSid: m.message_sid, attempts, err: (err as Error).message }, "e-mail not sent");
          await em.execute("update emails set status = ?, attempts = ?, next_attempt_at = ?, last_error = ?, claimed_until = null where id = ?", [
            giveUp ? "Failed" : "Pending",
            attempts,
            new Date(t.getTime() + mailBackoffMs(attempts)),
            String((err as Error).message ?? err),
            m.id,
          ]);
        }
      }
      return rows.length;
    },
  };
}
