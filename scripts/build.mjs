#!/usr/bin/env node
// `npm start`'s first step: compiles the service (src/main.ts, src/worker.ts and what they import
// from src/ and gen/) to JavaScript under dist/, with esbuild. Plain JavaScript so that it runs in
// ~0.3 s without tsx; the service then runs on Node alone (no loader thread, no transpiled sources
// or inline source maps kept in memory; docs/operations.md#starting).
//
// One bundle per entry, dist/src/main.js, dist/src/worker.js and dist/src/first-start.js (the process
// main.js forks to prepare a new embedded data folder): the project's own modules inlined,
// packages left to node_modules (`packages: "external"`: PGlite finds its .wasm beside its own
// module, MikroORM loads its drivers by name). The bundles sit two folders below the project root,
// as src/openapi/*.ts do, so `new URL("../../…", import.meta.url)` finds the same files
// (package.json, gen/descriptors.binpb) from either. No keepNames (it wraps every function in a
// defineProperty call); linked source maps on disk, read only under --enable-source-maps.
// Unchanged outputs are not rewritten, and changed ones are replaced by rename, so a build never
// leaves a half-written file for a service starting beside it.
//
// Then the operator console (console/, served under /console): Vite builds it into dist/console
// when its inputs changed since the last build (scripts/build-console.mjs), and checks that the
// first page stays within its size budget.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { buildConsole } from "./build-console.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(ROOT, "dist");

const started = performance.now();
const result = await build({
  absWorkingDir: ROOT,
  // `--bench`: also the benchmark's floor server (bench/run.ts runs it compiled, like the service).
  entryPoints: ["src/main.ts", "src/worker.ts", "src/first-start.ts", ...(process.argv.includes("--bench") ? ["bench/bare-server.ts"] : [])],
  outbase: ".",
  outdir: OUT,
  bundle: true,
  packages: "external",
  platform: "node",
  format: "esm",
  // A module the service imports only when configured to (carriers/index.ts: the Kannel and SMPP
  // carriers) becomes a chunk of its own, loaded then; without splitting, the bundle would import
  // its packages (smpp) at start in every process. Code shared by the entries goes to chunks too.
  // Chunks sit beside the entries (dist/src/), so their `import.meta.url` paths resolve alike.
  splitting: true,
  chunkNames: "src/[name]-[hash]",
  target: "node22.17",
  sourcemap: "linked",
  sourcesContent: false,
  logLevel: "warning",
  write: false,
});

let written = 0;
for (const file of result.outputFiles) {
  let old;
  try {
    old = readFileSync(file.path);
  } catch {
    old = undefined;
  }
  const contents = asciiOnly(file);
  if (old?.equals(contents)) continue;
  mkdirSync(dirname(file.path), { recursive: true });
  const tmp = `${file.path}.${process.pid}.tmp`;
  writeFileSync(tmp, contents);
  renameSync(tmp, file.path);
  written++;
}
// Chunks are named by their content: those of an older build are no longer imported by any entry.
const outputs = new Set(result.outputFiles.map((f) => f.path));
for (const name of readdirSync(join(OUT, "src"))) {
  const path = join(OUT, "src", name);
  if (/-[A-Z0-9]{8}\.js(\.map)?$/.test(name) && !outputs.has(path)) rmSync(path, { force: true });
}
await buildConsole({ root: ROOT });

if (process.env.BUILD_VERBOSE) {
  const ms = (performance.now() - started).toFixed(0);
  process.stderr.write(`build: ${result.outputFiles.length} files in ${relative(ROOT, OUT)}/, ${written} rewritten, ${ms} ms\n`);
}

/**
 * esbuild escapes non-ASCII characters in strings and identifiers but keeps them in the comments
 * it preserves; one such character makes V8 hold the whole module's source as a two-byte string
 * (twice the memory), so they are escaped too (only comments can still hold them).
 */
function asciiOnly(file) {
  if (!file.path.endsWith(".js") || !/[^\x00-\x7f]/.test(file.text)) return file.contents;
  const text = file.text.replace(/[^\x00-\x7f]/gu, (c) => `\\u{${c.codePointAt(0).toString(16)}}`);
  return Buffer.from(text, "utf8");
}
