/**
 * `switchboard rates import NAME FILE.csv` and `rates export NAME [FILE]` (docs/billing.md): a rate
 * card as CSV, `Prefix,PricePerSegment,EffectiveFrom` (the header optional on import; an empty
 * EffectiveFrom is 0, in effect from the start). The whole file is checked here first with the
 * service's own rules (billing/rate-rules.ts), so a malformed row is reported with its line number
 * before anything is sent; then it is staged in chunks under the body limit (StageRateImport) and
 * committed in one transaction (CommitRateImport): the card changes whole or not at all.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { type AdminService, type Rate as RatePb, RateSchema } from "../../gen/switchboard/admin/v1/admin_pb.js";
import type { FieldProblem } from "../common/errors.js";
import { checkRate, firstDuplicate, type Rate } from "../billing/rate-rules.js";
import { formatMoney } from "../common/money.js";

/** The header line export writes and import skips. */
export const RATES_HEADER = "Prefix,PricePerSegment,EffectiveFrom";
/** Rates per StageRateImport request: about 300 KB in the binary format, well under the 1 MiB default body limit. */
export const IMPORT_CHUNK = 10_000;
/** Rates per GetRateCard page when exporting: the largest page the API gives. */
const EXPORT_PAGE = 1000;
/** The most problems reported for one file. */
const MAX_PROBLEMS = 10;

/** What a `rates` command reports back to main: its output, or the problems found in the file. */
export type RatesOutcome = { ok: true; stdout: string } | { ok: false; problems: FieldProblem[] };

/** A CSV field without the quotes a spreadsheet may put around it. */
function unquote(field: string): string {
  return field.length >= 2 && field.startsWith('"') && field.endsWith('"') ? field.slice(1, -1) : field;
}

/**
 * The rates of a CSV text, each with its line number (1-based, the header counted), or the first
 * problems found, each naming its line ("Line 7: PricePerSegment").
 */
export function parseRatesCsv(text: string): { rates: { line: number; rate: Rate }[] } | { problems: FieldProblem[] } {
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  if (lines.at(-1) === "") lines.pop();
  const rates: { line: number; rate: Rate }[] = [];
  const problems: FieldProblem[] = [];
  const start = lines.length > 0 && lines[0].trim().toLowerCase() === RATES_HEADER.toLowerCase() ? 1 : 0;
  for (let i = start; i < lines.length && problems.length < MAX_PROBLEMS; i++) {
    const line = i + 1;
    const at = `Line ${line}: `;
    const fields = lines[i].split(",").map(unquote);
    if (fields.length < 2 || fields.length > 3) {
      problems.push({
        field: `Line ${line}`,
        code: "InvalidParameter",
        message: `Line ${line}: expected ${RATES_HEADER} (EffectiveFrom may be empty); got ${fields.length} field${fields.length === 1 ? "" : "s"}.`,
      });
      continue;
    }
    const from = fields[2] ?? "";
    if (from !== "" && !/^\d{1,15}$/.test(from)) {
      problems.push({
        field: `${at}EffectiveFrom`,
        code: "InvalidParameter",
        message: `${at}EffectiveFrom must be Unix seconds (digits) or empty; got ${JSON.stringify(from)}.`,
      });
      continue;
    }
    const r = checkRate({ prefix: fields[0], pricePerSegment: fields[1], effectiveFrom: from === "" ? 0 : Number(from) }, at);
    if (Array.isArray(r)) problems.push(...r);
    else rates.push({ line, rate: r });
  }
  if (problems.length === 0) {
    const dup = firstDuplicate(rates.map((r) => r.rate));
    if (dup) {
      const a = rates[dup.first];
      const b = rates[dup.again];
      const message = `Line ${b.line}: ${b.rate.prefix} with EffectiveFrom ${b.rate.effectiveFrom} is given already on line ${a.line}.`;
      problems.push({ field: `Line ${b.line}`, code: "InvalidParameter", message });
    }
  }
  return problems.length > 0 ? { problems: problems.slice(0, MAX_PROBLEMS) } : { rates };
}

function toPb(r: Rate): RatePb {
  return create(RateSchema, { prefix: r.prefix, pricePerSegment: formatMoney(r.pricePerSegment), effectiveFrom: BigInt(r.effectiveFrom) });
}

