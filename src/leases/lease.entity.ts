import { defineEntity, p } from "@mikro-orm/core";

/** Schema of a leased sender (table `leases`). */
export const LeaseEntity = defineEntity({
  name: "Lease",
  tableName: "leases",
  properties: {
    sid: p.string().length(32).primary(),
    poolNumber: p.string().length(16),
    recipient: p.string().length(16),
    accountSid: p.string().length(32),
    messageSid: p.string().length(32),
    // 1..5: the partial unique index on (account_sid, recipient, slot) caps an account's live leases to a recipient.
    slot: p.smallint(),
    createdAt: p.datetime(),
    expiresAt: p.datetime(),
    // Expired leases still hold their slot until something sets this; allocation does so lazily.
    released: p.boolean().default(false),
  },
});

/** A pool number lent to one recipient for 30 days so replies can be routed back. */
export class Lease extends LeaseEntity.class {}
LeaseEntity.setClass(Lease);
