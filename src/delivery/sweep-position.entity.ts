import { defineEntity, p } from "@mikro-orm/core";

/**
 * Schema of a sweep's position (table `sweep_positions`): the last (submitted_at, sid) key of
 * messages_submitted_at_idx the sweep has handled. Declared for the schema only: every statement on
 * the table is in sweep-position-store.ts.
 */
export const SweepPositionEntity = defineEntity({
  name: "SweepPosition",
  tableName: "sweep_positions",
  properties: {
    name: p.string().length(64).primary(),
    submittedAt: p.datetime(),
    sid: p.string().length(32),
  },
});

/** Where a sweep stopped. */
export class SweepPosition extends SweepPositionEntity.class {}
SweepPositionEntity.setClass(SweepPosition);
