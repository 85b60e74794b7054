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
    // The carrier (its name) whose id this is: a receipt matches only its own carrier's ids.
    carrier: p.string().length(64).default(""),
  },
});

/** One segment of an outbound message as the SMSC holds it. */
export class CarrierSegment extends CarrierSegmentEntity.class {}
CarrierSegmentEntity.setClass(CarrierSegment);
