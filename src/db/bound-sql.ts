import type { EntityManager } from "@mikro-orm/sql";
import { CompiledQuery } from "kysely";
import { driverKind } from "./orm.js";

/**
 * Runs one SQL statement with its parameters bound by the driver, in the EntityManager's
 * transaction if it has one. MikroORM's `execute` formats every parameter into the SQL text as a
 * literal (escaping strings, formatting dates), which was a tenth of the CPU of a send; the hot
 * statements go through here instead. `?` marks a parameter, as with `execute`; the SQL must hold
 * no other `?` (no jsonb `?` operators).
 *
 * `prepared` names a statement whose text never changes (batches pass arrays, not more rows): on
 * PostgreSQL it is then parsed and planned once per connection instead of on every call. Planning
 * was most of PostgreSQL's CPU for the send batch's check query (docs/benchmarks.md). PGlite runs in
 * this process, so there is nothing to save there and the name is not used.
 */
export async function executeBound<T>(em: EntityManager, sql: string, params: readonly unknown[], prepared?: string): Promise<T[]> {
  const numbered = prepared === undefined ? numberParams(sql, params.length) : preparedText(prepared, sql, params.length);
  // node-postgres takes a query config ({ name, text }) wherever it takes the text, and kysely hands
  // the text to it untouched.
  const text = prepared !== undefined && driverKind(em.getDriver()) === "postgres" ? (namedQuery(prepared, numbered) as unknown as string) : numbered;
  const result = await em.getKysely().executeQuery<T>(CompiledQuery.raw(text, params as unknown[]));
  return result.rows as T[];
}

function numberParams(sql: string, count: number): string {
  let n = 0;
  const numbered = sql.replace(/\?/g, () => `$${++n}`);
  if (n !== count) throw new Error(`executeBound: ${n} placeholders for ${count} parameters`);
  return numbered;
}

const preparedTexts = new Map<string, { sql: string; numbered: string }>();

function preparedText(name: string, sql: string, count: number): string {
  const known = preparedTexts.get(name);
  if (known) {
    // A server-side statement is one text for good: a second text under the same name is a bug.
    if (known.sql !== sql) throw new Error(`executeBound: prepared statement ${name} used with two different texts`);
    return known.numbered;
  }
  const numbered = numberParams(sql, count);
  preparedTexts.set(name, { sql, numbered });
  return numbered;
}

/** A fresh config each call: node-postgres writes the call's values into it. */
function namedQuery(name: string, text: string): { name: string; text: string } {
  return { name, text, toString: () => text } as { name: string; text: string };
}
