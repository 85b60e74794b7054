/**
 * Latency at fixed offered load (issue 46), selected by `BENCH_ONLY=latency`: the open-loop
 * generator (bench/open-loop.ts) at each of BENCH_LATENCY_RATES against, in the same run,
 *
 * - Kannel's sendsms (spool store, fakesmsc), the peer;
 * - the floor: the bare server's Fastify route with group commit (`/bare/Batched`, bench/bare-server.ts);
 * - REST Send SMS of `npm start` (API and delivery engine in one process, compiled);
 * - REST Send SMS of `DELIVERY=off npm start` (API only), on a database of its own, since a
 *   dispatcher on the same database would deliver its sends and so be measured with it;
 * - gRPC SendMessage to `npm start`, and the same call to the h2 floor (bench/grpc-floor-servers.ts).
 *
 * Every request sends the REST bench's SMS to a random recipient. Each rate of each target runs
 * BENCH_ROUNDS times; the table shows each column's median over the rounds. With
 * BENCH_LATENCY_STEPS=1 the two REST services run with SERVER_TIMING on, and the answers' headers
 * give the table of where a send's time goes. The services' event-loop delay over each measured
 * part comes from their /metrics (prom-client's monitorEventLoopDelay, reset by each scrape).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, toBinary } from "@bufbuild/protobuf";
import pg from "pg";
import { SendMessageRequestSchema } from "../gen/switchboard/v2/messaging_pb.js";
import { freePort, type RunningKannel, startKannel } from "../test/support/kannel.js";
import { buildService, type Service, startService, stopService } from "../test/support/service.js";
import { type LatencyRun, renderLatency, TARGET_KEYS, TARGETS, type TargetKey } from "./latency-report.js";
import { VARY } from "./load.js";
import { openLoop, type OpenLoopRequest } from "./open-loop.js";
import { adminCall, BENCH_ADMIN_TOKEN, benchHeader, f2, kannelQueued, SMS, waitUntil, writeBenchmarks } from "./service-runs.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the latency mode is told (bench/run.ts reads it from the environment). */
export interface LatencySettings {
  pgUrl: string;
  /** BENCH_LATENCY_RATES: requests per second, each a run. */
  rates: number[];
  /** BENCH_LATENCY_SECONDS and BENCH_LATENCY_WARMUP. */
  seconds: number;
  warmup: number;
  rounds: number;
  logLevel: string;
  /** BENCH_LATENCY_STEPS=1: SERVER_TIMING on for the REST services, and the steps' table. */
  steps: boolean;
  /** BENCH_LATENCY_TARGETS: a subset of the targets (default all). */
  targets: TargetKey[];
  /**
   * The services' request-rate settings: SEND_RATE_LIMIT=off, or (BENCH_SHARED_LIMITS=1, or
   * `redis` with BENCH_REDIS_URL) on and set far above the load, so that the shared allowance
   * (limits/shared-allowance.ts) runs in every send and the `admit` step shows what it costs.
   */
  rateLimits: Record<string, string>;
  write: boolean;
}

/**
 * The settings from the environment: BENCH_LATENCY_RATES (default 500,1000,2000),
 * BENCH_LATENCY_SECONDS (15), BENCH_LATENCY_WARMUP (3), BENCH_ROUNDS (3 here: a latency
 * percentile moves more between runs than a rate), BENCH_LATENCY_STEPS (1: SERVER_TIMING on),
 * BENCH_LATENCY_TARGETS (default all of TARGET_KEYS).
 */
