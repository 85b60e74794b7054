/**
 * What a stored send writes and is answered with (send-pipeline.ts step 10): its message row, the
 * Message its client gets, and the row its dispatcher gets when it was stored claimed.
 */
import { create } from "@bufbuild/protobuf";
import { type Message as MessagePb, MessageSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import type { ClaimedRow } from "./message-store.js";
import type { MessageRow } from "./message-send-store.js";
import type { SendItem } from "./send-steps.js";
import type { ValidSend } from "./send-rules.js";

/** The Message a stored send is answered with. */
export function sentMessage(item: SendItem, send: ValidSend, sender: string): MessagePb {
  return create(MessageSchema, {
    messageSid: item.sid,
    accountSid: item.account.sid,
    propertySid: item.propertySid,
    from: sender,
    to: send.to.number,
    text: send.text,
  });
}

/**
 * A send stored claimed (item.claimedUntil), as the dispatcher's claim would have returned its row:
 * the same values messageRow stored; SMS enabled, since the storing statement required it.
 */
export function claimedRow(item: SendItem, send: ValidSend, sender: string): ClaimedRow {
  return {
    sid: item.sid,
    account_sid: item.account.sid,
    sender,
    recipient: send.to.number,
    text: send.text,
    delivery_receipt: send.deliveryReceipt,
    attempts: 1,
    send_at: item.now,
    scheduled_at: send.schedule === undefined ? null : new Date(send.schedule * 1000),
    created_at: item.now,
    sms_enabled: true,
    allowed_countries: null,
  };
}

/** One message's row: a send to go out, or (with an errorCode) a refused service send kept as Failed. */
export function messageRow(item: SendItem, send: ValidSend, lease: { sender: string; leaseSid: string } | undefined, errorCode = ""): MessageRow {
  // Lease options are kept only where a reply can come back: through a leased sender.
  const leased = lease !== undefined;
  // Stored claimed (only a send due now): exactly what the dispatcher's claim sets; its status is already Processing.
  const claimedUntil = errorCode === "" && !send.scheduled ? (item.claimedUntil ?? null) : null;
  const due = send.scheduled ? new Date(send.schedule! * 1000) : item.now;
  return {
    sid: item.sid,
    account_sid: item.account.sid,
    property_sid: item.propertySid,
    direction: "Transmit",
    status: errorCode !== "" ? "Failed" : send.scheduled ? "Scheduled" : "Processing",
    sender_kind: leased ? "Leased" : send.fromKind === "E164" ? "E164" : "Alphanumeric",
    sender: lease ? lease.sender : send.from,
    recipient: send.to.number,
    text: send.text,
    encoding: send.encoding,
    num_segments: send.numSegments,
    smart_encoded: send.smartEncoded,
    delivery_receipt: send.deliveryReceipt,
    dr_webhook_uri: send.drWebhookUri,
    dr_webhook_method: send.drWebhookMethod,
    forward_to_sms: leased ? send.forwardToSms : "",
    forward_from_sms: leased ? send.forwardFromSms : "",
    forward_to_email: leased ? send.forwardToEmail : "",
    forward_from_email: leased ? send.forwardFromEmail : "",
    webhook_uri: leased ? send.webhookUri : "",
    webhook_method: leased ? send.webhookMethod : "POST",
    lease_sid: lease?.leaseSid ?? null,
    in_reply_to: item.forward?.inReplyTo ?? null,
    error_code: errorCode,
    scheduled_at: send.schedule === undefined ? null : new Date(send.schedule * 1000),
    send_at: due,
    created_at: item.now,
    // ValidityPeriod, from when it is due (its Schedule, or now).
    valid_until: new Date(due.getTime() + send.validitySeconds * 1000),
    claimed_until: claimedUntil,
    attempts: claimedUntil ? 1 : 0,
    // Facts rules record (recordFacts, or the storing statement itself).
    sender_id_registered: null,
    price: null,
  };
}
