import { randomBytes } from "node:crypto";
import type { EntityManager } from "@mikro-orm/sql";
import { unixSeconds } from "../common/clock.js";
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

/** A message row as the final-state writes return it: what its delivery receipt webhook needs. */
export interface ReceiptRow {
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
 * Queues a message's DeliveryReceipt webhook for its final state, when it asked for one (a carrier's
 * report, or a rule that failed it before it went out); returns whether one was queued.
 */
export async function enqueueDeliveryReceipt(
  em: EntityManager,
  m: ReceiptRow,
  final: { status: "Delivered" | "Failed"; errorCode: string; at: Date; now: Date },
): Promise<boolean> {
  if (!m.delivery_receipt || m.dr_webhook_uri === "") return false;
  await enqueueWebhook(em, {
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
      Status: final.status,
      ErrorCode: final.errorCode,
      Timestamp: unixSeconds(final.at),
    },
    now: final.now,
  });
  return true;
}
