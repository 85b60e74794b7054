/**
 * Delivery in the API's process or beside it (issue 32), selected by `BENCH_ONLY=split`: the REST
 * send run of the main bench (bench/service-runs.ts restRun) against `npm start` as it runs by
 * default (API and delivery engine in one process) and against `npm start` with DELIVERY=off beside
 * one `npm run worker` process, alternating round by round on one database, on the shared
 * PostgreSQL. Node CPU per send is the sum over the service's processes (both, when split), so
 * the comparison charges the delivery wherever it runs. Prints only (the figures go into
 * docs/benchmarks.md by hand).
 */
import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import pg from "pg";
import { freePort } from "../test/support/kannel.js";
import { buildService, startService, stopService, type Service } from "../test/support/service.js";
import type { LoadSettings } from "./load.js";
import {
  adminCall,
  BENCH_ADMIN_TOKEN,
  benchHeader,
  type BenchTarget,
  checkpoint,
  drainQueue,
  f0,
  f2,
  type Measured,
  median,
  restRun,
  type RestRunSettings,
  SMS,
} from "./service-runs.js";

type Mode = "one process" | "API + worker";

export async function benchSplit(log: (s: string) => void, s: RestRunSettings): Promise<string> {
  buildService();
  const started = new Date();
  const load0 = loadavg();
  const dbName = `sb_split_${process.pid}_${randomBytes(3).toString("hex")}`;
  const admin = new pg.Client({ connectionString: s.pgUrl });
  await admin.connect();
  await admin.query(`create database "${dbName}"`);
  const dbUrl = new URL(s.pgUrl);
  dbUrl.pathname = `/${dbName}`;
  const db = new pg.Client({ connectionString: dbUrl.toString() });
  let procs: Service[] = [];
  const stopAll = async () => {
    for (const p of procs) await stopService(p).catch(() => undefined);
    procs = [];
  };
  const env = {
    DATABASE_URL: dbUrl.toString(),
    SWITCHBOARD_ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
    LOG_LEVEL: s.logLevel,
    SEND_RATE_LIMIT: "off",
    CARRIER: "simulator",
  };
  const results: Record<Mode, Measured[]> = { "one process": [], "API + worker": [] };
  try {
    // The schema and the bench's account, made once by a first start.
    const port = await freePort();
    procs = [await startService({ port, compiled: true, env })];
    await db.connect();
    const call = adminCall(procs[0].base, BENCH_ADMIN_TOKEN);
    const acc = await call("/admin/v1/Accounts", { Name: "Bench", SmsEnabled: true });
    const prop = await call(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Main", SmsEnabled: true });
    await call("/admin/v1/Numbers", { Number: SMS.from, AccountSid: acc.AccountSid });
    await stopAll();
    const load: LoadSettings = { connections: s.connections, threads: s.threads, seconds: s.seconds };
    const warm: LoadSettings = { ...load, seconds: s.warmup };

    const runMode = async (mode: Mode): Promise<Measured> => {
      const api = await startService({ port, compiled: true, env: { ...env, DELIVERY: mode === "one process" ? "on" : "off" } });
      procs.push(api);
      if (mode === "API + worker") procs.push(await startService({ port: 0, script: "src/worker.ts", compiled: true, waitReady: false, env }));
      const target: BenchTarget = { db, dbName, servicePid: api.pid, accountSid: acc.AccountSid, propertySid: prop.PropertySid, since: started, log };
      const req = {
        url: `${api.base}/v2/Properties/${prop.PropertySid}/Messages`,
        method: "POST" as const,
        headers: { authorization: `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}`, "content-type": "application/json" },
        body: JSON.stringify({ From: SMS.from, To: SMS.to, Text: SMS.text }),
      };
      await checkpoint(target);
      const r = await restRun(
        target,
        req,
        load,
        warm,
        procs.map((p) => p.pid),
      );
      await drainQueue(target);
      await stopAll();
      return r;
    };

    for (let round = 1; round <= s.rounds; round++) {
      // Alternating, and the other order every second round: neither side always runs first.
      const order: Mode[] = round % 2 === 1 ? ["one process", "API + worker"] : ["API + worker", "one process"];
      for (const mode of order) {
        log(
          `round ${round}/${s.rounds}, ${mode}: REST (${s.warmup} s warm-up + ${s.seconds} s, ${s.connections} connections) (load ${loadavg()[0].toFixed(2)})`,
        );
        const r = await runMode(mode);
        log(
          `  ${f0(r.result.rps)} req/s, p50 ${f2(r.result.p50Ms)} ms, p99 ${f2(r.result.p99Ms)} ms, errors ${r.result.errors}, Node ${f0(r.serverCpuUs ?? NaN)} µs, PostgreSQL ${f0(r.dbCpuUs ?? NaN)} µs per send; ${r.note}`,
        );
        results[mode].push(r);
      }
    }
    const pgVersion = (await db.query("show server_version")).rows[0].server_version as string;
    const row = (mode: Mode) => {
      const m = median(results[mode], (r) => r.result.rps);
      const p99 = median(results[mode], (r) => r.result.p99Ms).result.p99Ms;
      return `| ${mode === "one process" ? "`npm start` (API and delivery in one process)" : "`DELIVERY=off npm start` + one `npm run worker`"} | ${f0(m.result.rps)} | ${f2(m.result.p50Ms)} | ${f2(p99)} | ${results[mode].reduce((n, r) => n + r.result.errors, 0)} | ${f0(m.serverCpuUs ?? NaN)} | ${f0(m.dbCpuUs ?? NaN)} | ${results[mode].map((r) => `${f0(r.result.rps)} / ${f2(r.result.p99Ms)} ms`).join(", ")} |`;
    };
    return [
      ...benchHeader(started, load0, `(${s.warmup} s warm-up + ${s.seconds} s per run, ${s.connections} connections, ${s.rounds} round(s) each, alternating)`),
      `- PostgreSQL ${pgVersion} (the shared server, database ${dbName}, dropped after)`,
      "",
      "| REST Send SMS (median of the rounds) | req/s | p50 ms | p99 ms (median) | errors | Node CPU µs/send (all its processes) | PostgreSQL CPU µs/send | rounds (req/s / p99) |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
      row("one process"),
      row("API + worker"),
      "",
    ].join("\n");
  } finally {
    await stopAll();
    await db.end().catch(() => undefined);
    await admin.query(`drop database if exists "${dbName}" with (force)`).catch((e) => log(`drop database failed: ${e}`));
    await admin.end().catch(() => undefined);
  }
}
