/**
 * `npm run bench`: Switchboard on PostgreSQL against Kannel (spool store, fakesmsc as SMSC) on
 * this machine, in one run, with the same load generator; prints the table and writes it into
 * docs/benchmarks.md. Settings (environment): see SETTINGS below and docs/benchmarks.md.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { MessagingService, SendMessageRequestSchema } from "../gen/switchboard/v2/messaging_pb.js";
import { freePort, startKannel, type RunningKannel } from "../test/support/kannel.js";
import { BUILT_MAIN, buildService, npmStartFlags } from "../test/support/service.js";
import { preparePrepaid } from "./billing-bench.js";
import { prepareSmppServer, smppServerRun, smppServerSettings } from "./smpp-server-bench.js";
import { dispatchFloors, type FloorRun, floorRows } from "./dispatch-floor.js";
import { GRPC_FLOORS, grpcFloorRuns } from "./grpc-floor-runs.js";
import { grpcFrame, h2load, type HttpRequestSpec, type LoadResult, type LoadSettings, VARY, wrk } from "./load.js";
import {
  adminCall as operatorCall,
  type BenchTarget,
  benchCommit,
  checkpoint,
  checkedByCount,
  countStored,
  type DispatchRun,
  dispatchRun,
  drainQueue,
  kannelQueued,
  type Measured,
  measureLoad,
  median,
  restRun,
  SMS,
  waitUntil,
  writeBenchmarks,
} from "./service-runs.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const env = process.env;
const num = (name: string, def: number) => (env[name] === undefined || env[name] === "" ? def : Number(env[name]));

/** Every knob, from the environment. */
const SETTINGS = {
  /** Measured seconds per run. */
  seconds: num("BENCH_SECONDS", 15),
  /** Warm-up seconds before each measured run (same load, not counted). */
  warmup: num("BENCH_WARMUP", 5),
  connections: num("BENCH_CONNECTIONS", 50),
  /** wrk and h2load threads. */
  threads: num("BENCH_THREADS", 1),
  /** Rounds of the Kannel / REST / bare / gRPC runs; the table shows each target's median round. */
  rounds: num("BENCH_ROUNDS", 1),
  /** Due messages the dispatcher drains (0 skips that part). */
  dispatch: num("BENCH_DISPATCH_MESSAGES", 100_000),
  /** The PostgreSQL server; a database is created on it for the run and dropped after. */
  pgUrl: env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres",
  /** LOG_LEVEL of the service; Kannel runs at the matching level (warning). */
  logLevel: env.BENCH_LOG_LEVEL ?? "warn",
  /** Extra node flags for the service, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof". */
  nodeFlags: (env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean),
  /** Write the results into docs/benchmarks.md (0 to only print). */
  write: env.BENCH_WRITE !== "0",
  /** Which runs: any of idle,kannel,rest,prepaid,smpp-server,grpc,bare,floor,dispatch,dispatch-routes,soak (prepaid, smpp-server, soak and dispatch-routes are not in the default set; smpp-server is the SMPP server's submit_sm in the rest rounds, bench/smpp-server-bench.ts); or smpp alone (bench/smpp.ts); or smpp-tps alone (a carrier's Tps over three worker processes, bench/smpp.ts); or read-flood and/or webhook-flood (bench/hostile.ts); or rapid-reset alone (bench/rapid-reset-run.ts); or purge alone (bench/purge.ts); or life alone (bench/life.ts); or growth alone (bench/growth.ts); or split alone (bench/split.ts); or latency alone (open-loop latency at fixed rates, bench/latency.ts, its settings BENCH_LATENCY_*). */
  only: new Set((env.BENCH_ONLY ?? "idle,kannel,rest,grpc,bare,floor,dispatch").split(",").map((s) => s.trim())),
  /** Seconds after /readyz first answers at which the idle service's resident set is read. */
  idleSeconds: num("BENCH_IDLE_SECONDS", 20),
  /** Length of the soak, seconds (printed and judged per minute). */
  soakSeconds: num("BENCH_SOAK_SECONDS", 600),
  /** Soak rate as a share of the REST maximum measured in the same run (or just before the soak). */
  soakShare: num("BENCH_SOAK_SHARE", 0.7),
  /**
   * BENCH_SHARED_LIMITS (issue 31): 1 runs the service with the deployment-wide request rate on, set
   * high enough never to refuse (SEND_RATE_LIMIT below), its buckets in PostgreSQL; `redis` puts
   * them in the Redis of BENCH_REDIS_URL (default redis://127.0.0.1:6379). Unset: the limit off.
   */
  sharedLimits: env.BENCH_SHARED_LIMITS === "redis" ? "redis" : env.BENCH_SHARED_LIMITS === "1" ? "postgres" : undefined,
};

/** SEND_RATE_LIMIT of a run with BENCH_SHARED_LIMITS: segments per second far above any load of this machine. */
const SHARED_LIMIT_RATE = 1_000_000;

