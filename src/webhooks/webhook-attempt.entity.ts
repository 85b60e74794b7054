import { defineEntity, p } from "@mikro-orm/core";

/** Schema of one attempt at a webhook call (table `webhook_attempts`). */
export const WebhookAttemptEntity = defineEntity({
  name: "WebhookAttempt",
  tableName: "webhook_attempts",
  properties: {
    id: p.bigint().primary().autoincrement(),
    // The call (webhook_deliveries.id); its attempts go when it does (on delete cascade).
    deliveryId: p.string().length(40),
    attemptedAt: p.datetime(),
    // The HTTP status of the answer; null when none came (refused, timed out, blocked address).
    statusCode: p.integer().nullable(),
    // Empty when the call succeeded.
    error: p.text().default(""),
    durationMs: p.integer(),
  },
});

/** One attempt at a webhook call, for the operator's delivery log. */
export class WebhookAttempt extends WebhookAttemptEntity.class {}
WebhookAttemptEntity.setClass(WebhookAttempt);
