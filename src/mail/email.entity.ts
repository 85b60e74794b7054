import { defineEntity, p } from "@mikro-orm/core";

/** Where a forwarded e-mail stands: waiting, sent over SMTP, kept for the operator (no SMTP server), or given up. */
export type EmailStatus = "Pending" | "Sent" | "Kept" | "Failed";

/** Schema of a forwarded e-mail in the outbox (table `emails`). */
export const EmailEntity = defineEntity({
  name: "Email",
  tableName: "emails",
  properties: {
    id: p.string().length(40).primary(),
    accountSid: p.string().length(32),
    // The inbound message whose reply this forwards.
    messageSid: p.string().length(32),
    mailFrom: p.text(),
    mailTo: p.text(),
    subject: p.text(),
    body: p.text(),
    status: p.string().length(16).$type<EmailStatus>().default("Pending"),
    attempts: p.integer().default(0),
    nextAttemptAt: p.datetime(),
    // A mail worker's claim; an expired one (a crashed worker's) is taken again.
    claimedUntil: p.datetime().nullable(),
    lastError: p.text().default(""),
    createdAt: p.datetime(),
    sentAt: p.datetime().nullable(),
  },
});

/** A reply forwarded by e-mail, queued in the transaction that received it. */
export class Email extends EmailEntity.class {}
EmailEntity.setClass(Email);
