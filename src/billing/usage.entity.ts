import { defineEntity, p } from "@mikro-orm/core";

/**
 * Schemas of the usage rollup (tables `usage_days`, `usage_rollups`, `usage_pending`; docs/billing.md#usage).
 * Declared for the schema only: every statement on them is in usage-store.ts.
 */
export const UsageDayEntity = defineEntity({
  name: "UsageDay",
  tableName: "usage_days",
  properties: {
    accountSid: p.string().length(32).primary(),
    // The UTC day the messages were accepted.
    day: p.string().columnType("date").primary(),
    // The destination's ISO 3166-1 alpha-2 code, "" when it has none.
    country: p.string().length(2).primary(),
    // The carrier that took them, "" for messages never handed to one.
    carrier: p.string().length(64).primary(),
    messages: p.bigint(),
    segments: p.bigint(),
    // Micro-units: charged, refunds deducted.
    price: p.bigint(),
    // Micro-units: what the carriers cost (a message without a cost counts 0).
    cost: p.bigint(),
  },
});

/** One account's, day's, country's and carrier's usage. */
export class UsageDay extends UsageDayEntity.class {}
UsageDayEntity.setClass(UsageDay);

export const UsageRollupEntity = defineEntity({
  name: "UsageRollup",
  tableName: "usage_rollups",
  properties: {
    accountSid: p.string().length(32).primary(),
    // Every message accepted before it (the start of an hour) is in usage_days; null: none yet.
    rolledUntil: p.datetime().nullable(),
  },
});

/** An account's rollup watermark. */
export class UsageRollup extends UsageRollupEntity.class {}
UsageRollupEntity.setClass(UsageRollup);

export const UsagePendingEntity = defineEntity({
  name: "UsagePending",
  tableName: "usage_pending",
  properties: {
    // A message still queued when its hour was rolled up: added to its day once it leaves the queue.
    messageSid: p.string().length(32).primary(),
    accountSid: p.string().length(32),
  },
});

/** A message whose usage waits for it to leave the queue. */
export class UsagePending extends UsagePendingEntity.class {}
UsagePendingEntity.setClass(UsagePending);
