// Builds the operator console (console/) with Vite into dist/console, which the service serves
// under /console (src/console/console-plugin.ts). Skipped when nothing it is built from changed
// since the last build (a hash of console/, the generated operator service and package-lock.json
// is kept beside the output), so `npm start` stays quick. Every build prints what the first page
// costs a browser (gzip) and fails when it is over FIRST_PAGE_BUDGET.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { gzipSync } from "node:zlib";

/** The most the console adds to a browser's first page download, gzip (issue 34). */
export const FIRST_PAGE_BUDGET = 300 * 1024;

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

function inputsHash(root) {
  const h = createHash("sha256");
  const inputs = [...files(join(root, "console")), ...files(join(root, "gen")), join(root, "package-lock.json")].sort();
  for (const f of inputs) h.update(relative(root, f)).update("\0").update(readFileSync(f)).update("\0");
  return h.digest("hex");
}

/**
 * What the first page downloads: index.html and the scripts and styles it names (Vite emits the
 * console as one entry chunk and its CSS), each gzip-compressed.
 */
export function firstPageBytes(outDir) {
  const html = readFileSync(join(outDir, "index.html"), "utf8");
  const named = [...html.matchAll(/(?:src|href)="\.\/(assets\/[^"]+)"/g)].map((m) => m[1]);
  const parts = [{ file: "index.html", body: Buffer.from(html) }, ...named.map((file) => ({ file, body: readFileSync(join(outDir, file)) }))];
  return parts.map((p) => ({ file: p.file, raw: p.body.length, gzip: gzipSync(p.body, { level: 9 }).length }));
}

export async function buildConsole({ root, force = false }) {
  const outDir = join(root, "dist", "console");
  const stamp = join(outDir, ".inputs-sha256");
  const hash = inputsHash(root);
  if (!force && existsSync(stamp) && readFileSync(stamp, "utf8") === hash) return;
  const started = performance.now();
  // Loaded only when there is something to build: a start with an unchanged console never loads Vite.
  const { build } = await import("vite");
  // Built beside the output and swapped in by rename: a service (or a concurrent build) never
  // reads a half-written console.
  const tmp = join(root, "dist", `console.${process.pid}.tmp`);
  try {
    await build({ configFile: join(root, "console", "vite.config.ts"), logLevel: "warn", build: { outDir: tmp, emptyOutDir: true } });
    const parts = firstPageBytes(tmp);
    const total = parts.reduce((n, p) => n + p.gzip, 0);
    const sizes = parts.map((p) => `${p.file} ${(p.gzip / 1024).toFixed(1)}`).join(", ");
    const line = `console: first page ${(total / 1024).toFixed(1)} KB gzip (${sizes}), budget ${FIRST_PAGE_BUDGET / 1024} KB`;
    process.stderr.write(`${line}; built in ${(performance.now() - started).toFixed(0)} ms\n`);
    if (total > FIRST_PAGE_BUDGET) throw new Error(`the console's first page is ${total} bytes gzip, over its budget of ${FIRST_PAGE_BUDGET}`);
    writeFileSync(join(tmp, ".inputs-sha256"), hash);
    const old = join(root, "dist", `console.${process.pid}.old`);
    if (existsSync(outDir)) renameSync(outDir, old);
    renameSync(tmp, outDir);
    rmSync(old, { recursive: true, force: true });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
