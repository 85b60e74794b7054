import { defineEntity, p } from "@mikro-orm/core";

/** Schema of one submitted segment and its receipt state (table `carrier_segments`). */
export const CarrierSegmentEntity = defineEntity({
  name: "CarrierSegment",
  tableName: "carrier_segments",
  properties: {
    messageSid: p.string().length(32).primary(),
    // 1-based part number; a message of one segment has seq 1.
    seq: p.smallint().primary(),
    // The message_id exactly as the SMSC gave it in submit_sm_resp.
    carrierId: p.string().length(80),
    // Lower case without leading zeros, and (when it reads as hex) its decimal value.
    idKey: p.string().length(80),
    idAlt: p.string().length(80).nullable(),
    status: p.string().length(16).$type<"Submitted" | "Delivered" | "Failed">().default("Submitted"),
    carrierError: p.text().default(""),
    createdAt: p.datetime(),
  },
});

/** One segment of an outbound message as the SMSC holds it. */
export class CarrierSegment extends CarrierSegmentEntity.class {}
CarrierSegmentEntity.setClass(CarrierSegment);

/** Schema of a receipt that named no known segment yet (table `carrier_pending_receipts`). */
export const PendingReceiptEntity = defineEntity({
  name: "PendingReceipt",
  tableName: "carrier_pending_receipts",
  properties: {
    id: p.bigint().primary().autoincrement(),
    carrierId: p.string().length(80),
    idKey: p.string().length(80),
    // The receipt's id read as hex, in decimal (matches a decimal submit id named in hex).
    idHexValue: p.string().length(80).nullable(),
    status: p.string().length(16).$type<"Delivered" | "Failed">(),
    carrierError: p.text().default(""),
    receivedAt: p.datetime(),
  },
});

/** A receipt kept until the submission it names is recorded. */
export class PendingReceipt extends PendingReceiptEntity.class {}
PendingReceiptEntity.setClass(PendingReceipt);

/** Schema of one part of a concatenated inbound SMS (table `inbound_parts`). */
export const InboundPartEntity = defineEntity({
  name: "InboundPart",
  tableName: "inbound_parts",
  properties: {
    id: p.bigint().primary().autoincrement(),
    sender: p.string().length(32),
    recipient: p.string().length(32),
    // The concatenation reference and part count of the UDH.
    ref: p.integer(),
    total: p.smallint(),
    part: p.smallint(),
    text: p.text(),
    receivedAt: p.datetime(),
  },
});

/** A part of a concatenated inbound SMS waiting for the others. */
export class InboundPart extends InboundPartEntity.class {}
InboundPartEntity.setClass(InboundPart);
