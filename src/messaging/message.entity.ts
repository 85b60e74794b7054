import { defineEntity, p } from "@mikro-orm/core";

/** Whether a message goes out to a handset or came in from one. */
export type MessageDirection = "Transmit" | "Receive";
/** Every lifecycle state of a message (docs/api.md#message-record), in lifecycle order: the one list. */
export const MESSAGE_STATUSES = ["Scheduled", "Processing", "Submitted", "Delivered", "Failed", "Canceled", "Received"] as const;
/** Lifecycle state of a message. */
export type MessageStatus = (typeof MESSAGE_STATUSES)[number];
/** How the sender was chosen; "" for inbound messages. */
export type SenderKind = "E164" | "Alphanumeric" | "Leased" | "";
/** Character set the text is sent in. */
export type MessageEncoding = "GSM7" | "UCS2";

/** Schema of an SMS, outbound or inbound (table `messages`). */
export const MessageEntity = defineEntity({
  name: "Message",
  tableName: "messages",
  properties: {
    sid: p.string().length(32).primary(),
    accountSid: p.string().length(32),
    propertySid: p.string().length(32),
    direction: p.string().length(16).$type<MessageDirection>(),
    status: p.string().length(16).$type<MessageStatus>(),
    senderKind: p.string().length(16).$type<SenderKind>().default(""),
    // The actual From: the allocated pool number when the sender was leased.
    sender: p.string().length(32),
    recipient: p.string().length(32),
    text: p.text(),
    // The text was emptied by the account's RedactAfterDays (src/delivery/retention.ts).
    redacted: p.boolean().default(false),
    encoding: p.string().length(8).$type<MessageEncoding>(),
    numSegments: p.integer(),
    // Smart encoding replaced look-alike characters in text (docs/api.md#smart-encoding).
    smartEncoded: p.boolean().default(false),
    deliveryReceipt: p.boolean().default(true),
    drWebhookUri: p.text().default(""),
    drWebhookMethod: p.string().length(8).default(""),
    forwardToSms: p.string().length(32).default(""),
    forwardFromSms: p.string().length(32).default(""),
    forwardToEmail: p.string().default(""),
    forwardFromEmail: p.string().default(""),
    webhookUri: p.text().default(""),
    webhookMethod: p.string().length(8).default(""),
    leaseSid: p.string().length(32).nullable(),
    inReplyTo: p.string().length(32).nullable(),
    // The Schedule the client asked for; sendAt is when the dispatcher may actually send.
    scheduledAt: p.datetime().nullable(),
    sendAt: p.datetime(),
    createdAt: p.datetime(),
    // ValidityPeriod's end (docs/limits.md): still queued after it, the message fails QueueTimeout.
    validUntil: p.datetime().nullable(),
    submittedAt: p.datetime().nullable(),
    deliveredAt: p.datetime().nullable(),
    receivedAt: p.datetime().nullable(),
    errorCode: p.string().length(64).default(""),
    // The carrier's own reason for a refusal or failure (SMPP status or receipt err), "" otherwise.
    carrierError: p.text().default(""),
    attempts: p.integer().default(0),
    carrierRef: p.string().nullable(),
    // The name of the carrier that took the message (issue 30), "" before its submission.
    carrier: p.string().length(64).default(""),
    // Whether the alphanumeric sender ID was Registered for the recipient's country, where SENDER_ID_REGISTRATION checks it; null elsewhere.
    senderIdRegistered: p.boolean().nullable(),
    // Segments times the destination's rate at accept, in micro-units (docs/billing.md); null: unpriced.
    // Read as a string: a bigint never passes through a JavaScript number.
    price: p.bigint("string").nullable(),
    // What its carrier cost the operator (segments times the carrier's CostCard rate at hand-over),
    // micro-units; null: not handed over, or no cost known. Never shown on /v2.
    cost: p.bigint("string").nullable(),
    // The dispatcher's columns, written only by its own SQL. Not lazy: entity reads then stay
    // `select m0.*`, as before they were mapped. `queued` is derived by the database (the queue
    // indexes' predicate, Migration20261122030000, declared without NOT NULL); the ORM never writes it.
    queued: p.boolean().generated("(status in ('Scheduled', 'Processing')) stored").nullable(),
    // A dispatcher's claim; an expired one (a crashed dispatcher's) is taken again.
    claimedUntil: p.datetime().nullable(),
  },
});

/** An SMS message and its delivery state; the row is also the dispatcher's queue entry. */
export class Message extends MessageEntity.class {}
MessageEntity.setClass(Message);
