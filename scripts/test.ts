/**
 * `npm test`: the whole suite twice, on PGlite, then on PostgreSQL (DATABASE_URL when it names a
 * server, else a throwaway private cluster started here on a free port and removed after). Extra
 * arguments go to vitest in both passes (`npm test -- test/db/schema.test.ts`). The last line sums
 * up both passes; the exit code is non-zero when a pass failed. scripts/system-packages.sh runs
 * before this (package.json).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { postgresBinDir, type PrivatePostgres, startPrivatePostgres } from "../test/support/private-postgres.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const VITEST = join(ROOT, "node_modules", "vitest", "vitest.mjs");
const args = process.argv.slice(2);
const work = mkdtempSync(join(tmpdir(), "switchboard-test-"));

interface PassResult {
  name: string;
  code: number;
  passed: number;
  failed: number;
  /** Test ids (file › full name) by status. */
  skipped: Set<string>;
  ran: Set<string>;
  hasResults: boolean;
}

let child: ReturnType<typeof spawn> | undefined;
let passCount = 0;
let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    interrupted = true;
    child?.kill(signal);
  });
}

async function runPass(name: string, env: NodeJS.ProcessEnv): Promise<PassResult> {
  const out = join(work, `pass-${++passCount}.json`);
  console.log(`\n== npm test: ${name} pass`);
  const code = await new Promise<number>((resolve) => {
    child = spawn(process.execPath, [VITEST, "run", "--reporter=default", "--reporter=json", `--outputFile.json=${out}`, ...args], {
      cwd: ROOT,
      env,
      stdio: "inherit",
    });
    child.on("exit", (c, s) => resolve(c ?? (s ? 1 : 0)));
  });
  child = undefined;
  const result: PassResult = { name, code, passed: 0, failed: 0, skipped: new Set(), ran: new Set(), hasResults: false };
  try {
    const report = JSON.parse(readFileSync(out, "utf8")) as {
      testResults: { name: string; assertionResults: { fullName: string; status: string }[] }[];
    };
    result.hasResults = true;
    for (const file of report.testResults) {
      for (const t of file.assertionResults) {
        const id = `${relative(ROOT, file.name)} › ${t.fullName.replace(/\((pglite|postgres)\)/g, "(engine)")}`;
        if (t.status === "passed") {
          result.passed++;
          result.ran.add(id);
        } else if (t.status === "failed") {
          result.failed++;
          result.ran.add(id);
        } else result.skipped.add(id);
      }
    }
  } catch {
    /* vitest died before writing its report: the exit code says so */
  }
  return result;
}

function summary(r: PassResult): string {
  if (!r.hasResults) return `${r.name}: no results (vitest exit ${r.code})`;
  return `${r.name}: ${r.passed} passed, ${r.failed} failed, ${r.skipped.size} skipped${r.code !== 0 && r.failed === 0 ? ` (vitest exit ${r.code})` : ""}`;
}

async function main(): Promise<number> {
  const passes: PassResult[] = [];
  const base = { ...process.env };
  delete base.DATABASE_URL;
  passes.push(await runPass("PGlite", base));
  if (interrupted) return 130;

  const given = process.env.DATABASE_URL;
  let pg: PrivatePostgres | undefined;
  let url: string | undefined;
  let note = "";
  if (given && /^postgres(ql)?:\/\//i.test(given)) {
    url = given;
    note = " (DATABASE_URL)";
  } else if (postgresBinDir()) {
    pg = await startPrivatePostgres({ maxConnections: 200, noFsync: true });
    url = pg.url();
    note = ` (private cluster on port ${pg.port}, removed after)`;
    console.log(`\n== npm test: PostgreSQL pass on a private cluster, 127.0.0.1:${pg.port}`);
  }
  let pgSkippedWhy = "";
  if (url) {
    try {
      passes.push(await runPass(`PostgreSQL${note}`, { ...base, DATABASE_URL: url }));
    } finally {
      await pg?.dispose();
    }
  } else {
    pgSkippedWhy = "PostgreSQL pass skipped: no DATABASE_URL and no PostgreSQL server binaries (scripts/system-packages.sh named the package)";
    console.log(`\n== npm test: ${pgSkippedWhy}`);
  }
  if (interrupted) return 130;

  // A test skipped in one pass and run in the other (an engine-specific one) ran; one skipped in
  // every pass did not, and is named here.
  const ranAnywhere = new Set(passes.flatMap((p) => [...p.ran]));
  const neverRan = [...new Set(passes.flatMap((p) => [...p.skipped]))].filter((id) => !ranAnywhere.has(id));
  if (neverRan.length > 0) {
    console.log(`\nskipped in every pass (${neverRan.length}):`);
    for (const id of neverRan) console.log(`  ${id}`);
  }
  const ok = passes.every((p) => p.code === 0 && p.hasResults);
  console.log(
    `\nnpm test: ${passes.map(summary).join(" · ")}${pgSkippedWhy ? " · PostgreSQL pass skipped" : ""} · ` +
      `skipped in every pass: ${neverRan.length} · ${ok ? "PASSED" : "FAILED"}`,
  );
  return ok ? 0 : 1;
}

main()
  .then((code) => {
    rmSync(work, { recursive: true, force: true });
    process.exit(code);
  })
  .catch((e: unknown) => {
    console.error(e);
    rmSync(work, { recursive: true, force: true });
    process.exit(1);
  });
