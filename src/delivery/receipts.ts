import type { EntityManager } from "@mikro-orm/sql";
import type { DeliveryReport } from "../carriers/carrier.js";
import { unixSeconds } from "../common/clock.js";
import { enqueueWebhook } from "../webhooks/outbox.js";

interface FinalRow {
  sid: string;
  account_sid: string;
  property_sid: string;
  sender: string;
  recipient: string;
  delivery_receipt: boolean;
  dr_webhook_uri: string;
  dr_webhook_method: string;
}

/**
 * Moves a message to its final state (Delivered or Failed) and, when the client asked for a
 * delivery receipt webhook, queues it in the same transaction. A report for a message already
 * final, or unknown, changes nothing (carriers repeat themselves).
 */
export async function applyFinalState(em: EntityManager, report: DeliveryReport & { now: Date }): Promise<boolean> {
  return em.transactional(async (tx) => {
    const rows = await tx.execute<FinalRow[]>(
      `update messages
          set status = ?, delivered_at = ?, error_code = ?, claimed_until = null
        where sid = ? and direction = 'Transmit' and status in ('Processing', 'Submitted')
        returning sid, account_sid, property_sid, sender, recipient, delivery_receipt, dr_webhook_uri, dr_webhook_method`,
      [report.status, report.status === "Delivered" ? report.at : null, report.errorCode, report.messageSid],
    );
    const m = rows[0];
    if (!m) return false;
    if (m.delivery_receipt && m.dr_webhook_uri !== "") {
      await enqueueWebhook(tx, {
        accountSid: m.account_sid,
        messageSid: m.sid,
        eventType: "DeliveryReceipt",
        url: m.dr_webhook_uri,
        method: m.dr_webhook_method === "GET" ? "GET" : "POST",
        payload: {
          Type: "DeliveryReceipt",
          MessageSid: m.sid,
          AccountSid: m.account_sid,
          PropertySid: m.property_sid,
          From: m.sender,
          To: m.recipient,
          Status: report.status,
          ErrorCode: report.errorCode,
          Timestamp: unixSeconds(report.at),
        },
        now: report.now,
      });
    }
    return true;
  });
}
