/**
 * CSV answers (docs/api.md#csv-answers): a method listed in CSV_TABLES answers `Accept: text/csv` with the
 * rows of its response as CSV instead of JSON. The one place a method opts in: its response is a
 * table (one repeated message field), whose columns are read from the row's descriptor: the key
 * column the request chose (a row's `optional` fields are the keys it may be grouped by), then
 * every other field in declaration order. Values are the JSON answer's (the same decimal strings
 * and numbers); errors stay JSON.
 */
import type { DescMethod, JsonObject, JsonValue } from "@bufbuild/protobuf";

/** How a method's response is a table. */
interface CsvTable {
  /** The JSON name of the response's repeated message field: the rows. */
  rows: string;
  /** The JSON name of the key column for a request (its grouping). */
  key: (request: { groupBy?: string }) => string;
}

/** The methods that answer CSV, by full method name. */
const CSV_TABLES: Record<string, CsvTable> = {
  "switchboard.v2.BillingService.GetUsage": { rows: "Usage", key: (r) => (r.groupBy === "Country" ? "Country" : "Date") },
  "switchboard.admin.v1.AdminService.GetUsage": {
    rows: "Usage",
    key: (r) => (r.groupBy === "Carrier" ? "Carrier" : r.groupBy === "Day" ? "Date" : "AccountSid"),
  },
};

/** The CSV media type, and its Content-Type (UTF-8). */
export const CSV_MEDIA_TYPE = "text/csv";
export const CSV_CONTENT_TYPE = `${CSV_MEDIA_TYPE}; charset=utf-8`;

/** Writes a method's JSON answer (as rest-response.ts made it) and its request as CSV text. */
export type CsvWriter = (json: JsonObject, request: { groupBy?: string }) => string;

/** One CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180). */
function field(v: JsonValue | undefined): string {
  const s = v === undefined || v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** The CSV writer of a method; undefined when it does not answer CSV. */
export function csvWriter(rpc: DescMethod): CsvWriter | undefined {
  const table = CSV_TABLES[`${rpc.parent.typeName}.${rpc.name}`];
  if (!table) return undefined;
  const rowsField = rpc.output.fields.find((f) => f.jsonName === table.rows);
  const row = rowsField?.fieldKind === "list" && rowsField.listKind === "message" ? rowsField.message : undefined;
  if (!row) throw new Error(`CSV_TABLES: ${rpc.name} has no repeated message field ${table.rows}`);
  const values = row.fields.filter((f) => !f.proto.proto3Optional).map((f) => f.jsonName);
  return (json, request) => {
    const columns = [table.key(request), ...values];
    const rows = (json[table.rows] as JsonObject[] | undefined) ?? [];
    const lines = [columns.join(","), ...rows.map((r) => columns.map((c) => field(r[c])).join(","))];
    return `${lines.join("\r\n")}\r\n`;
  };
}

/**
 * Whether the Accept header prefers CSV: it names `text/csv` with a weight above 0, above that of
 * `application/json` and not below that of a wildcard (`*\/*`, `application/*`). No Accept: JSON.
 */
export function acceptsCsv(accept: string | undefined): boolean {
  if (accept === undefined || !accept.includes("csv")) return false;
  let csv = 0;
  let json = 0;
  let wildcard = 0;
  for (const part of accept.split(",")) {
    const [type, ...params] = part.split(";").map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith("q="));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    if (!Number.isFinite(weight)) continue;
    if (type === "text/csv") csv = Math.max(csv, weight);
    else if (type === "application/json") json = Math.max(json, weight);
    else if (type === "*/*" || type === "application/*") wildcard = Math.max(wildcard, weight);
  }
  return csv > 0 && csv > json && csv >= wildcard;
}
