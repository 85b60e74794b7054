import { defineEntity, p } from "@mikro-orm/core";

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
    // The carrier (its name) whose id this is: a receipt matches only its own carrier's ids.
    carrier: p.string().length(64).default(""),
  },
});

/** A receipt kept until the submission it names is recorded. */
export class PendingReceipt extends PendingReceiptEntity.class {}
PendingReceiptEntity.setClass(PendingReceipt);
