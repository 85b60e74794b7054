import { randomBytes } from "node:crypto";
import type { EntityManager } from "@mikro-orm/sql";
import { insertWebhookDelivery } from "./webhook-store.js";
import type { WebhookCall } from "./webhook-store.js";

/** A Standard Webhooks message id; it stays the same across retries of one call. */
export function newWebhookId(): string {
  return `msg_${randomBytes(18).toString("base64url")}`;
}

/** The destination host a call counts against (the per-host slot limit): the URI's host name, lower case. */
export function webhookTargetHost(url: string): string {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return "";
  }
}

/** Queues a webhook call; commit the surrounding transaction and the call will be made at least once. */
export async function enqueueWebhook(em: EntityManager, call: WebhookCall): Promise<string> {
  const id = newWebhookId();
  await insertWebhookDelivery(em, { id, ...call, targetHost: webhookTargetHost(call.url) });
  return id;
}
