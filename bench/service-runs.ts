/**
 * The Switchboard runs more than one bench mode makes: the REST send run and the dispatcher's
 * drain (bench/run.ts, and bench/growth.ts on an empty and a grown database), the CPU accounting
 * they share, and the writing of results into docs/benchmarks.md. The runs only read a bench
 * database through the indexes a large `messages` table still answers from cheaply (growth puts
 * 10 million rows in it: a count over the whole table per check would be what was measured).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Client } from "pg";
import { type HttpRequestSpec, type LoadResult, type LoadSettings, VARY, wrk } from "./load.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The SMS every run sends: the same sender and text for Kannel and Switchboard, and a recipient
 * that changes with each request (+4477009 and 5 random digits) so that nothing can serve it from
 * a cache (h2load cannot vary its body: gRPC sends to one recipient).
 */
export const SMS = { from: "+447700900001", to: `+4477009${VARY}`, fixedTo: "+447700900123", text: "Hello from the Switchboard benchmark" };

/** The operator token of the services the bench modes start (a bench database only). */
export const BENCH_ADMIN_TOKEN = "bench-admin-token-0123456789abcdefghijklmnop";

/** Figures as the bench's tables print them: whole numbers with thousands separators, or two decimals; "—" for none. */
export const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "—");
export const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "—");

/** What the main bench's settings (bench/run.ts SETTINGS) tell a mode that runs the REST send run. */
export interface RestRunSettings {
  pgUrl: string;
  seconds: number;
  warmup: number;
  connections: number;
  threads: number;
  rounds: number;
  logLevel: string;
}

/** The running service and its bench database, as the runs see them. */
export interface BenchTarget {
  /** A connection to the bench database (the bench's own reads and set-up SQL). */
  db: Client;
  dbName: string;
  servicePid: number;
  accountSid: string;
  propertySid: string;
  /** Before the first send of any run: the runs' messages are created from here on. */
  since: Date;
  log: (s: string) => void;
}

/** A measured run with the CPU it cost. */
export interface Measured {
  result: LoadResult;
  note: string;
  /** CPU of the server processes (the service, Kannel's boxes, the bare server) per request, µs. */
  serverCpuUs?: number;
  /** CPU of the PostgreSQL backends serving the run's database per request, µs. */
  dbCpuUs?: number;
  /** Commits on the run's database per request (group commit shares one among many). */
  commitsPerReq?: number;
}

/** One dispatcher drain: through the environment's carrier, or (routed) two simulator carriers by two routes. */
export interface DispatchRun {
  count: number;
  seconds: number;
  rate: number;
  complete: boolean;
  serverCpuUs: number;
  dbCpuUs: number;
  routed: boolean;
}

export const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** CPU time (user + system) each of a set of processes has used so far, seconds; a process that is gone is left out. */
export function cpuByPid(pids: number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      // Fields after the ")" that ends the command name: utime and stime are the 12th and 13th.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(pid, (Number(f[11]) + Number(f[12])) / CLK_TCK);
    } catch {
      /* gone */
    }
  }
  return out;
}

/** CPU used between two readings: processes seen in both count their difference, new ones all of theirs. */
export function cpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let s = 0;
  for (const [pid, t] of after) s += t - (before.get(pid) ?? 0);
  return s;
}

export function median<T>(items: T[], key: (t: T) => number): T {
  const sorted = [...items].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs: number, log: (s: string) => void): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) {
      log(`${what}: still not done after ${timeoutMs / 1000} s; going on`);
      return false;
    }
    await sleep(250);
  }
  return true;
}

/** Messages the runs stored so far: the bench property's since `since` (a range of messages_property_sid_created_at_idx). */
export async function countStored(t: BenchTarget): Promise<number> {
  const r = await t.db.query("select count(*)::int as n from messages where property_sid = $1 and created_at >= $2", [t.propertySid, t.since]);
  return Number(r.rows[0].n);
}

/** Messages still Scheduled or Processing: `queued` is the queue indexes' predicate, so this reads only them. */
export async function queuedCount(t: BenchTarget): Promise<number> {
  return Number((await t.db.query("select count(*)::int as n from messages where queued")).rows[0].n);
}

export const drainQueue = (t: BenchTarget) => waitUntil("Switchboard queue drain", async () => (await queuedCount(t)) === 0, 120_000, t.log);

