/**
 * What an opt-out changes, in the caller's transaction, whichever way it comes (a STOP texted to
 * the account, or the customer API): the number goes on the account's list, and every message of
 * the account to it still queued ends Failed with RecipientOptedOut (its lease released, its
 * delivery receipt webhook queued as any final state's would be), but the answers to its keywords
 * (answer-cap-store.ts: a STOP's confirmation goes to a number on the list).
 */
import type { EntityManager } from "@mikro-orm/sql";
import { releaseLease } from "../leases/lease-allocator.js";
import { failQueuedToOptedOut } from "../messaging/message-store.js";
import { refundMessages } from "../billing/balance-store.js";
import { enqueueDeliveryReceipt } from "../webhooks/outbox.js";
import { answerSids } from "./answer-cap-store.js";
import { addOptOut, type OptOutEntry, type OptOutSource } from "./opt-out-store.js";

/** Opts the number out of the account and fails what is queued to it; returns the opt-out, whether it is new, and the Sids failed. */
export async function optOutNumber(
  tx: EntityManager,
  o: { accountSid: string; number: string; source: OptOutSource; now: Date },
): Promise<{ optOut: OptOutEntry; added: boolean; failed: string[] }> {
  const { optOut, added } = await addOptOut(tx, { accountSid: o.accountSid, number: o.number, source: o.source, createdAt: o.now });
  // The answers to the handset's keywords are what it asked for (a STOP's confirmation, a HELP): spared.
  const rows = await failQueuedToOptedOut(tx, o.accountSid, o.number, await answerSids(tx, o.accountSid, o.number));
  for (const m of rows) {
    if (m.lease_sid) await releaseLease(tx, m.lease_sid);
    await enqueueDeliveryReceipt(tx, m, { status: "Failed", errorCode: "RecipientOptedOut", at: o.now, now: o.now });
  }
  // They never reach a carrier: their charges are given back (docs/billing.md#the-charge-on-the-send).
  await refundMessages(
    tx,
    rows.map((r) => r.sid),
    o.now,
  );
  return { optOut, added, failed: rows.map((r) => r.sid) };
}
