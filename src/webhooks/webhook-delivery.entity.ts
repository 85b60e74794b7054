import { defineEntity, p } from "@mikro-orm/core";

/** Where a webhook call stands: not yet made successfully, made, or given up. */
export type WebhookDeliveryStatus = "Pending" | "Delivered" | "Failed";

/** What a call reports: a message's delivery receipt or reply, or an account's low balance (docs/webhooks.md). */
export type WebhookEventType = "DeliveryReceipt" | "Response" | "BalanceLow";

/** Schema of a queued webhook call (table `webhook_deliveries`). */
export const WebhookDeliveryEntity = defineEntity({
  name: "WebhookDelivery",
  tableName: "webhook_deliveries",
  properties: {
    // The Standard Webhooks message id: the same across retries of one call.
    id: p.string().length(40).primary(),
    accountSid: p.string().length(32),
    // Null for an account's event (BalanceLow).
    messageSid: p.string().length(32).nullable(),
    eventType: p.string().length(32).$type<WebhookEventType>(),
    url: p.text(),
    // The URI's host name, lower case: the per-(account, host) limit counts calls by it.
    targetHost: p.text().default(""),
    method: p.string().length(8).$type<"POST" | "GET">(),
    payload: p.json<Record<string, string | number>>(),
    status: p.string().length(16).$type<WebhookDeliveryStatus>().default("Pending"),
    attempts: p.integer().default(0),
    nextAttemptAt: p.datetime(),
    // A webhook worker's claim; an expired one (a crashed worker's) is taken again.
    claimedUntil: p.datetime().nullable(),
    lastStatusCode: p.integer().nullable(),
    lastError: p.text().default(""),
    createdAt: p.datetime(),
    deliveredAt: p.datetime().nullable(),
  },
});

/** A webhook call in the outbox, written in the transaction of the state change that causes it. */
export class WebhookDelivery extends WebhookDeliveryEntity.class {}
WebhookDeliveryEntity.setClass(WebhookDelivery);