/** The service's request-rate settings: off, or on and never refusing (BENCH_SHARED_LIMITS). */
function rateLimitEnv(): Record<string, string> {
  if (!SETTINGS.sharedLimits) return { SEND_RATE_LIMIT: "off" };
  return {
    SEND_RATE_LIMIT: String(SHARED_LIMIT_RATE),
    ...(SETTINGS.sharedLimits === "redis" ? { REDIS_URL: env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379" } : {}),
  };
}

/** The service's node arguments: `npm start`'s (its compiled entry), with BENCH_NODE_FLAGS before the entry. */
const SERVICE_ARGS = [...npmStartFlags(), ...SETTINGS.nodeFlags, BUILT_MAIN];
/**
 * The floor's server, compiled like the service (`--bench` adds it to the build) so that the
 * comparison stays fair; with node's default flags, as the floor has been measured since issue 14
 * set its targets (npm start's flags, tried in session 8, raised the floor's CPU per request
 * from ~35 to ~45 µs and so would flatter the ratio: docs/benchmarks.md).
 */
const BARE_ARGS = ["dist/bench/bare-server.js"];

const ADMIN_TOKEN = `bench-admin-${randomBytes(12).toString("hex")}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (s: string) => process.stderr.write(`[bench] ${s}\n`);

interface Child {
  proc: ChildProcess;
  out: string[];
  exited: Promise<number | null>;
}

function startChild(name: string, args: string[], childEnv: Record<string, string>): Child {
  const proc = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...childEnv }, stdio: ["ignore", "pipe", "pipe"] });
  const out: string[] = [];
  const keep = (s: string) => {
    out.push(s);
    if (out.length > 200) out.shift();
  };
  proc.stdout!.setEncoding("utf8").on("data", keep);
  proc.stderr!.setEncoding("utf8").on("data", keep);
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  void exited.then((code) => log(`${name} exited (${code})`));
  return { proc, out, exited };
}

async function stopChild(c: Child | undefined): Promise<void> {
  if (!c || c.proc.exitCode !== null || c.proc.signalCode !== null) return;
  c.proc.kill("SIGTERM");
  const done = await Promise.race([c.exited.then(() => true), sleep(15_000).then(() => false)]);
  if (!done) {
    c.proc.kill("SIGKILL");
    await c.exited;
  }
}

async function waitHttp(url: string, what: string, child: Child, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (res.status < 500) return;
    } catch {
      /* not yet */
    }
    if (child.proc.exitCode !== null || Date.now() > deadline) throw new Error(`${what} did not start:\n${child.out.join("")}`);
    await sleep(200);
  }
}

/** Processes whose command line contains `needle` (e.g. Kannel's boxes, by their config path). */
function pidsWith(needle: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").includes(needle)) out.push(Number(name));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Peak resident memory of a process (VmHWM), MiB. */
function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Current resident memory of a process (VmRSS), MiB. */
function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** One idle reading of the service on the embedded default (a PGlite data folder). */
interface IdleStart {
  rssMiB: number;
  peakMiB: number;
  /** From spawning the node process to /readyz's first 200. */
  readyMs: number;
}

/** Idle memory on the embedded default: issue 32's figure is the first start's, on a new data folder. */
interface IdleMemory {
  first: IdleStart;
  second: IdleStart;
}

/**
 * The service on the embedded default, as a first-time user runs it: started on a new PGlite data
 * folder (which creates and seeds it), then stopped and started again on the same folder; the
 * resident set of the node process is read `idleSeconds` after /readyz first answers, each time.
 */
async function measureIdle(): Promise<IdleMemory> {
  const dir = mkdtempSync(join(tmpdir(), "sb-bench-idle-"));
  const start = async (): Promise<IdleStart> => {
    const port = await freePort();
    const t0 = performance.now();
    const c = startChild("switchboard (embedded)", SERVICE_ARGS, {
      DATABASE_URL: join(dir, "data"),
      PORT: String(port),
      HOST: "127.0.0.1",
      SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN,
      LOG_LEVEL: SETTINGS.logLevel,
      CARRIER: "simulator",
    });
    try {
      await waitHttp(`http://127.0.0.1:${port}/readyz`, "Switchboard (embedded)", c, 120_000);
      const readyMs = performance.now() - t0;
      await sleep(SETTINGS.idleSeconds * 1000);
      return { rssMiB: rssMiB(c.proc.pid!), peakMiB: peakRssMiB(c.proc.pid!), readyMs };
    } finally {
      await stopChild(c);
    }
  };
  try {
    return { first: await start(), second: await start() };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One minute of the soak. */
interface SoakMinute {
  minute: number;
  rps: number;
  p99Ms: number;
  errors: number;
  rssMiB: number;
}

/** The soak: REST sends at a share of the measured maximum for a long time, judged minute by minute. */
interface Soak {
  targetRps: number;
  minutes: SoakMinute[];
  /** RSS of the last minute against minute 1's, and the largest after minute 1. */
  rssGrowth: number;
  /** Worst p99 after minute 1 against minute 1's. */
  p99Ratio: number;
}

function version(cmd: string, args: string[], pattern: RegExp): string {
  try {
    const out = execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    return pattern.exec(out)?.[1] ?? out.split("\n")[0];
  } catch (e) {
    const out = `${(e as { stdout?: string }).stdout ?? ""}${(e as { stderr?: string }).stderr ?? ""}`;
    return pattern.exec(out)?.[1] ?? "unknown";
  }
}

interface Row {
  name: string;
  result?: LoadResult;
  serverCpuUs?: number;
  dbCpuUs?: number;
  /** A note on the row, e.g. how the outcome was checked. */
  note: string;
}

/**
 * Each wrk connection sends, reads the answer, then waits `delayMs`: the rate is about
 * connections / (latency + delay). A warm-up at the target sets the delay, and each minute
 * corrects it from the latency the minute before showed.
 */
async function runSoak(req: HttpRequestSpec, load: LoadSettings, maxRps: number, pid: number): Promise<Soak> {
  const targetRps = maxRps * SETTINGS.soakShare;
  const minuteSeconds = Math.min(60, SETTINGS.soakSeconds);
  const count = Math.max(1, Math.round(SETTINGS.soakSeconds / minuteSeconds));
  const perConnectionMs = (load.connections * 1000) / targetRps;
  let delayMs = perConnectionMs;
  const correct = (r: LoadResult) => {
    const latencyMs = Math.max(0, (load.connections * 1000) / Math.max(1, r.rps) - delayMs);
    delayMs = Math.max(0, perConnectionMs - latencyMs);
  };
  log(`soak: ${count} × ${minuteSeconds} s of REST sends at ${f0(targetRps)} req/s (${(SETTINGS.soakShare * 100).toFixed(0)} % of ${f0(maxRps)})`);
  correct(await wrk(req, { ...load, seconds: Math.max(5, SETTINGS.warmup), delayMs }));
  const minutes: SoakMinute[] = [];
  for (let minute = 1; minute <= count; minute++) {
    const r = await wrk(req, { ...load, seconds: minuteSeconds, delayMs });
    const m: SoakMinute = { minute, rps: r.rps, p99Ms: r.p99Ms, errors: r.errors, rssMiB: rssMiB(pid) };
    minutes.push(m);
    log(`  soak minute ${minute}: ${f0(m.rps)} req/s, p99 ${f2(m.p99Ms)} ms, errors ${m.errors}, RSS ${f0(m.rssMiB)} MiB (load ${loadavg()[0].toFixed(2)})`);
    correct(r);
  }
  const first = minutes[0];
  const later = minutes.slice(1);
  const rssGrowth = later.length ? Math.max(...later.map((m) => m.rssMiB)) / first.rssMiB - 1 : 0;
  const p99Ratio = later.length ? Math.max(...later.map((m) => m.p99Ms)) / first.p99Ms : 1;
  return { targetRps, minutes, rssGrowth, p99Ratio };
}

async function main(): Promise<void> {
  if (SETTINGS.only.has("rapid-reset")) {
    // An HTTP/2 rapid-reset flood against the compiled service (bench/rapid-reset-run.ts); prints only.
    const { benchRapidReset } = await import("./rapid-reset-run.js");
    process.stdout.write(
      `${await benchRapidReset(log, { pgUrl: SETTINGS.pgUrl, seconds: num("BENCH_RESET_SECONDS", 10), logLevel: SETTINGS.logLevel, mode: env.BENCH_RESET_MODE === "authenticated" ? "authenticated" : "anonymous" })}\n`,
    );
    return;
  }
  if (SETTINGS.only.has("read-flood") || SETTINGS.only.has("webhook-flood")) {
    // Hostile load (issue 27): the read gate and per-account webhook slots (bench/hostile.ts); prints only.
    const { benchHostile } = await import("./hostile.js");
    process.stdout.write(`${await benchHostile(SETTINGS.only, log)}\n`);
    return;
  }
  if (SETTINGS.only.has("purge")) {
    // Retention (issue 33): REST send latency with and without a purge of expired messages running, the purge's rate, table sizes (bench/purge.ts); prints only.
    const { benchPurge } = await import("./purge.js");
    process.stdout.write(`${await benchPurge(log)}\n`);
    return;
  }
  if (SETTINGS.only.has("life")) {
    // A message's whole life in PostgreSQL, per message, on a private cluster (issue 32, bench/life.ts).
    const { benchLife } = await import("./life.js");
    process.stdout.write(`${await benchLife(log, { write: SETTINGS.write })}\n`);
    return;
  }
  if (SETTINGS.only.has("latency")) {
    // Latency at fixed offered load, open loop (issue 46, bench/latency.ts); writes its own section of docs/benchmarks.md.
    const { benchLatency, latencySettings } = await import("./latency.js");
    const { pgUrl, logLevel, write } = SETTINGS;
    process.stdout.write(`\n${await benchLatency(log, latencySettings(env, { pgUrl, logLevel, write }))}\n`);
    return;
  }
  if (SETTINGS.only.has("split")) {
    // REST with delivery in the API's process and in a worker process beside it, alternating (issue 32, bench/split.ts); prints only.
    const { benchSplit } = await import("./split.js");
    const { pgUrl, seconds, warmup, connections, threads, rounds, logLevel } = SETTINGS;
    process.stdout.write(`${await benchSplit(log, { pgUrl, seconds, warmup, connections, threads, rounds, logLevel })}\n`);
    return;
  }
  if (SETTINGS.only.has("growth")) {
    // The REST and dispatcher runs on an empty database and on one holding BENCH_GROWTH_ROWS messages (issue 32, bench/growth.ts).
    const { benchGrowth } = await import("./growth.js");
    const { pgUrl, seconds, warmup, connections, threads, rounds, dispatch, logLevel, write } = SETTINGS;
    process.stdout.write(`${await benchGrowth(log, { pgUrl, seconds, warmup, connections, threads, rounds, dispatch, logLevel, write })}\n`);
    return;
  }
  if (SETTINGS.only.has("smpp-tps")) {
    // A carrier's Tps over three worker processes against one SMSC (issue 31, bench/smpp.ts); prints only.
    const { benchSmppTps } = await import("./smpp.js");
    process.stdout.write(`${await benchSmppTps(log)}\n`);
    return;
  }
  if (SETTINGS.only.has("smpp")) {
    // The SMPP carrier's pacing against the Perl SMSC, in-process (bench/smpp.ts); prints only.
    const { benchSmpp } = await import("./smpp.js");
    process.stdout.write(`${await benchSmpp(log)}\n`);
    return;
  }
  // npm start's build step; `--bench` compiles bench/bare-server.ts beside the service.
  buildService("--bench");
  const started = new Date();
  const load0 = loadavg();
  const dbName = `sb_bench_${process.pid}_${randomBytes(3).toString("hex")}`;
  const serverUrl = new URL(SETTINGS.pgUrl);
  const dbUrl = new URL(SETTINGS.pgUrl);
  dbUrl.pathname = `/${dbName}`;
  const admin = new pg.Client({ connectionString: serverUrl.toString() });
  await admin.connect();
  await admin.query(`create database "${dbName}"`);
  log(`database ${dbName} created`);

  let service: Child | undefined;
  let bare: Child | undefined;
  let kannel: RunningKannel | undefined;
  let db: InstanceType<typeof pg.Client> | undefined;
  const cleanup = async () => {
    await stopChild(service);
    await stopChild(bare);
    await kannel?.stop().catch(() => undefined);
    await db?.end().catch(() => undefined);
    await admin.query(`drop database if exists "${dbName}" with (force)`).catch((e) => log(`drop database failed: ${e}`));
    await admin.end().catch(() => undefined);
  };
  process.once("SIGINT", () => void cleanup().finally(() => process.exit(130)));

  try {
    // First, before any load: the idle service on the embedded default (its own data folder).
    let idle: IdleMemory | undefined;
    if (SETTINGS.only.has("idle")) {
      log(`idle memory: embedded default, ${SETTINGS.idleSeconds} s after /readyz on its first start (new data folder), then its second`);
      idle = await measureIdle();
      for (const [name, s] of [
        ["first", idle.first],
        ["second", idle.second],
      ] as const) {
        log(`  idle, ${name} start: ${s.rssMiB.toFixed(0)} MiB resident (peak ${s.peakMiB.toFixed(0)} MiB), /readyz after ${(s.readyMs / 1000).toFixed(1)} s`);
      }
    }
    const load: LoadSettings = { connections: SETTINGS.connections, threads: SETTINGS.threads, seconds: SETTINGS.seconds };
    const warm: LoadSettings = { ...load, seconds: SETTINGS.warmup };

    // Switchboard as `npm start` runs it (dist/src/main.js: HTTP API and delivery engine with the
    // simulator carrier in one process), on PostgreSQL; with `smpp-server`, its SMPP server on too.
    const port = await freePort();
    const smppSettings = SETTINGS.only.has("smpp-server") ? smppServerSettings(env) : undefined;
    const smppPort = smppSettings ? await freePort() : undefined;
    const base = `http://127.0.0.1:${port}`;
    service = startChild("switchboard", SERVICE_ARGS, {
      DATABASE_URL: dbUrl.toString(),
      PORT: String(port),
      HOST: "127.0.0.1",
      SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN,
      LOG_LEVEL: SETTINGS.logLevel,
      CARRIER: "simulator",
      // The per-account send rate limit (default 50/s) would answer most of this load with 429:
      // the throughput test measures sending, so the limiter is off (docs/benchmarks.md says so),
      // or on and set far above the load (BENCH_SHARED_LIMITS: what the shared buckets cost).
      ...rateLimitEnv(),
      // The SMPP server's submit_sm run (issue 44): it goes through the same send pipeline, so the
      // same SEND_RATE_LIMIT=off keeps it from being answered ESME_RTHROTTLED.
      ...(smppPort !== undefined ? { SMPP_SERVER_PORT: String(smppPort) } : {}),
    });
    await waitHttp(`${base}/readyz`, "Switchboard", service);
    log(`Switchboard listening on ${base} (pid ${service.proc.pid})`);

    const adminCall = operatorCall(base, ADMIN_TOKEN);
    const account = await adminCall("/admin/v1/Accounts", { Name: "Bench", SmsEnabled: true });
    const property = await adminCall(`/admin/v1/Accounts/${account.AccountSid}/Properties`, { Name: "Bench", SmsEnabled: true });
    await adminCall("/admin/v1/Numbers", { Number: SMS.from, AccountSid: account.AccountSid });
    const auth = `Basic ${Buffer.from(`${account.AccountSid}:${account.Token}`).toString("base64")}`;

    db = new pg.Client({ connectionString: dbUrl.toString() });
    await db.connect();
    await db.query(
      "create table bench_bare (sid varchar(32) primary key, sender varchar(32) not null, recipient varchar(32) not null, text text not null, created_at timestamptz not null)",
    );
    // The consent controls' cost (issue 29): BENCH_OPTOUTS numbers on the account's opt-out list (none
    // of them a bench recipient) and its AllowedCountries (BENCH_ALLOWED_COUNTRIES, e.g. GB).
    const optOuts = num("BENCH_OPTOUTS", 0);
    if (optOuts > 0) {
      await db.query(
        "insert into opt_outs (account_sid, number, source, created_at) select $1, '+614' || lpad(g::text, 8, '0'), 'Api', now() from generate_series(1, $2) g",
        [account.AccountSid, optOuts],
      );
      await db.query("analyze opt_outs");
      log(`${optOuts} opt-outs on the bench account`);
    }
    // Billing's cost on the send (issue 43): BENCH_BILLING=prepaid|postpaid prices every send (a card
    // with a rate for every country code) and charges it; prepaid from a balance that never runs out.
    const billing = env.BENCH_BILLING ?? "";
    if (billing !== "") {
      if (billing !== "prepaid" && billing !== "postpaid") throw new Error(`BENCH_BILLING must be prepaid or postpaid; got ${billing}`);
      const rates = Array.from({ length: 9 }, (_, d) => ({ Prefix: `+${d + 1}`, PricePerSegment: "0.0525" }));
      await adminCall("/admin/v1/RateCards/bench", { Rates: rates }, "PUT");
      await db.query("update accounts set rate_card = 'bench', billing_mode = $2 where sid = $1", [
        account.AccountSid,
        billing === "prepaid" ? "Prepaid" : "Postpaid",
      ]);
      await db.query(
        `with b as (insert into account_balances (account_sid, balance, updated_at) values ($1, 1000000000000000, now()) returning balance)
         insert into balance_entries (account_sid, type, amount, balance_after, reference, created_at) select $1, 'TopUp', b.balance, b.balance, 'bench', now() from b`,
        [account.AccountSid],
      );
      log(`every send priced at 0.0525 and charged (${billing})`);
    }
    const allowedCountries = (env.BENCH_ALLOWED_COUNTRIES ?? "").split(",").filter(Boolean);
    if (allowedCountries.length > 0) await adminCall(`/admin/v1/Accounts/${account.AccountSid}`, { AllowedCountries: allowedCountries });
    const target: BenchTarget = {
      db,
      dbName,
      servicePid: service.proc.pid!,
      accountSid: account.AccountSid,
      propertySid: property.PropertySid,
      since: started,
      log,
    };

    const barePort = await freePort();
    const floorPorts = { BARE_H2_PORT: await freePort(), BARE_CONNECT_PORT: await freePort() };
    bare = startChild("bare", BARE_ARGS, {
      BARE_DATABASE_URL: dbUrl.toString(),
      BARE_PORT: String(barePort),
      BARE_H2_PORT: String(floorPorts.BARE_H2_PORT),
      BARE_CONNECT_PORT: String(floorPorts.BARE_CONNECT_PORT),
    });
    await waitHttp(`http://127.0.0.1:${barePort}/`, "bare server", bare);

    if (SETTINGS.only.has("kannel")) {
      kannel = await startKannel({ callbackBaseUrl: "http://127.0.0.1:9", secret: "bench", logLevel: 2, timeoutMs: 60_000 });
      log(`Kannel sendsms at ${kannel.sendsmsUrl}`);
    }

    const restReq = {
      url: `${base}/v2/Properties/${property.PropertySid}/Messages`,
      method: "POST" as const,
      headers: { authorization: auth, "content-type": "application/json" },
      body: JSON.stringify({ From: SMS.from, To: SMS.to, Text: SMS.text }),
    };
    const sanity = await fetch(restReq.url, { ...restReq, body: restReq.body.replace(VARY, "12345") });
    if (sanity.status !== 200) throw new Error(`REST send failed: ${sanity.status} ${await sanity.text()}`);

    // gRPC: one real client call first (h2load sees only HTTP status, not grpc-status).
    const grpcClient = createClient(MessagingService, createGrpcTransport({ baseUrl: base }));
    const sent = await grpcClient.sendMessage(
      { propertySid: property.PropertySid, from: SMS.from, to: SMS.fixedTo, text: SMS.text },
      { headers: { authorization: auth } },
    );
    if (!sent.messageSid) throw new Error("gRPC send returned no MessageSid");
    const grpcReq = {
      url: `${base}/switchboard.v2.MessagingService/SendMessage`,
      body: grpcFrame(
        toBinary(
          SendMessageRequestSchema,
          create(SendMessageRequestSchema, { propertySid: property.PropertySid, from: SMS.from, to: SMS.fixedTo, text: SMS.text }),
        ),
      ),
      headers: { authorization: auth },
    };
    const kannelReq = {
      url: `${kannel?.sendsmsUrl}?username=switchboard&password=switchboard&from=${encodeURIComponent(SMS.from)}&to=${encodeURIComponent(SMS.to)}&text=${encodeURIComponent(SMS.text)}`,
      method: "GET" as const,
    };
    const bareReq = {
      url: `http://127.0.0.1:${barePort}/bare/Messages`,
      method: "POST" as const,
      headers: { "content-type": "application/json" },
      body: restReq.body,
    };

    const floorReq = { ...bareReq, url: `http://127.0.0.1:${barePort}/bare/Batched` };

    const drainSwitchboard = () => drainQueue(target);
    const drainKannel = () => (kannel ? waitUntil("Kannel queue drain", async () => (await kannelQueued(kannel!)) === 0, 120_000, log) : Promise.resolve(true));

    const measure = (serverPids: number[], withDb: boolean, go: () => Promise<LoadResult>) => measureLoad(target, serverPids, withDb, go);
    const servicePid = service.proc.pid!;
    const barePid = bare.proc.pid!;

    const results: Record<string, Measured[]> = {
      kannel: [],
      rest: [],
      prepaid: [],
      "smpp-server": [],
      grpc: [],
      bare: [],
      floor: [],
      "floor-h2": [],
      "floor-connect": [],
    };
    const pick = (key: string) => (results[key].length ? median(results[key], (r) => r.result.rps) : undefined);
    const runs: { key: string; go: () => Promise<Measured> }[] = [];
    if (kannel) {
      runs.push({
        key: "kannel",
        go: async () => {
          await drainKannel();
          await wrk(kannelReq, warm);
          await drainKannel();
          const m = await measure(pidsWith(kannel!.dir), false, () => wrk(kannelReq, load));
          return { ...m, note: "" };
        },
      });
    }
    if (SETTINGS.only.has("rest")) {
      runs.push({ key: "rest", go: () => restRun(target, restReq, load, warm) });
    }
    // The prepaid account on a 100,000-rate card, in the same rounds as `rest` (bench/billing-bench.ts).
    const prepaid = SETTINGS.only.has("prepaid") ? await preparePrepaid(base, ADMIN_TOKEN, target) : undefined;
    if (prepaid) runs.push({ key: "prepaid", go: () => restRun(prepaid.target, prepaid.request, load, warm) });
    // The SMPP server's submit_sm, the bench account bound as a transmitter, in the same rounds as `rest` (bench/smpp-server-bench.ts).
    const smppServer = smppSettings ? await prepareSmppServer(base, ADMIN_TOKEN, target, smppPort!, smppSettings) : undefined;
    if (smppServer) runs.push({ key: "smpp-server", go: () => smppServerRun(smppServer, load, warm) });
    // The bare server's two routes: one INSERT per request, and group commit (the floor).
    for (const [key, req] of [
      ["bare", bareReq],
      ["floor", floorReq],
    ] as const) {
      if (!SETTINGS.only.has(key)) continue;
      runs.push({
        key,
        go: async () => {
          await drainSwitchboard();
          await wrk(req, warm);
          return { ...(await measure([barePid], true, () => wrk(req, load))), note: "" };
        },
      });
    }
    if (SETTINGS.only.has("grpc")) {
      runs.push({
        key: "grpc",
        go: async () => {
          await drainSwitchboard();
          await h2load(grpcReq, warm);
          await drainSwitchboard();
          return checkedByCount(
            () => countStored(target),
            () => measure([servicePid], true, () => h2load(grpcReq, load)),
            "HTTP 200 (grpc-status checked by count)",
          );
        },
      });
    }
    // The gRPC floors (bench/grpc-floor-runs.ts): with `floor` or `grpc`, the service's gRPC request against the bare server.
    const floorRun = {
      target,
      ports: floorPorts,
      grpcReq,
      load,
      warm,
      settle: drainSwitchboard,
      measure: (go: () => Promise<LoadResult>) => measure([barePid], true, go),
    };
    runs.push(...(await grpcFloorRuns({ only: SETTINGS.only, ...floorRun })));
    for (let round = 0; round < SETTINGS.rounds; round++) {
      for (const r of runs) {
        const width =
          r.key === "smpp-server" && smppServer
            ? `window ${smppServer.settings.window} over ${smppServer.settings.binds} bind(s)`
            : `${SETTINGS.connections} connections`;
        log(`round ${round + 1}/${SETTINGS.rounds}: ${r.key} (${SETTINGS.warmup} s warm-up + ${SETTINGS.seconds} s, ${width})`);
        await checkpoint(target);
        const out = await r.go();
        log(
          `  ${r.key}: ${out.result.rps.toFixed(0)} req/s, p50 ${out.result.p50Ms.toFixed(2)} ms, p99 ${out.result.p99Ms.toFixed(2)} ms, errors ${out.result.errors}, ` +
            `server CPU ${out.serverCpuUs?.toFixed(0)} µs/req, db CPU ${out.dbCpuUs?.toFixed(0) ?? "-"} µs/req, ${out.commitsPerReq?.toFixed(3) ?? "-"} commits/req ${out.note}`,
        );
        results[r.key].push(out);
      }
    }

    // Dispatcher: N due messages inserted at once, drained by the running service to the simulator.
    // BENCH_ONLY=dispatch-routes: the same drain again, through the carrier router with two routes and
    // two simulator carriers (issue 30: at least 0.9 × the single-carrier figure of the same run).
    const dispatches: DispatchRun[] = [];
    const modes = [...(SETTINGS.only.has("dispatch") ? [false] : []), ...(SETTINGS.only.has("dispatch-routes") ? [true] : [])];
    for (const routed of SETTINGS.dispatch > 0 ? modes : []) {
      await drainSwitchboard();
      if (routed) {
        const a = await adminCall("/admin/v1/Carriers", { Name: "bench-sim-a", Kind: "simulator", Url: "simulator://" });
        const b = await adminCall("/admin/v1/Carriers", { Name: "bench-sim-b", Kind: "simulator", Url: "simulator://" });
        const res = await fetch(`${base}/admin/v1/Routes`, {
          method: "PUT",
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({
            Routes: [
              { Prefix: SMS.fixedTo.slice(0, 3), Carriers: [a.CarrierSid, b.CarrierSid], Strategy: "RoundRobin" },
              { Carriers: [a.CarrierSid], Strategy: "Failover" },
            ],
          }),
        });
        if (res.status !== 200) throw new Error(`PUT /admin/v1/Routes: ${res.status} ${await res.text()}`);
        log("dispatcher: two simulator carriers, two routes (RoundRobin by prefix, then a catch-all)");
      }
      dispatches.push(await dispatchRun(target, SETTINGS.dispatch, routed ? "BENCR" : "BENCH", routed));
    }
    const dispatch = dispatches.find((d) => !d.routed) ?? dispatches[0];
    const dispatchRoutes = dispatches.find((d) => d.routed);

    // The soak: REST sends at a share of the maximum, one wrk run per minute.
    let soak: Soak | undefined;
    if (SETTINGS.only.has("soak") && SETTINGS.soakSeconds > 0) {
      await drainSwitchboard();
      let max = pick("rest")?.result.rps;
      if (max === undefined) {
        log("soak: measuring the REST maximum first (10 s)");
        await wrk(restReq, warm);
        max = (await wrk(restReq, { ...load, seconds: 10 })).rps;
      }
      soak = await runSoak(restReq, load, max, servicePid);
    }

    const peakMiB = peakRssMiB(service.proc.pid!);
    // How many of the run's message updates PostgreSQL could make heap-only (no index entries).
    await db.query("select pg_stat_force_next_flush()").catch(() => undefined);
    await sleep(1500); // backends flush their table counters at most once a second
    const t = (await db.query("select n_tup_ins, n_tup_upd, n_tup_hot_upd from pg_stat_user_tables where relname = 'messages'")).rows[0] as
      Record<string, string> | undefined;
    const messageWrites = t ? { inserts: Number(t.n_tup_ins), updates: Number(t.n_tup_upd), hot: Number(t.n_tup_hot_upd) } : undefined;
    // The dispatcher's floor on the same database (bench/dispatch-floor.ts): the service stopped first.
    const floors =
      SETTINGS.only.has("dispatch") && SETTINGS.dispatch > 0 ? await dispatchFloors(target, dbUrl.toString(), SETTINGS.dispatch, () => stopChild(service)) : [];
    const load1 = loadavg();
    const pgVersion = (await db.query("show server_version")).rows[0].server_version as string;

    const k = pick("kannel");
    const rows: Row[] = [
      { name: "Kannel sendsms, spool store (peer)", ...(k ?? { note: "not run" }) },
      { name: "Switchboard REST Send SMS (PostgreSQL, durable)", ...(pick("rest") ?? { note: "not run" }) },
      { name: "Switchboard gRPC Send SMS (h2c)", ...(pick("grpc") ?? { note: "not run" }) },
      { name: "Bare ceiling: Fastify route, one INSERT", ...(pick("bare") ?? { note: "not run" }) },
      { name: "Floor with group commit: Fastify route, batched INSERT", ...(pick("floor") ?? { note: "not run" }) },
      ...GRPC_FLOORS.map(({ key, name }) => ({ name, ...(pick(key) ?? { note: "not run" }) })),
      ...(prepaid
        ? [{ name: `Switchboard REST Send SMS, Prepaid, priced by a ${f0(prepaid.rates)}-rate card`, ...(pick("prepaid") ?? { note: "not run" }) }]
        : []),
      ...(smppServer
        ? [
            {
              name: `Switchboard SMPP submit_sm, window ${smppServer.settings.window} over ${smppServer.settings.binds} transmitter bind(s)`,
              ...(pick("smpp-server") ?? { note: "not run" }),
            },
          ]
        : []),
    ];
    const report = renderReport({
      rows,
      prepaid: prepaid && { importSeconds: prepaid.importSeconds, rates: prepaid.rates, result: pick("prepaid")?.result },
      smppServer: smppServer && { window: smppServer.settings.window, result: pick("smpp-server")?.result },
      kannel: k?.result,
      dispatch,
      dispatchRoutes,
      floors,
      peakMiB,
      idle,
      soak,
      messageWrites,
      started,
      load0,
      load1,
      pgVersion,
      dbName,
    });
    process.stdout.write(`\n${report.table}\n\n${report.targets}\n`);
    if (SETTINGS.write) {
      writeBenchmarks(report.full);
      log("results written to docs/benchmarks.md");
    }
  } finally {
    await cleanup();
  }
}

const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "—");
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "—");