/** PostgreSQL backends serving the bench database, the bench's own connection left out. */
export async function dbPids(t: BenchTarget): Promise<number[]> {
  const r = await t.db.query("select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()", [t.dbName]);
  return r.rows.map((row) => Number(row.pid));
}

// Stats are flushed by each backend at most once a second: good enough over a 15 s run.
const commits = async (t: BenchTarget) =>
  Number((await t.db.query("select xact_commit from pg_stat_database where datname = $1", [t.dbName])).rows[0]?.xact_commit ?? 0);

/** Runs one measured load and charges the CPU the servers (and the database) used to it. */
export async function measureLoad(t: BenchTarget, serverPids: number[], withDb: boolean, go: () => Promise<LoadResult>): Promise<Omit<Measured, "note">> {
  const pidsDb0 = withDb ? await dbPids(t) : [];
  const commits0 = withDb ? await commits(t) : 0;
  const cpu0 = cpuByPid(serverPids);
  const db0 = cpuByPid(pidsDb0);
  const result = await go();
  const cpu1 = cpuByPid(serverPids);
  // A backend that ended during the run is lost (the pools keep theirs open).
  const db1 = cpuByPid(withDb ? [...new Set([...pidsDb0, ...(await dbPids(t))])] : []);
  const per = (s: number) => (s * 1e6) / Math.max(1, result.requests);
  const commitsPerReq = withDb ? ((await commits(t)) - commits0) / Math.max(1, result.requests) : undefined;
  return { result, serverCpuUs: per(cpuBetween(cpu0, cpu1)), dbCpuUs: withDb ? per(cpuBetween(db0, db1)) : undefined, commitsPerReq };
}

/**
 * Every run starts from a checkpoint: otherwise whether one that the WAL of earlier runs requested
 * falls inside this run (writing full pages again, flushing buffers) depends on the order of the
 * runs, one of the larger differences between two runs of the same code.
 */
export async function checkpoint(t: BenchTarget): Promise<void> {
  await t.db.query("checkpoint").catch((e: Error) => t.log(`  (checkpoint refused: ${e.message}; runs go on without it)`));
}

/**
 * Runs a measured load whose every answered 200 must be a stored row: `count` reads the rows before
 * and half a second after (answers still in flight when the load stopped), and a 200 without its
 * row counts as an error (gRPC's status travels in trailers, which h2load does not read).
 */
export async function checkedByCount(count: () => Promise<number>, run: () => Promise<Omit<Measured, "note">>, answered: string): Promise<Measured> {
  const before = await count();
  const m = await run();
  await sleep(500);
  const stored = (await count()) - before;
  const ok = m.result.requests - m.result.errors;
  // A few more may be stored than answered: answers still in flight when the load generator stopped.
  if (stored < ok) m.result.errors += ok - stored;
  return { ...m, note: `${stored} stored for ${ok} ${answered}` };
}

/** The REST send run: a warm-up, then the measured wrk run; every 200 must be a stored message. `pids`: the service's processes whose CPU it costs. */
export async function restRun(t: BenchTarget, req: HttpRequestSpec, load: LoadSettings, warm: LoadSettings, pids = [t.servicePid]): Promise<Measured> {
  await drainQueue(t);
  await wrk(req, warm);
  await drainQueue(t);
  return checkedByCount(
    () => countStored(t),
    () => measureLoad(t, pids, true, () => wrk(req, load)),
    "answered 200",
  );
}

/** Inserts `count` messages of the bench property due a second ago, in one statement; `sidTag` (5 characters) keeps drains' Sids apart. */
export async function insertDue(t: BenchTarget, count: number, sidTag: string): Promise<void> {
  await t.db.query(
    `insert into messages (sid, account_sid, property_sid, direction, status, sender_kind, sender, recipient, text, encoding, num_segments, send_at, created_at)
     select $7 || lpad(g::text, 25, '0'), $1, $2, 'Transmit', 'Scheduled', 'E164', $3, $4, $5, 'GSM7', 1, now() - interval '1 second', now()
       from generate_series(1, $6::int) g`,
    [t.accountSid, t.propertySid, SMS.from, SMS.fixedTo, "Dispatcher benchmark", count, `MG${sidTag}`],
  );
}

