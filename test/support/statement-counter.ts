import type * as BoundSql from "../../src/db/bound-sql.js";

/** Every statement sent through executeBound (all the hot ones), by its prepared name or its first three words. */
export const statements = new Map<string, number>();

/**
 * bound-sql.ts with executeBound counting into `statements`, for a test's
 * `vi.mock("../../src/db/bound-sql.js", async (original) => (await import("../support/statement-counter.js")).countingBoundSql(await original()))`.
 */
export function countingBoundSql(mod: typeof BoundSql): typeof BoundSql {
  return {
    ...mod,
    executeBound: (...args: Parameters<typeof mod.executeBound>) => {
      const [, sql, , prepared] = args;
      const kind = prepared ?? sql.trim().split(/\s+/).slice(0, 3).join(" ");
      statements.set(kind, (statements.get(kind) ?? 0) + 1);
      return mod.executeBound(...args);
    },
  };
}
