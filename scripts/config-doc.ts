/** Writes the documented configuration tables from src/config/variables.ts (npm run docs:config). */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CONFIG_DOCS, withConfigTables } from "../src/config/config-doc.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
for (const page of new Set(Object.values(CONFIG_DOCS))) {
  const file = join(root, page);
  const before = readFileSync(file, "utf8");
  const after = withConfigTables(before, page);
  if (after !== before) writeFileSync(file, after);
  process.stdout.write(`${page}: configuration tables ${after === before ? "already up to date" : "written"}\n`);
}
