import { randomBytes } from "node:crypto";
import type { EntityManager } from "@mikro-orm/sql";

/** A webhook call to make, written to the outbox in the caller's transaction. */
export interface WebhookCall {
  accountSid: string;
  messageSid: string;
  eventType: "DeliveryReceipt" | "Response";
  url: string;
  method: "POST" | "GET";
  payload: Record<string, string | number>;
  now: Date;
}

/** A Standard Webhooks message id; it stays the same across retries of one call. */
export function newWebhookId(): string {
  return `msg_${randomBytes(18).toString("base64url")}`;
}

/** Queues a webhook call; commit the surrounding transaction and the call will be made at least once. */
export async function enqueueWebhook(em: EntityManager, call: WebhookCall): Promise<string> {
  const id = newWebhookId();
  await em.execute(
    `insert into webhook_deliveries (id, account_sid, message_sid, event_type, url, method, payload, status, attempts, next_attempt_at, created_at)
     values (?, ?, ?, ?, ?, ?, ?::jsonb, 'Pending', 0, ?, ?)`,
    [id, call.accountSid, call.messageSid, call.eventType, call.url, call.method, JSON.stringify(call.payload), call.now, call.now],
  );
  return id;
}
