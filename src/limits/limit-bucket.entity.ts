import { defineEntity, p } from "@mikro-orm/core";

/**
 * Schema of a shared token bucket (table `limit_buckets`, docs/limits.md). Declared for the schema
 * only: every statement on the table is sb_take_tokens (sql/) or the sweep (bucket-store.ts),
 * never the ORM's own queries.
 */
export const LimitBucketEntity = defineEntity({
  name: "LimitBucket",
  tableName: "limit_buckets",
  properties: {
    key: p.text().primary(),
    tokens: p.double(),
    burst: p.double(),
    // Clock milliseconds: when it was last refilled, and when it holds no information any more.
    atMs: p.bigint(),
    expiresMs: p.bigint(),
  },
});

/** One bucket of a deployment-wide limit. */
export class LimitBucket extends LimitBucketEntity.class {}
LimitBucketEntity.setClass(LimitBucket);