export function latencySettings(env: NodeJS.ProcessEnv, base: Pick<LatencySettings, "pgUrl" | "logLevel" | "write">): LatencySettings {
  const list = (name: string, def: string) =>
    (env[name] || def)
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean);
  const num = (name: string, def: number) => (env[name] ? Number(env[name]) : def);
  const targets = list("BENCH_LATENCY_TARGETS", TARGET_KEYS.join(","));
  const unknown = targets.filter((t) => !TARGET_KEYS.includes(t));
  if (unknown.length) throw new Error(`BENCH_LATENCY_TARGETS: unknown ${unknown.join(", ")}; known: ${TARGET_KEYS.join(", ")}`);
  const rates = list("BENCH_LATENCY_RATES", "500,1000,2000").map(Number);
  if (rates.some((r) => !(r > 0))) throw new Error(`BENCH_LATENCY_RATES: positive numbers, comma-separated; got ${env.BENCH_LATENCY_RATES}`);
  return {
    ...base,
    rates,
    seconds: num("BENCH_LATENCY_SECONDS", 15),
    warmup: num("BENCH_LATENCY_WARMUP", 3),
    rounds: num("BENCH_ROUNDS", 3),
    steps: env.BENCH_LATENCY_STEPS === "1",
    rateLimits:
      env.BENCH_SHARED_LIMITS === "1" || env.BENCH_SHARED_LIMITS === "redis"
        ? {
            SEND_RATE_LIMIT: "1000000",
            ...(env.BENCH_SHARED_LIMITS === "redis" ? { REDIS_URL: env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379" } : {}),
          }
        : { SEND_RATE_LIMIT: "off" },
    targets: targets as TargetKey[],
  };
}

/**
 * prom-client's event-loop timer (collectDefaultMetrics' eventLoopMonitoringPrecision, left at its
 * default by src/ops/metrics.ts), ms: its readings are that interval plus the delay.
 */
const SERVICE_LOOP_TIMER_MS = 10;

/** The event-loop delay of a service over one measured part, from its /metrics, ms (beyond the timer's interval). */
async function eventLoopDelay(base: string): Promise<{ p50: number; p99: number; max: number } | undefined> {
  const text = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) })
    .then((r) => r.text())
    .catch(() => "");
  const read = (name: string) =>
    Math.max(0, Number(new RegExp(`^nodejs_eventloop_lag_${name}_seconds (\\S+)$`, "m").exec(text)?.[1]) * 1000 - SERVICE_LOOP_TIMER_MS);
  const out = { p50: read("p50"), p99: read("p99"), max: read("max") };
  return Number.isFinite(out.p99) ? out : undefined;
}

/** The bare server (the floor and the h2 floor), compiled like the service, on the bench database. */
async function startBare(dbUrl: string): Promise<{ proc: ChildProcess; port: number; h2Port: number }> {
  const port = await freePort();
  const h2Port = await freePort();
  const proc = spawn(process.execPath, ["dist/bench/bare-server.js"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, BARE_DATABASE_URL: dbUrl, BARE_PORT: String(port), BARE_H2_PORT: String(h2Port), BARE_CONNECT_PORT: String(await freePort()) },
  });
  let out = "";
  proc.stdout!.setEncoding("utf8").on("data", (s: string) => (out += s));
  proc.stderr!.setEncoding("utf8").on("data", (s: string) => (out += s));
  const deadline = Date.now() + 30_000;
  while (!out.includes("bare server listening")) {
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`the bare server did not start:\n${out}`);
    await sleep(100);
  }
  return { proc, port, h2Port };
}

/** A random recipient as the REST bench's (+4477009 and five digits). */
const recipient = () => SMS.to.replace(VARY, String(10000 + Math.floor(Math.random() * 90000)));

