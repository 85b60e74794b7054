/**
 * Classifiers of PostgreSQL and pg-client errors, by SQLSTATE and message only: no ORM, so the
 * lowest layer (the API error table in errors.ts) can map database failures without loading it.
 */

/** Whether an error is PostgreSQL cancelling a statement (57014: statement_timeout), looking through wrapped causes. */
export function isStatementTimeout(e: unknown, depth = 0): boolean {
  if (typeof e !== "object" || e === null || depth > 5) return false;
  const { code, cause } = e as { code?: unknown; cause?: unknown };
  return code === "57014" || (cause !== undefined && isStatementTimeout(cause, depth + 1));
}

/** Node network error codes of a connection that could not be made or was lost. */
const NETWORK_ERRORS = new Set(["ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"]);

/**
 * SQLSTATEs of a server that cannot serve now: class 08 (connection exception), 57P01-57P03
 * (shut down by the operator, crashed, starting up), 53300 (too many connections) and 57014
 * (a statement cancelled, here by statement_timeout).
 */
const UNAVAILABLE_SQLSTATE = /^(08[0-9A-Z]{3}|57P0[1-3]|53300|57014)$/;

/** What the pg client and pool say, without a code, when the server went away or never answered. */
const UNAVAILABLE_MESSAGE =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Client was closed and is not queryable|Cannot use a pool after calling end/i;

/**
 * Whether an error means the database cannot be reached or cannot answer now (refused, dropped or
 * timed-out connections, a server shutting down or starting up), rather than a bug or a bad query.
 * Such errors are the API's ServiceUnavailable; looks through wrapped causes.
 */
export function isDatabaseUnavailable(e: unknown, depth = 0): boolean {
  if (typeof e !== "object" || e === null || depth > 5) return false;
  const { code, message, cause, errors } = e as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === "string" && (NETWORK_ERRORS.has(code) || UNAVAILABLE_SQLSTATE.test(code))) return true;
  if (typeof message === "string" && UNAVAILABLE_MESSAGE.test(message)) return true;
  if (Array.isArray(errors) && errors.some((x) => isDatabaseUnavailable(x, depth + 1))) return true;
  return cause !== undefined && isDatabaseUnavailable(cause, depth + 1);
}

/** pg-pool's answer when every pooled connection stayed busy past `connectionTimeoutMillis` (a new connection that times out says "Connection terminated due to connection timeout"). */
const POOL_EXHAUSTED_MESSAGE = /timeout exceeded when trying to connect/i;

/**
 * Whether an error means this process's connection pool had no connection free in time (every one
 * busy), rather than the database being unreachable; looks through wrapped causes. Such an error is
 * also isDatabaseUnavailable (the request cannot be served now, and is retried the same way).
 */
export function isPoolExhausted(e: unknown, depth = 0): boolean {
  if (typeof e !== "object" || e === null || depth > 5) return false;
  const { message, cause, errors } = e as { message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof message === "string" && POOL_EXHAUSTED_MESSAGE.test(message)) return true;
  if (Array.isArray(errors) && errors.some((x) => isPoolExhausted(x, depth + 1))) return true;
  return cause !== undefined && isPoolExhausted(cause, depth + 1);
}

/** A database constraint failure, by kind and constraint name. */
export interface ConstraintViolation {
  kind: "unique" | "foreign-key" | "check" | "not-null";
  constraint: string;
  /**
   * For a foreign key, which end broke it: "referencing" when a row was written that names a
   * missing row (insert or update, raised at commit for a deferred key), "referenced" when a row
   * still named was deleted or changed.
   */
  side?: "referencing" | "referenced";
  /** The offending key value, as the server's detail quotes it ("Key (number)=(+1…) already exists."). */
  key?: string;
}

const VIOLATION_KINDS: Record<string, ConstraintViolation["kind"]> = {
  "23505": "unique",
  "23503": "foreign-key",
  // ON DELETE RESTRICT reports restrict_violation on PGlite (PostgreSQL 17) but 23503 on PostgreSQL 15.
  "23001": "foreign-key",
  "23514": "check",
  "23502": "not-null",
};

/**
 * Classifies a constraint error, whether MikroORM converted it (a DriverException subclass) or it
 * came raw from COMMIT (deferred foreign keys are checked there, and MikroORM does not convert those).
 */
export function constraintViolation(e: unknown): ConstraintViolation | undefined {
  if (typeof e !== "object" || e === null) return undefined;
  const { code, constraint, message, detail } = e as { code?: unknown; constraint?: unknown; message?: unknown; detail?: unknown };
  const kind = typeof code === "string" ? VIOLATION_KINDS[code] : undefined;
  if (!kind) return undefined;
  const v: ConstraintViolation = { kind, constraint: typeof constraint === "string" ? constraint : "" };
  if (kind === "foreign-key") {
    // PostgreSQL words the two ends differently: "insert or update on table …" names the writer of
    // the reference; "update or delete on table … on table …" (or 23001) the row still referenced.
    v.side = code === "23503" && typeof message === "string" && message.includes("insert or update on table") ? "referencing" : "referenced";
  }
  const key = typeof detail === "string" ? /^Key \([^)]*\)=\((.*)\) (?:already exists|is not present|is (?:still )?referenced)/.exec(detail)?.[1] : undefined;
  if (key !== undefined) v.key = key;
  return v;
}
