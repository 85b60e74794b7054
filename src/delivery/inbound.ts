import type { EntityManager } from "@mikro-orm/sql";
import type { InboundSms } from "../carriers/carrier.js";
import { unixSeconds } from "../common/clock.js";
import { newSid } from "../common/sid.js";
import { storableText } from "../common/string-guard.js";
import { textEncoding } from "../messaging/send-rules.js";
import { enqueueEmail } from "../mail/mail-outbox.js";
import { enqueueWebhook } from "../webhooks/outbox.js";

interface LeaseMatch {
  message_sid: string;
  account_sid: string;
  property_sid: string;
  webhook_uri: string;
  webhook_method: string;
  forward_to_sms: string;
  forward_from_sms: string;
  forward_to_email: string;
  forward_from_email: string;
}

/** Sender of forwarded e-mails when the message named no ForwardFromEmail. */
export const NO_REPLY_EMAIL = "no-reply@switchboard.invalid";

/** What became of an inbound SMS. */
export interface InboundResult {
  messageSid: string;
  inReplyTo: string;
}

/**
 * Stores an inbound SMS as a Received message of the account whose live lease it answers
 * (from = the lease's recipient, to = the leased pool number) and, in the same transaction,
 * queues everything the outbound message asked for: the Response webhook, a forwarded SMS
 * (through the dispatcher) and a forwarded e-mail (through the mail outbox). A reply that matches
 * no live lease (none, expired or released) belongs to no account: it is kept in
 * unmatched_inbound for the operator and not forwarded.
 */
export async function receiveInbound(em: EntityManager, received: InboundSms, now: Date): Promise<InboundResult> {
  // Anyone on the network can send any UCS-2 units: a NUL or an unpaired surrogate must not fail the insert.
  const sms = { ...received, text: storableText(received.text) };
  return em.transactional(async (tx) => {
    const rows = await tx.execute<LeaseMatch[]>(
      `select m.sid as message_sid, m.account_sid, m.property_sid, m.webhook_uri, m.webhook_method,
              m.forward_to_sms, m.forward_from_sms, m.forward_to_email, m.forward_from_email
         from leases l join messages m on m.sid = l.message_sid
        where l.pool_number = ? and l.recipient = ? and not l.released and l.expires_at > ?
        order by l.created_at desc limit 1`,
      [sms.to, sms.from, sms.at],
    );
    const lease = rows[0];
    if (!lease) {
      const past = await tx.execute<{ n: number }[]>("select count(*) as n from leases where pool_number = ? and recipient = ?", [sms.to, sms.from]);
      await tx.execute("insert into unmatched_inbound (sender, recipient, text, received_at, reason) values (?, ?, ?, ?, ?)", [
        sms.from,
        sms.to,
        sms.text,
        sms.at,
        Number(past[0]?.n ?? 0) > 0 ? "LeaseEnded" : "NoLease",
      ]);
      return { messageSid: "", inReplyTo: "" };
    }
    const sid = newSid("MG");
    const { encoding, numSegments } = textEncoding(sms.text || " ");
    await tx.execute(
      `insert into messages (sid, account_sid, property_sid, direction, status, sender_kind, sender, recipient, text, encoding, num_segments,
                             delivery_receipt, in_reply_to, send_at, created_at, received_at)
       values (?, ?, ?, 'Receive', 'Received', '', ?, ?, ?, ?, ?, false, ?, ?, ?, ?)`,
      [sid, lease.account_sid, lease.property_sid, sms.from, sms.to, sms.text, encoding, numSegments, lease.message_sid, sms.at, now, sms.at],
    );
    if (lease.webhook_uri !== "") {
      await enqueueWebhook(tx, {
        accountSid: lease.account_sid,
        messageSid: sid,
        eventType: "Response",
        url: lease.webhook_uri,
        method: lease.webhook_method === "GET" ? "GET" : "POST",
        payload: {
          Type: "Response",
          MessageSid: sid,
          InReplyTo: lease.message_sid,
          AccountSid: lease.account_sid,
          PropertySid: lease.property_sid,
          From: sms.from,
          To: sms.to,
          Text: sms.text,
          Timestamp: unixSeconds(sms.at),
        },
        now,
      });
    }
    if (lease.forward_to_sms !== "") {
      const from = lease.forward_from_sms || sms.from;
      const enc = textEncoding(sms.text || " ");
      await tx.execute(
        `insert into messages (sid, account_sid, property_sid, direction, status, sender_kind, sender, recipient, text, encoding, num_segments,
                               delivery_receipt, in_reply_to, send_at, created_at)
         values (?, ?, ?, 'Transmit', 'Processing', ?, ?, ?, ?, ?, ?, false, ?, ?, ?)`,
        [newSid("MG"), lease.account_sid, lease.property_sid, from.startsWith("+") ? "E164" : "Alphanumeric", from, lease.forward_to_sms, sms.text, enc.encoding, enc.numSegments, sid, now, now],
      );
    }
    if (lease.forward_to_email !== "") {
      await enqueueEmail(tx, {
        accountSid: lease.account_sid,
        messageSid: sid,
        from: lease.forward_from_email || NO_REPLY_EMAIL,
        to: lease.forward_to_email,
        subject: `SMS reply from ${sms.from}`,
        body: `${sms.text}\n\n--\nFrom: ${sms.from}\nTo: ${sms.to}\nIn reply to: ${lease.message_sid}\nMessage: ${sid}\n`,
        now,
      });
    }
    return { messageSid: sid, inReplyTo: lease.message_sid };
  });
}
