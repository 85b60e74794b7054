import type { EntityManager } from "@mikro-orm/sql";
import type { InboundSms } from "../carriers/carrier.js";
import { unixSeconds } from "../common/clock.js";
import { newSid } from "../common/sid.js";
import { textEncoding } from "../messaging/send-rules.js";
import { enqueueWebhook } from "../webhooks/outbox.js";

interface LeaseMatch {
  message_sid: string;
  account_sid: string;
  property_sid: string;
  webhook_uri: string;
  webhook_method: string;
}

/** What became of an inbound SMS. */
export interface InboundResult {
  messageSid: string;
  inReplyTo: string;
}

/**
 * Stores an inbound SMS as a Received message of the account whose live lease it answers
 * (from = the lease's recipient, to = the leased pool number) and queues the Response webhook in
 * the same transaction. A reply that matches no live lease is not stored: it has no account.
 */
export async function receiveInbound(em: EntityManager, sms: InboundSms, now: Date): Promise<InboundResult> {
  return em.transactional(async (tx) => {
    const rows = await tx.execute<LeaseMatch[]>(
      `select m.sid as message_sid, m.account_sid, m.property_sid, m.webhook_uri, m.webhook_method
         from leases l join messages m on m.sid = l.message_sid
        where l.pool_number = ? and l.recipient = ? and not l.released and l.expires_at > ?
        order by l.created_at desc limit 1`,
      [sms.to, sms.from, sms.at],
    );
    const lease = rows[0];
    if (!lease) return { messageSid: "", inReplyTo: "" };
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
    return { messageSid: sid, inReplyTo: lease.message_sid };
  });
}