export async function benchLatency(log: (s: string) => void, s: LatencySettings): Promise<string> {
  buildService("--bench");
  const started = new Date();
  const load0 = loadavg();
  const tag = `${process.pid}_${randomBytes(3).toString("hex")}`;
  const want = new Set(s.targets);
  // DELIVERY=off on a database of its own (see above), made only when that target runs.
  const dbNames = { full: `sb_latency_${tag}`, ...(want.has("rest-api") ? { api: `sb_latency_api_${tag}` } : {}) };
  const admin = new pg.Client({ connectionString: s.pgUrl });
  await admin.connect();
  const urlOf = (name: string) => {
    const u = new URL(s.pgUrl);
    u.pathname = `/${name}`;
    return u.toString();
  };
  const services: Service[] = [];
  let bare: ChildProcess | undefined;
  let kannel: RunningKannel | undefined;
  const dbs: InstanceType<typeof pg.Client>[] = [];
  try {
    for (const name of Object.values(dbNames)) await admin.query(`create database "${name}"`);
    const env = (delivery: "on" | "off") => ({
      DATABASE_URL: urlOf(delivery === "on" ? dbNames.full : dbNames.api!),
      SWITCHBOARD_ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
      LOG_LEVEL: s.logLevel,
      CARRIER: "simulator",
      // As in the throughput runs: the limiter off (the load is what is measured), or on and never refusing.
      ...s.rateLimits,
      DELIVERY: delivery,
      SERVER_TIMING: s.steps ? "true" : "false",
    });
    /** A service, its account and property, and a connection to its database. */
    const serviceWith = async (delivery: "on" | "off") => {
      const svc = await startService({ port: await freePort(), compiled: true, env: env(delivery) });
      services.push(svc);
      const call = adminCall(svc.base, BENCH_ADMIN_TOKEN);
      const acc = await call("/admin/v1/Accounts", { Name: "Bench", SmsEnabled: true });
      const prop = await call(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Bench", SmsEnabled: true });
      await call("/admin/v1/Numbers", { Number: SMS.from, AccountSid: acc.AccountSid });
      const db = new pg.Client({ connectionString: env(delivery).DATABASE_URL });
      await db.connect();
      dbs.push(db);
      const auth = `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}`;
      log(`${delivery === "on" ? "npm start" : "DELIVERY=off npm start"} at ${svc.base} (pid ${svc.pid})`);
      return { svc, db, auth, propertySid: prop.PropertySid };
    };
    const full = await serviceWith("on");
    const api = want.has("rest-api") ? await serviceWith("off") : undefined;
    await full.db.query(
      "create table bench_bare (sid varchar(32) primary key, sender varchar(32) not null, recipient varchar(32) not null, text text not null, created_at timestamptz not null)",
    );
    const floor = await startBare(urlOf(dbNames.full));
    bare = floor.proc;
    if (want.has("kannel")) {
      kannel = await startKannel({ callbackBaseUrl: "http://127.0.0.1:9", secret: "bench", logLevel: 2, timeoutMs: 60_000 });
      log(`Kannel sendsms at ${kannel.sendsmsUrl}`);
    }

    const json = { "content-type": "application/json" };
    const restBody = () => ({ body: JSON.stringify({ From: SMS.from, To: recipient(), Text: SMS.text }) });
    const grpcBody = (propertySid: string) => () =>
      toBinary(SendMessageRequestSchema, create(SendMessageRequestSchema, { propertySid, from: SMS.from, to: recipient(), text: SMS.text }));
    const sendsms = kannel ? new URL(kannel.sendsmsUrl) : undefined;
    const requests: Partial<Record<TargetKey, OpenLoopRequest>> = {
      kannel: sendsms && {
        kind: "http",
        url: sendsms.toString(),
        method: "GET",
        build: () => ({
          path: `${sendsms.pathname}?username=switchboard&password=switchboard&from=${encodeURIComponent(SMS.from)}&to=${encodeURIComponent(recipient())}&text=${encodeURIComponent(SMS.text)}`,
        }),
      },
      floor: { kind: "http", url: `http://127.0.0.1:${floor.port}/bare/Batched`, method: "POST", headers: json, build: restBody },
      rest: {
        kind: "http",
        url: `${full.svc.base}/v2/Properties/${full.propertySid}/Messages`,
        method: "POST",
        headers: { ...json, authorization: full.auth },
        build: restBody,
      },
      "rest-api": api && {
        kind: "http",
        url: `${api.svc.base}/v2/Properties/${api.propertySid}/Messages`,
        method: "POST",
        headers: { ...json, authorization: api.auth },
        build: restBody,
      },
      grpc: {
        kind: "grpc",
        url: `${full.svc.base}/switchboard.v2.MessagingService/SendMessage`,
        headers: { authorization: full.auth },
        build: grpcBody(full.propertySid),
      },
      "floor-h2": { kind: "grpc", url: `http://127.0.0.1:${floor.h2Port}/switchboard.v2.MessagingService/SendMessage`, build: grpcBody("") },
    };
    const queued = async (db: InstanceType<typeof pg.Client>) => Number((await db.query("select count(*)::int as n from messages where queued")).rows[0].n);
    const drainFull = () => waitUntil("Switchboard queue drain", async () => (await queued(full.db)) === 0, 120_000, log);
    const settle: Record<TargetKey, () => Promise<unknown>> = {
      kannel: () => (kannel ? waitUntil("Kannel queue drain", async () => (await kannelQueued(kannel!)) === 0, 120_000, log) : Promise.resolve()),
      floor: drainFull,
      rest: drainFull,
      // Nobody delivers the API-only service's sends: they are deleted, so that its queue does not grow run by run.
      "rest-api": async () => {
        await drainFull();
        if (api) await api.db.query("delete from messages where queued");
      },
      grpc: drainFull,
      "floor-h2": drainFull,
    };
    const metricsBase: Partial<Record<TargetKey, string>> = { rest: full.svc.base, "rest-api": api?.svc.base, grpc: full.svc.base };

    const runs: LatencyRun[] = [];
    const keys = TARGETS.map((t) => t.key).filter((k) => want.has(k) && requests[k]);
    for (let round = 1; round <= s.rounds; round++) {
      for (const rate of s.rates) {
        for (const key of keys) {
          await settle[key]();
          // Every run from a checkpoint, as the throughput runs (bench/service-runs.ts checkpoint).
          await full.db.query("checkpoint").catch(() => undefined);
          const base = metricsBase[key];
          const collectSteps = s.steps && (key === "rest" || key === "rest-api");
          const result = await openLoop(requests[key]!, {
            rate,
            warmup: s.warmup,
            seconds: s.seconds,
            collectSteps,
            // The scrape resets the service's event-loop histogram: the next one covers the measured part.
            onMeasureStart: base ? () => void eventLoopDelay(base) : undefined,
          });
          const serverDelay = base ? await eventLoopDelay(base) : undefined;
          runs.push({ key, rate, round, result, serverDelay });
          const l = result.latency;
          log(
            `round ${round}/${s.rounds}, ${rate} req/s, ${key}: p50 ${f2(l.p50)} ms, p90 ${f2(l.p90)}, p99 ${f2(l.p99)}, p99.9 ${f2(l.p999)}, max ${f2(l.max)}; ` +
              `${result.ok} ok, ${result.errors} errors; ${result.late} started > ${result.lateMs} ms late (start lag p99 ${f2(result.startLag.p99)} ms)` +
              (serverDelay ? `; service event-loop delay p99 ${f2(serverDelay.p99)} ms, max ${f2(serverDelay.max)} ms` : "") +
              ` (load ${loadavg()[0].toFixed(2)})`,
          );
        }
      }
    }
    const pgVersion = (await full.db.query("show server_version")).rows[0].server_version as string;
    const note = `(${s.warmup} s warm-up + ${s.seconds} s per run at each of ${s.rates.join(", ")} req/s, ${s.rounds} round(s), each column the median of the rounds)`;
    const report = renderLatency(runs, s, [
      ...benchHeader(started, load0, note),
      `- PostgreSQL ${pgVersion} (the shared server; database ${dbNames.full}${dbNames.api ? ` and, for DELIVERY=off, ${dbNames.api}` : ""}, dropped after); services compiled as \`npm start\` runs them, LOG_LEVEL=${s.logLevel}, ${Object.entries(
        s.rateLimits,
      )
        .map(([k, v]) => `${k}=${v}`)
        .join(
          ", ",
        )}, SERVER_TIMING=${s.steps ? "on (REST services)" : "off"}; each send From ${SMS.from}, To ${SMS.to.replace(VARY, "NNNNN")} (random per request, gRPC too), Text "${SMS.text}"`,
      "- Open loop (bench/open-loop.ts): the i-th request is due at t0 + i / rate and starts then whatever the answers do; latency is from that due time to the whole answer, so the generator's own lag counts too (its start lag and event-loop delay are shown)",
      `- Loop delays: perf_hooks' monitorEventLoopDelay, less its timer's interval (the generator's 1 ms; the services' ${SERVICE_LOOP_TIMER_MS} ms, read from their /metrics, which prom-client resets at each scrape, so a reading covers the measured part); errors and late starts are every round's together`,
    ]);
    if (s.write) {
      writeBenchmarks(report, "latency", "Latency at fixed rates");
      log("results written to docs/benchmarks.md (latency)");
    }
    return report;
  } finally {
    for (const svc of services) await stopService(svc).catch(() => svc.kill("SIGKILL"));
    bare?.kill("SIGTERM");
    await kannel?.stop().catch(() => undefined);
    for (const db of dbs) await db.end().catch(() => undefined);
    for (const name of Object.values(dbNames))
      await admin.query(`drop database if exists "${name}" with (force)`).catch((e) => log(`drop database failed: ${e}`));
    await admin.end().catch(() => undefined);
  }
}
