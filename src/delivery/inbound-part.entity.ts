import { defineEntity, p } from "@mikro-orm/core";

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
