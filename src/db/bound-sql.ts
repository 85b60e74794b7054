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
 *
 * `signal` cancels the statement when it aborts (on PostgreSQL, the server's work too).
 */
export async function executeBound<T>(em: EntityManager, sql: string, params: readonly unknown[], prepared?: string, signal?: AbortSignal): Promise<T[]> {
  const numbered = prepared === undefined ? numberParams(sql, params.length) : preparedText(prepared, sql, params.length);
  // node-postgres takes a query config ({ name, text }) wherever it takes the text, and kysely hands
  // the text to it untouched.
  const postgres = driverKind(em.getDriver()) === "postgres";
  const text = prepared !== undefined && postgres ? (namedQuery(prepared, numbered) as unknown as string) : numbered;
  const compiled = CompiledQuery.raw(text, postgres ? params.map(wireValue) : (params as unknown[]));
  const result = await em.getKysely().executeQuery<T>(compiled, signal === undefined ? undefined : { signal });
  return result.rows as T[];
}

/**
 * A parameter as node-postgres would send it, made faster for the batches' arrays: node-postgres
 * escapes every element of an array with two regular-expression replaces and formats each date
 * field by field in local time (~3 % of a send's CPU, profile); here an element that needs no
 * escaping is only quoted, and a date is its ISO form in UTC (the same instant). A value of any
 * other kind is left to node-postgres.
 */
export function wireValue(value: unknown): unknown {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? value : value.toISOString();
  if (!Array.isArray(value)) return value;
  // Usually every element is a plain string, null, boolean or finite number, and none
  // needs an escape: JSON writes the array in one native call, and between its brackets it is then
  // exactly the array literal (null reads as NULL). A backslash in the JSON means an element needed
  // an escape (a quote, a backslash, a control character), which the two syntaxes write differently.
  if (value.every(jsonSafe)) {
    const json = JSON.stringify(value);
    if (!json.includes("\\")) return `{${json.slice(1, -1)}}`;
  }
  let out = "{";
  const lastDate: LastDate = { ms: Number.NaN, text: "" };
  for (let i = 0; i < value.length; i++) {
    const element = arrayElement(value[i], lastDate);
    if (element === undefined) return value;
    out += i === 0 ? element : "," + element;
  }
  return out + "}";
}

/**
 * Whether JSON writes an element as the array literal would (NaN and Infinity become JSON null).
 * Not dates: JSON calls each one's toJSON, the slow path of JSON.stringify (2 % of a send's CPU
 * for the batches' date columns), where arrayElement reuses the last date's text.
 */
function jsonSafe(v: unknown): boolean {
  const t = typeof v;
  return t === "string" || v === null || t === "boolean" || (t === "number" && Number.isFinite(v));
}

/** The last date an array's elements wrote: a batch's dates are mostly one instant (its sends' now). */
interface LastDate {
  ms: number;
  text: string;
}

/** One element of an array literal; undefined for a kind left to node-postgres (nested arrays, buffers, objects). */
function arrayElement(v: unknown, lastDate: LastDate): string | undefined {
  if (v === null || v === undefined) return "NULL";
  if (typeof v === "string") return v.includes('"') || v.includes("\\") ? `"${v.replace(/[\\"]/g, "\\$&")}"` : `"${v}"`;
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  if (typeof v === "boolean") return v ? "true" : "false";
  if (v instanceof Date) {
    const ms = v.getTime();
    if (Number.isNaN(ms)) return undefined;
    if (ms !== lastDate.ms) {
      lastDate.ms = ms;
      lastDate.text = `"${v.toISOString()}"`;
    }
    return lastDate.text;
  }
  return undefined;
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

/** A batch's values by parameter name: one array per name, a value per row. */
export type NamedArrays = Record<string, unknown[]>;

/**
 * The one place named values become positional parameters: for each of `names`, in the
 * statement's order, that name's array. From rows (objects; a null row gives null in every
 * column) or from arrays already kept by name. A batch passes one array per column (unnest), so
 * a statement has one text whatever the batch size.
 */
export function bindByName<R extends object>(names: readonly (keyof R & string)[], rows: readonly (R | null)[]): unknown[][] {
  const columns: unknown[][] = names.map(() => new Array(rows.length));
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r];
    for (let c = 0; c < names.length; c++) columns[c][r] = row === null ? null : row[names[c]];
  }
  return columns;
}

/** bindByName for values kept as arrays by name (NamedArrays): a name without an array is a bug, not a null. */
export function bindArraysByName(names: readonly string[], arrays: Readonly<NamedArrays>): unknown[][] {
  return names.map((n) => {
    const column = arrays[n];
    if (column === undefined) throw new Error(`no values for parameter ${n}`);
    return column;
  });
}