function renderReport(r: {
  rows: Row[];
  prepaid?: { importSeconds: number; rates: number; result?: LoadResult };
  smppServer?: { window: number; result?: LoadResult };
  kannel?: LoadResult;
  dispatch?: DispatchRun;
  dispatchRoutes?: DispatchRun;
  floors: FloorRun[];
  peakMiB: number;
  idle?: IdleMemory;
  soak?: Soak;
  messageWrites?: { inserts: number; updates: number; hot: number };
  started: Date;
  load0: number[];
  load1: number[];
  pgVersion: string;
  dbName: string;
}): { table: string; targets: string; full: string } {
  const lines = [
    "| Run | req/s | p50 ms | p99 ms | errors | ÷ Kannel | server CPU µs/req | PostgreSQL CPU µs/req | checked |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
  ];
  for (const row of r.rows) {
    const x = row.result;
    const ratio = x && r.kannel ? f2(x.rps / r.kannel.rps) : "—";
    const cpu = (n: number | undefined) => (n === undefined ? "—" : f0(n));
    lines.push(
      `| ${row.name} | ${x ? f0(x.rps) : "—"} | ${x ? f2(x.p50Ms) : "—"} | ${x ? f2(x.p99Ms) : "—"} | ${x ? x.errors : "—"} | ${ratio} | ${cpu(row.serverCpuUs)} | ${cpu(row.dbCpuUs)} | ${row.note} |`,
    );
  }
  for (const d of [r.dispatch, r.dispatchRoutes]) {
    if (!d || (d === r.dispatchRoutes && r.dispatch === d)) continue;
    lines.push(
      `| Dispatcher: ${f0(d.count)} due messages → ${d.routed ? "two simulator carriers by two routes" : "simulator carrier"} | ${f0(d.rate)} msg/s | | | ${d.complete ? 0 : "not drained"} | | ${f0(d.serverCpuUs)} µs/msg | ${f0(d.dbCpuUs)} µs/msg | ${d.seconds.toFixed(2)} s to drain |`,
    );
  }
  lines.push(...floorRows(r.floors, r.dispatch && !r.dispatch.routed ? r.dispatch.rate : undefined));
  lines.push(`| Peak memory of the service (VmHWM) | ${f0(r.peakMiB)} MiB | | | | | | | whole run on PostgreSQL${r.soak ? ", soak included" : ""} |`);
  if (r.idle) {
    const { first, second } = r.idle;
    lines.push(
      `| Idle memory of the service, embedded default (VmRSS) | ${f0(first.rssMiB)} MiB | | | | | | | first start on a new PGlite data folder, ${SETTINGS.idleSeconds} s after /readyz (peak ${f0(first.peakMiB)} MiB, /readyz after ${(first.readyMs / 1000).toFixed(1)} s); second start ${f0(second.rssMiB)} MiB (peak ${f0(second.peakMiB)} MiB, ${(second.readyMs / 1000).toFixed(1)} s) |`,
    );
  }
  if (r.messageWrites) {
    const w = r.messageWrites;
    lines.push(
      `| PostgreSQL writes to \`messages\` over the run | ${f0(w.inserts)} inserts, ${f0(w.updates)} updates | | | | | | ${w.updates ? ((100 * w.hot) / w.updates).toFixed(0) : "—"} % of updates heap-only (HOT) | pg_stat_user_tables |`,
    );
  }
  if (r.soak) {
    lines.push(
      "",
      `Soak: REST Send SMS at ${f0(r.soak.targetRps)} req/s (${(SETTINGS.soakShare * 100).toFixed(0)} % of the REST maximum), ${SETTINGS.connections} connections`,
      "",
    );
    lines.push("| Minute | req/s | p99 ms | errors | service RSS MiB |", "| ---: | ---: | ---: | ---: | ---: |");
    for (const m of r.soak.minutes) lines.push(`| ${m.minute} | ${f0(m.rps)} | ${f2(m.p99Ms)} | ${m.errors} | ${f0(m.rssMiB)} |`);
  }
  const table = lines.join("\n");

  const rest = r.rows[1].result;
  const grpc = r.rows[2].result;
  const t: string[] = ["| Target | Measured | Verdict |", "| --- | --- | --- |"];
  const verdict = (ok: boolean, miss: string) => (ok ? "met" : `missed: ${miss}`);
  if (rest && r.kannel) {
    const ratio = rest.rps / r.kannel.rps;
    t.push(`| REST ÷ Kannel ≥ 1.50 | ${f2(ratio)} | ${verdict(ratio >= 1.5, `${((1 - ratio / 1.5) * 100).toFixed(0)} % below 1.5 × Kannel`)} |`);
  }
  if (rest) {
    t.push(
      `| REST p99 ≤ 20 ms at ${SETTINGS.connections} connections | ${f2(rest.p99Ms)} ms | ${verdict(rest.p99Ms <= 20, `${f2(rest.p99Ms - 20)} ms over`)} |`,
    );
    t.push(`| REST errors = 0 | ${rest.errors} | ${verdict(rest.errors === 0, `${rest.errors} errors`)} |`);
  }
  const restRow = r.rows[1];
  const floorRow = r.rows[4];
  if (restRow.result && floorRow.result && restRow.serverCpuUs && floorRow.serverCpuUs) {
    const node = restRow.serverCpuUs / floorRow.serverCpuUs;
    t.push(`| REST Node CPU per send ≤ 3 × the floor's | ${f2(node)} × | ${verdict(node <= 3, `${f2(node - 3)} × over`)} |`);
    if (restRow.dbCpuUs && floorRow.dbCpuUs) {
      const pgx = restRow.dbCpuUs / floorRow.dbCpuUs;
      t.push(`| REST PostgreSQL CPU per send ≤ 3 × the floor's | ${f2(pgx)} × | ${verdict(pgx <= 3, `${f2(pgx - 3)} × over`)} |`);
    }
  }
  if (r.prepaid) {
    t.push(`| \`rates import\` of ${f0(r.prepaid.rates)} rates | ${f2(r.prepaid.importSeconds)} s | ${verdict(r.prepaid.importSeconds <= 10, "over 10 s")} |`);
    if (r.prepaid.result && rest) {
      const ratio = r.prepaid.result.rps / rest.rps;
      t.push(
        `| REST prepaid on that card ≥ 0.95 × REST unpriced | ${f2(ratio)} × | ${verdict(ratio >= 0.95, `${((1 - ratio / 0.95) * 100).toFixed(0)} % below 0.95 ×`)} |`,
      );
    }
  }
  if (r.smppServer?.result && rest) {
    // Answers that stored a message per second: submit_sm_resp 0 against REST's 200s.
    const stored = (x: LoadResult) => (x.requests - x.errors) / x.seconds;
    const s = r.smppServer.result;
    const ratio = stored(s) / stored(rest);
    t.push(
      `| SMPP submit_sm (window ${r.smppServer.window}) ≥ 1.0 × REST | ${f2(ratio)} × (${f0(stored(s))} against ${f0(stored(rest))} stored/s) | ${verdict(ratio >= 1, `${((1 - ratio) * 100).toFixed(0)} % below REST`)} |`,
    );
    t.push(`| SMPP submit_sm errors = 0 (refused, unanswered, or stored ≠ OK) | ${s.errors} | ${verdict(s.errors === 0, `${s.errors} errors`)} |`);
  }
  if (grpc && rest) {
    const ratio = grpc.rps / rest.rps;
    t.push(`| gRPC ≥ REST | ${f2(ratio)} × REST | ${verdict(ratio >= 1, `${((1 - ratio) * 100).toFixed(0)} % below REST`)} |`);
    t.push(`| gRPC errors = 0 | ${grpc.errors} | ${verdict(grpc.errors === 0, `${grpc.errors} errors`)} |`);
  }
  if (r.dispatch) {
    t.push(
      `| Dispatcher ≥ 30,000 msg/s | ${f0(r.dispatch.rate)} msg/s | ${verdict(r.dispatch.rate >= 30_000, `${((1 - r.dispatch.rate / 30_000) * 100).toFixed(0)} % below`)} |`,
      ...(r.dispatchRoutes && !r.dispatch.routed
        ? [
            `| Dispatcher by two routes ≥ 0.9 × one carrier | ${(r.dispatchRoutes.rate / r.dispatch.rate).toFixed(2)} × | ${verdict(r.dispatchRoutes.rate >= 0.9 * r.dispatch.rate, "below 0.9 ×")} |`,
          ]
        : []),
    );
  }
  t.push(`| Peak RSS of the service over the run ≤ 400 MiB | ${f0(r.peakMiB)} MiB | ${verdict(r.peakMiB <= 400, `${f0(r.peakMiB - 400)} MiB over`)} |`);
  if (r.idle) {
    const rss = r.idle.first.rssMiB;
    t.push(`| Idle RSS, embedded default, first start, ≤ 200 MiB | ${f0(rss)} MiB | ${verdict(rss <= 200, `${f0(rss - 200)} MiB over`)} |`);
  }
  if (r.soak && r.soak.minutes.length > 1) {
    const g = r.soak.rssGrowth * 100;
    t.push(`| Soak: RSS after minute 1 grows ≤ 10 % | ${g.toFixed(1)} % | ${verdict(g <= 10, `${(g - 10).toFixed(1)} points over`)} |`);
    t.push(`| Soak: p99 within 1.5 × minute 1 | ${f2(r.soak.p99Ratio)} × | ${verdict(r.soak.p99Ratio <= 1.5, `${f2(r.soak.p99Ratio - 1.5)} × over`)} |`);
  }
  const targets = t.join("\n");

  const commit = benchCommit();
  const changed = Object.keys(env)
    .filter((k) => k.startsWith("BENCH_"))
    .map((k) => `${k}=${env[k]}`);
  const machine = [
    `- When: ${r.started.toISOString()}; commit ${commit}`,
    `- Command: \`${[...changed, "npm run bench"].join(" ")}\` (${SETTINGS.warmup} s warm-up + ${SETTINGS.seconds} s measured per run, ${SETTINGS.connections} connections, ${SETTINGS.threads} load-generator thread(s), ${SETTINGS.rounds} round(s), median round shown)`,
    `- Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; load average ${r.load0.map((x) => x.toFixed(2)).join(" ")} before, ${r.load1.map((x) => x.toFixed(2)).join(" ")} after (other processes share the two cores)`,
    `- Versions: Node ${process.version}, PostgreSQL ${r.pgVersion} (shared server, fsync on, synchronous_commit on; database ${r.dbName}, dropped after), Kannel ${version("/usr/sbin/bearerbox", ["--version"], /version `([^']+)'/)}, ${version("wrk", ["-v"], /^(wrk [^ ]+)/m)}, h2load (nghttp2 ${version("h2load", ["--version"], /nghttp2\/([\d.]+)/)})`,
    `- Switchboard: \`src/main.ts\` compiled (dist/src/main.js) as \`npm start\` runs it (API + delivery engine, simulator carrier), LOG_LEVEL=${SETTINGS.logLevel}, ${Object.entries(
      rateLimitEnv(),
    )
      .map(([k, v]) => `${k}=${v}`)
      .join(
        ", ",
      )}${r.smppServer ? ", SMPP_SERVER_PORT set (its SMPP server on; the client binds from the bench process)" : ""} (see below); Kannel: bearerbox + smsbox + fakesmsc, store-type = spool, log level 2 (warning); each send is From ${SMS.from}, To ${SMS.to.replace(VARY, "NNNNN")} (random digits per request; gRPC: ${SMS.fixedTo}), Text "${SMS.text}"`,
  ].join("\n");
  const full = `${machine}\n\n${table}\n\n${targets}\n`;
  return { table, targets, full };
}

main().catch((e) => {
  process.stderr.write(`bench failed: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