/** Imports a CSV file as a card's rates: checked whole, staged in chunks, committed at once. */
export async function importRates(client: Client<typeof AdminService>, name: string, csv: string): Promise<RatesOutcome> {
  const parsed = parseRatesCsv(csv);
  if ("problems" in parsed) return { ok: false, problems: parsed.problems };
  let importSid = "";
  for (let i = 0; i < parsed.rates.length || i === 0; i += IMPORT_CHUNK) {
    const chunk = parsed.rates.slice(i, i + IMPORT_CHUNK);
    // An empty file still makes an import, so that the commit empties the card.
    const staged = await client.stageRateImport({ name, importSid, firstLine: chunk[0]?.line ?? 1, rates: chunk.map((r) => toPb(r.rate)) });
    importSid = staged.importSid;
  }
  const card = await client.commitRateImport({ name, importSid });
  const summary = { Name: card.name, RateCount: card.rateCount, Created: Number(card.created), Updated: Number(card.updated) };
  return { ok: true, stdout: `${JSON.stringify(summary, null, 2)}\n` };
}

/** Exports a card's rates as CSV, to `file` or (absent) as the output. */
export async function exportRates(client: Client<typeof AdminService>, name: string, file?: string): Promise<RatesOutcome> {
  const out: string[] = [RATES_HEADER];
  // Keyset paging (AfterPrefix): each page starts where the last ended, so a deep page is as cheap as the first.
  let after: { afterPrefix: string; afterEffectiveFrom: bigint } = { afterPrefix: "", afterEffectiveFrom: 0n };
  for (;;) {
    const page = await client.getRateCard({ name, resultsCount: EXPORT_PAGE, ...after });
    for (const r of page.rates) out.push(`${r.prefix},${r.pricePerSegment},${r.effectiveFrom}`);
    if (page.rates.length < EXPORT_PAGE) break;
    const last = page.rates[page.rates.length - 1];
    after = { afterPrefix: last.prefix, afterEffectiveFrom: last.effectiveFrom };
  }
  const csv = `${out.join("\n")}\n`;
  if (file === undefined) return { ok: true, stdout: csv };
  writeFileSync(file, csv);
  return { ok: true, stdout: `${JSON.stringify({ Name: name, RateCount: out.length - 1, File: file }, null, 2)}\n` };
}

/** Runs `rates import|export` with its positional arguments; a usage problem is thrown as `usage`. */
export async function runRates(args: string[], cwd: string, client: Client<typeof AdminService>, usage: (message: string) => Error): Promise<RatesOutcome> {
  const [verb, name, file, ...extra] = args;
  const help = "switchboard rates import <Name> <File.csv> | switchboard rates export <Name> [File.csv]";
  if (extra.length > 0) throw usage(`Unexpected argument '${extra[0]}': ${help}`);
  if (verb === "import") {
    if (name === undefined || file === undefined) throw usage(`rates import needs <Name> <File.csv>: ${help}`);
    let csv: string;
    try {
      csv = readFileSync(resolve(cwd, file), "utf8");
    } catch (e) {
      throw usage(`rates import: cannot read '${file}': ${(e as Error).message}`);
    }
    return importRates(client, name, csv);
  }
  if (verb === "export") {
    if (name === undefined) throw usage(`rates export needs <Name>: ${help}`);
    return exportRates(client, name, file === undefined ? undefined : resolve(cwd, file));
  }
  throw usage(`rates takes import or export: ${help}`);
}

/** The help of `rates`. */
export const RATES_HELP = [
  "Usage: switchboard rates import <Name> <File.csv>",
  "       switchboard rates export <Name> [File.csv]",
  "",
  "A rate card as CSV: Prefix,PricePerSegment,EffectiveFrom (a header line optional on import;",
  "EffectiveFrom in Unix seconds, empty for 0: in effect from the start).",
  "import checks the whole file first (a bad row is reported with its line number and nothing is",
  "sent), then replaces the card's rates at once (StageRateImport in chunks, CommitRateImport).",
  "export writes the card's rates to the file, or to stdout.",
  "",
  "Global options --url, --token and --help work here too (see 'switchboard --help').",
  "",
].join("\n");
