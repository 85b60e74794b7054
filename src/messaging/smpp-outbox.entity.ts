import { defineEntity, p } from "@mikro-orm/core";

/**
 * Schema of `smpp_outbox` (docs/smpp-server.md#receipts-and-replies): the receipts and replies
 * waiting for an account's SMPP binds. Declared for the schema only: every statement on it is in
 * smpp-outbox-store.ts.
 */
export const SmppOutboxEntity = defineEntity({
  name: "SmppOutboxRow",
  tableName: "smpp_outbox",
  properties: {
    id: p.bigint().primary().autoincrement(),
    accountSid: p.string().length(32),
    messageSid: p.string().length(32),
    // Receipt (due once its message is final) or Reply (due at once).
    kind: p.string().length(8),
    // A receipt's registered_delivery: 1 on any final state, 2 only on failure.
    registeredDelivery: p.smallint().default(0),
    createdAt: p.datetime(),
    // Claimed by a process holding a bind until then; null or past: free to claim.
    claimedUntil: p.datetime().nullable(),
  },
});

/** One receipt or reply waiting for a bind. */
export class SmppOutboxRow extends SmppOutboxEntity.class {}
SmppOutboxEntity.setClass(SmppOutboxRow);
