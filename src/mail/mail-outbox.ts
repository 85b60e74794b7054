import { randomBytes } from "node:crypto";
import type { EntityManager, MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Transporter } from "nodemailer";
import type { Clock } from "../common/clock.js";
import { claimDueEmails, insertEmail, markEmailFailed, markEmailKept, markEmailSent } from "./mail-store.js";
import type { OutgoingEmail } from "./mail-store.js";

/** Queues an e-mail; the mail worker sends it (or keeps it when no SMTP server is configured). */
export async function enqueueEmail(em: EntityManager, mail: OutgoingEmail): Promise<string> {
  const id = `em_${randomBytes(18).toString("base64url")}`;
  await insertEmail(em, { id, ...mail });
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
      const rows = await claimDueEmails(em, now, new Date(now.getTime() + 120_000));
      for (const m of rows) {
        if (!opts.transport) {
          await markEmailKept(em, m.id);
          continue;
        }
        try {
          await opts.transport.sendMail({ from: m.mail_from, to: m.mail_to, subject: m.subject, text: m.body, messageId: `<${m.id}@switchboard>` });
          await markEmailSent(em, m.id, opts.clock.now());
          opts.log?.debug({ emailId: m.id, messageSid: m.message_sid }, "e-mail sent");
        } catch (err) {
          const t = opts.clock.now();
          const attempts = m.attempts + 1;
          const giveUp = t.getTime() - new Date(m.created_at).getTime() >= retryForMs;
          opts.log?.warn({ emailId: m.id, messageSid: m.message_sid, attempts, err: (err as Error).message }, "e-mail not sent");
          await markEmailFailed(em, m.id, {
            giveUp,
            attempts,
            nextAttemptAt: new Date(t.getTime() + mailBackoffMs(attempts)),
            error: String((err as Error).message ?? err),
          });
        }
      }
      return rows.length;
    },
  };
}