/**
 * The dispatcher's drain: `count` due messages of the bench property inserted in one statement
 * while the service runs; the time until none is queued gives messages per second handed to the
 * carrier (their delivery reports are applied meanwhile). `sidTag` (5 characters) keeps the Sids
 * of different drains apart.
 */
export async function dispatchRun(t: BenchTarget, count: number, sidTag: string, routed: boolean): Promise<DispatchRun> {
  await insertDue(t, count, sidTag);
  t.log(`dispatcher: ${count} due messages inserted; draining`);
  const t0 = performance.now();
  const pidsDb0 = await dbPids(t);
  const cpu0 = cpuByPid([t.servicePid]);
  const db0 = cpuByPid(pidsDb0);
  const complete = await waitUntil("dispatcher drain", async () => (await queuedCount(t)) === 0, 600_000, t.log);
  const seconds = (performance.now() - t0) / 1000;
  const left = complete ? 0 : await queuedCount(t);
  const done = count - left;
  const perMessage = (s: number) => (s * 1e6) / Math.max(1, done);
  const serverCpuUs = perMessage(cpuBetween(cpu0, cpuByPid([t.servicePid])));
  const dbCpuUs = perMessage(cpuBetween(db0, cpuByPid([...new Set([...pidsDb0, ...(await dbPids(t))])])));
  const run: DispatchRun = { count: done, seconds, rate: done / seconds, complete, serverCpuUs, dbCpuUs, routed };
  t.log(`  dispatcher${routed ? " (two routes)" : ""}: ${run.count} messages in ${seconds.toFixed(2)} s = ${run.rate.toFixed(0)} msg/s`);
  await sleep(1000); // delivery reports of the last ones
  return run;
}

/** SMS Kannel still holds (received or sent but queued, and its store), from bearerbox's status page. */
export async function kannelQueued(k: { adminUrl: string }): Promise<number> {
  const res = await fetch(`${k.adminUrl}/status.txt?password=kannel-admin`).then((r) => r.text());
  const m = /SMS: received \d+ \((\d+) queued\), sent \d+ \((\d+) queued\), store size (-?\d+)/.exec(res);
  return m ? Number(m[1]) + Number(m[2]) + Math.max(0, Number(m[3])) : 0;
}

/** POSTs to the operator API of a running service (test/support/service.ts). */
export { operatorCall as adminCall } from "../test/support/service.js";

/**
 * Writes `results` into docs/benchmarks.md between `<!-- bench:<section>:start -->` and its end
 * marker (the default run's section is "results", under "Latest run"); a section not yet in the
 * file is appended under `heading`.
 */
export function writeBenchmarks(results: string, section = "results", heading = "Latest run"): void {
  const start = `<!-- bench:${section}:start -->`;
  const end = `<!-- bench:${section}:end -->`;
  const path = join(ROOT, "docs", "benchmarks.md");
  const block = `${start}\n${results}${end}`;
  let text = existsSync(path) ? readFileSync(path, "utf8") : `# Benchmarks\n`;
  if (!text.includes(start)) text += `\n## ${heading}\n\n${start}\n${end}\n`;
  text = text.replace(new RegExp(`${start}[\\s\\S]*?${end}`), () => block);
  writeFileSync(path, text);
}

/**
 * The first lines of a mode's results: when, on which commit, the command (with every BENCH_
 * setting given) followed by `note`, and the machine with its load average before and now.
 */
export function benchHeader(started: Date, load0: number[], note = ""): string[] {
  const settings = Object.keys(process.env)
    .filter((k) => k.startsWith("BENCH_"))
    .map((k) => `${k}=${process.env[k]}`);
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(" ");
  return [
    `- When: ${started.toISOString()}; commit ${benchCommit()}`,
    `- Command: \`${[...settings, "npm run bench"].join(" ")}\`${note ? ` ${note}` : ""}`,
    `- Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; load average ${load(load0)} before, ${load(loadavg())} after`,
  ];
}

/** The commit the bench runs, marked when src/ has uncommitted changes. */
export function benchCommit(): string {
  try {
    let commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
    if (execFileSync("git", ["status", "--porcelain", "--", "src"], { cwd: ROOT, encoding: "utf8" }).trim()) commit += " (+ uncommitted changes in src/)";
    return commit;
  } catch {
    return "unknown"; // not a git checkout
  }
}
