/**
 * The documented error table, generated from the one error table (ERRORS): `npm run docs:errors`
 * writes it into the docs between its markers, and a test checks the committed docs match.
 */
import { codeToString } from "./internals.js";
import { ERRORS, type ErrorCode, type ErrorSpec, smppStatusOf } from "./errors.js";

/** The file the table is documented in, from the repository root. */
export const ERRORS_DOC = "docs/errors.md";
/** The lines around the generated table in ERRORS_DOC. */
export const ERRORS_DOC_BEGIN = "<!-- error table: generated from src/common/errors.ts by `npm run docs:errors`; edit it there -->";
export const ERRORS_DOC_END = "<!-- end of the generated error table -->";

/**
 * The Markdown table: ErrorCode, HTTP status, Connect code (— for REST-only errors), the SMPP
 * server's command_status (— for REST-only errors), when.
 */
export function errorTableMarkdown(): string {
  const rows = (Object.entries(ERRORS) as [ErrorCode, ErrorSpec][]).map(
    ([code, e]) => `| \`${code}\` | ${e.http} | ${e.restOnly ? "—" : codeToString(e.grpc)} | ${e.restOnly ? "—" : `\`${smppStatusOf(code)}\``} | ${e.when} |`,
  );
  return ["| ErrorCode | HTTP | Connect code | SMPP status | When |", "|---|---|---|---|---|", ...rows].join("\n");
}

/** The document with its generated table replaced by the current one; throws when the markers are missing. */
export function withErrorTable(doc: string): string {
  const begin = doc.indexOf(ERRORS_DOC_BEGIN);
  const end = doc.indexOf(ERRORS_DOC_END);
  if (begin < 0 || end < begin) throw new Error(`${ERRORS_DOC} has no generated error table (its markers are missing)`);
  return `${doc.slice(0, begin + ERRORS_DOC_BEGIN.length)}\n${errorTableMarkdown()}\n${doc.slice(end)}`;
}
