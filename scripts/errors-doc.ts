/** Writes the documented error table from src/common/errors.ts (npm run docs:errors). */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ERRORS_DOC, withErrorTable } from "../src/common/errors-doc.js";

const file = join(dirname(fileURLToPath(import.meta.url)), "..", ERRORS_DOC);
const before = readFileSync(file, "utf8");
const after = withErrorTable(before);
if (after !== before) writeFileSync(file, after);
process.stdout.write(`${ERRORS_DOC}: error table ${after === before ? "already up to date" : "written"}\n`);
