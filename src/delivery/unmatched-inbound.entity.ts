import { defineEntity, p } from "@mikro-orm/core";

/** Why an inbound SMS matched no account: no lease ever joined its ends, or the lease ended. */
export type UnmatchedReason = "NoLease" | "LeaseEnded";

/** Schema of an inbound SMS that answered no live lease (table `unmatched_inbound`). */
export const UnmatchedInboundEntity = defineEntity({
  name: "UnmatchedInbound",
  tableName: "unmatched_inbound",
  properties: {
    id: p.bigint().primary().autoincrement(),
    sender: p.string().length(32),
    recipient: p.string().length(32),
    text: p.text(),
    receivedAt: p.datetime(),
    reason: p.string().length(32).$type<UnmatchedReason>(),
  },
});

/** An inbound SMS that belongs to no account, kept for the operator and never forwarded. */
export class UnmatchedInbound extends UnmatchedInboundEntity.class {}
UnmatchedInboundEntity.setClass(UnmatchedInbound);
