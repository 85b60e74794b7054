import { defineEntity, p } from "@mikro-orm/core";

/**
 * Schemas of the rate cards (tables `rate_cards`, `rates`, `rate_imports`; docs/billing.md). Declared
 * for the schema only: every statement on them is in rate-card-store.ts or sql/sb_rate_for.sql.
 */
export const RateCardRowEntity = defineEntity({
  name: "RateCardRow",
  tableName: "rate_cards",
  properties: {
    name: p.string().length(64).primary(),
    // Set by every replace: a page of a large card does not count its rates.
    rateCount: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    // From the sequence rate_card_versions, anew at every replace: what a cached copy is checked by (rate-cache.ts).
    version: p.bigint("string"),
  },
});

/** A named rate card. */
export class RateCardRow extends RateCardRowEntity.class {}
RateCardRowEntity.setClass(RateCardRow);

export const RateRowEntity = defineEntity({
  name: "RateRow",
  tableName: "rates",
  properties: {
    card: p.string().length(64).primary(),
    // E164 prefix: + and 1 to 15 digits.
    prefix: p.string().length(16).primary(),
    effectiveFrom: p.datetime().primary(),
    // Micro-units (src/common/money.ts).
    pricePerSegment: p.bigint(),
  },
});

/** One rate of a card: a prefix's price per segment from a moment on. */
export class RateRow extends RateRowEntity.class {}
RateRowEntity.setClass(RateRow);

export const RateImportRowEntity = defineEntity({
  name: "RateImportRow",
  tableName: "rate_imports",
  properties: {
    importSid: p.string().length(32).primary(),
    // The CSV line the rate came from, for the error naming it.
    line: p.integer().primary().autoincrement(false),
    card: p.string().length(64),
    prefix: p.string().length(16),
    pricePerSegment: p.bigint(),
    effectiveFrom: p.datetime(),
    createdAt: p.datetime(),
  },
});

/** A rate staged by an import until its commit. */
export class RateImportRow extends RateImportRowEntity.class {}
RateImportRowEntity.setClass(RateImportRow);
