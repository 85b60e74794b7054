import { isDatabaseUnavailable, isPoolExhausted } from "./pg-errors.js";

/**
 * What a request could not reach, for the 503 that names it (issue 41): the database (refused,
 * dropped or timed-out connections, a server going away), the shared limits' Redis, or this
 * process's database connection pool (every pooled connection busy past the wait for one).
 */
export type Unreachable = "database" | "redis" | "pool";

/** A failure of a dependency that is not PostgreSQL (the limits' Redis), named for the 503 it becomes. */
export class DependencyUnreachable extends Error {
  constructor(
    readonly dependency: Unreachable,
    cause?: unknown,
  ) {
    super(`${dependency} cannot be reached`, { cause });
    this.name = "DependencyUnreachable";
  }
}

/** What an error says could not be reached, or undefined when it is not an outage (a bug, a bad query). */
export function unreachableOf(e: unknown): Unreachable | undefined {
  if (e instanceof DependencyUnreachable) return e.dependency;
  if (isPoolExhausted(e)) return "pool";
  if (isDatabaseUnavailable(e)) return "database";
  return undefined;
}

/** How a log line names what could not be reached. */
export const UNREACHABLE_LOG: Record<Unreachable, string> = {
  database: "database unavailable",
  redis: "the limits' Redis unavailable",
  pool: "database connection pool exhausted",
};
