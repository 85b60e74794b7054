/**
 * Growth (issue 32), selected by `BENCH_ONLY=growth`: the REST send run and the dispatcher's drain
 * of the main bench (bench/service-runs.ts, the same functions) first on an empty bench database,
 * then on the same database after one INSERT … SELECT has put BENCH_GROWTH_ROWS (10,000,000)
 * messages of the last 60 days into it and a VACUUM ANALYZE has run, with the same service
 * process, settings and machine. Rounds: BENCH_ROUNDS each side, medians compared. Targets: REST
 * req/s at least 0.9 × and p99 at most 1.5 × the empty database's, the dispatcher at least 0.9 ×.
 */
import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import pg from "pg";
import { freePort } from "../test/support/kannel.js";
import { buildService, startService, stopService, type Service } from "../test/support/service.js";
import type { LoadSettings } from "./load.js";
import { startPrivateCluster } from "./private-pg.js";
import {
  adminCall,
  BENCH_ADMIN_TOKEN,
  benchHeader,
  type BenchTarget,
  checkpoint,
  type DispatchRun,
  dispatchRun,
  drainQueue,
  f0,
  f2,
  type Measured,
  median,
  restRun,
  type RestRunSettings,
  SMS,
  writeBenchmarks,
} from "./service-runs.js";

/** What the main bench's settings say (bench/run.ts SETTINGS). */
export interface GrowthSettings extends RestRunSettings {
  dispatch: number;
  write: boolean;
}

const ROWS = Number(process.env.BENCH_GROWTH_ROWS || 10_000_000);
/**
 * BENCH_GROWTH_STATEMENTS=1: the runs go to a private cluster (bench/private-pg.ts, initdb defaults
 * as the shared server's) with pg_stat_statements, and after each drain the costliest statements
 * per message are printed (time, buffers read and hit, full-page images): what grows with the table.
 */
const STATEMENTS = process.env.BENCH_GROWTH_STATEMENTS === "1";
/** BENCH_GROWTH_KEEP=1: the grown database (and the private cluster) is left for a look after the bench; its name is printed. */
const KEEP = process.env.BENCH_GROWTH_KEEP === "1";
/** Accounts besides the bench's own that the stored messages belong to. */
const OTHER_ACCOUNTS = 4;

const mib = (bytes: number) => `${(bytes / 1048576).toFixed(0)} MiB`;
const secs = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)} s`;

/**
 * The stored messages, in one statement: spread evenly over the last 60 days (up to an hour ago,
 * so that the runs' own count of the bench property's new messages does not range over them), in
 * time order as a deployment writes them, across the accounts (the bench's one of them); Sids laid
 * out as the service's (src/common/sid.ts): the creation time in 9 base-36 characters, then a
 * random-looking tail (md5 digits), so the primary key is built as a real one is. Nine in ten outbound: Delivered (one in twenty
 * Failed), submitted and reported with a carrier reference; one in ten inbound, Received. None
 * queued or due: the generated `queued` is false for every one. $1..$3: the accounts' Sids, their
 * properties and numbers, one array each.
 */
/** x.t in milliseconds as newSid writes it: 9 base-36 digits, most significant first. */
const BASE36_MS = Array.from(
  { length: 9 },
  (_, i) => `substr('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ', 1 + ((m.ms / ${36 ** (8 - i)}::bigint) % 36)::int, 1)`,
).join(" || ");

const FILL_SQL = `
insert into messages (sid, account_sid, property_sid, direction, status, sender_kind, sender, recipient, text, encoding, num_segments,
                      send_at, created_at, submitted_at, delivered_at, received_at, error_code, attempts, carrier_ref, carrier)
select 'MG' || ${BASE36_MS} || upper(substr(md5(g::text), 1, 21)),
       ($1::text[])[a], ($2::text[])[a],
       case when x.inbound then 'Receive' else 'Transmit' end,
       case when x.inbound then 'Received' when g % 20 = 0 then 'Failed' else 'Delivered' end,
       case when x.inbound then '' else 'E164' end,
       case when x.inbound then x.peer else ($3::text[])[a] end,
       case when x.inbound then ($3::text[])[a] else x.peer end,
       'Your code is ' || (g % 1000000)::text, 'GSM7', 1,
       x.t, x.t,
       case when not x.inbound then x.t + interval '1 second' end,
       case when not x.inbound then x.t + interval '3 seconds' end,
       case when x.inbound then x.t end,
       case when not x.inbound and g % 20 = 0 then 'CarrierFailed' else '' end,
       case when x.inbound then 0 else 1 end,
       case when not x.inbound then 'sim-' || g::text end,
       case when x.inbound then '' else 'simulator' end
  from generate_series(1, $4::int) g,
       lateral (select 1 + g % array_length($1::text[], 1) as a) k,
       lateral (select g % 10 = 3 as inbound, '+4477009' || lpad((g % 100000)::text, 5, '0') as peer,
                       now() - interval '60 days' + (interval '60 days' - interval '1 hour') * (g::float8 / $4::int) as t) x,
       lateral (select (extract(epoch from x.t) * 1000)::bigint as ms) m`;

interface Phase {
  rest: Measured[];
  dispatch: DispatchRun[];
}

export async function benchGrowth(log: (s: string) => void, s: GrowthSettings): Promise<string> {
  buildService();
  const started = new Date();
  const load0 = loadavg();
  const dbName = `sb_growth_${process.pid}_${randomBytes(3).toString("hex")}`;
  const cluster = STATEMENTS
    ? await startPrivateCluster({ shared_preload_libraries: "'pg_stat_statements'", "pg_stat_statements.track": "all", "pg_stat_statements.max": "10000" }, log)
    : undefined;
  const pgUrl = cluster?.url ?? s.pgUrl;
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  await admin.query(`create database "${dbName}"`);
  log(`database ${dbName} created`);
  const dbUrl = new URL(pgUrl);
  dbUrl.pathname = `/${dbName}`;
  const db = new pg.Client({ connectionString: dbUrl.toString() });
  const watch = new pg.Client({ connectionString: dbUrl.toString() });
  let svc: Service | undefined;
  const cleanup = async () => {
    if (svc) await stopService(svc).catch(() => undefined);
    await db.end().catch(() => undefined);
    await watch.end().catch(() => undefined);
    if (KEEP) log(`kept: database ${dbName} at ${pgUrl}${cluster ? ` (private cluster in ${cluster.dataDir}: stop it with pg_ctl)` : ""}`);
    else await admin.query(`drop database if exists "${dbName}" with (force)`).catch((e) => log(`drop database failed: ${e}`));
    await admin.end().catch(() => undefined);
    if (!KEEP) cluster?.stop();
  };
  const onSigint = () => void cleanup().finally(() => process.exit(130));
  process.once("SIGINT", onSigint);
  try {
    svc = await startService({
      port: await freePort(),
      compiled: true,
      env: {
        DATABASE_URL: dbUrl.toString(),
        SWITCHBOARD_ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
        LOG_LEVEL: s.logLevel,
        SEND_RATE_LIMIT: "off",
        CARRIER: "simulator",
      },
    });
    await db.connect();
    await watch.connect();
    if (STATEMENTS) await db.query("create extension pg_stat_statements");
    const call = adminCall(svc!.base, BENCH_ADMIN_TOKEN);
    // The bench's account first; the stored messages are spread over it and the others.
    const accounts: { sid: string; token: string; property: string; number: string }[] = [];
    for (let i = 0; i <= OTHER_ACCOUNTS; i++) {
      const acc = await call("/admin/v1/Accounts", { Name: i === 0 ? "Bench" : `Other ${i}`, SmsEnabled: true });
      const prop = await call(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Main", SmsEnabled: true });
      const number = i === 0 ? SMS.from : `+4477009000${10 + i}`;
      await call("/admin/v1/Numbers", { Number: number, AccountSid: acc.AccountSid });
      accounts.push({ sid: acc.AccountSid, token: acc.Token, property: prop.PropertySid, number });
    }
    const bench = accounts[0];
    const target: BenchTarget = { db, dbName, servicePid: svc.pid, accountSid: bench.sid, propertySid: bench.property, since: started, log };
    const restReq = {
      url: `${svc.base}/v2/Properties/${bench.property}/Messages`,
      method: "POST" as const,
      headers: { authorization: `Basic ${Buffer.from(`${bench.sid}:${bench.token}`).toString("base64")}`, "content-type": "application/json" },
      body: JSON.stringify({ From: SMS.from, To: SMS.to, Text: SMS.text }),
    };
    const load: LoadSettings = { connections: s.connections, threads: s.threads, seconds: s.seconds };
    const warm: LoadSettings = { ...load, seconds: s.warmup };

    const phase = async (name: string, tag: string): Promise<Phase> => {
      const out: Phase = { rest: [], dispatch: [] };
      const began = performance.now();
      log(`${name}: ${s.rounds} round(s) of the REST run and the dispatcher's drain`);
      for (let round = 1; round <= s.rounds; round++) {
        log(
          `${name}, round ${round}/${s.rounds}: REST (${s.warmup} s warm-up + ${s.seconds} s, ${s.connections} connections) (load ${loadavg()[0].toFixed(2)})`,
        );
        await checkpoint(target);
        if (STATEMENTS) await db.query("select pg_stat_statements_reset()");
        const r = await restRun(target, restReq, load, warm);
        // The warm-up's sends are in the statistics too: per send, about.
        if (STATEMENTS) await logStatements(db, (r.result.requests * (s.warmup + s.seconds)) / s.seconds, log);
        log(`  rest: ${f0(r.result.rps)} req/s, p50 ${f2(r.result.p50Ms)} ms, p99 ${f2(r.result.p99Ms)} ms, errors ${r.result.errors}, ${r.note}`);
        out.rest.push(r);
        if (s.dispatch > 0) {
          await drainQueue(target);
          await checkpoint(target);
          if (STATEMENTS) await db.query("select pg_stat_statements_reset()");
          const d = await dispatchRun(target, s.dispatch, `${tag}${String(round).padStart(4, "0")}`, false);
          out.dispatch.push(d);
          if (STATEMENTS) await logStatements(db, d.count, log);
        }
      }
      log(`${name}: done in ${secs(began)}`);
      return out;
    };

    const empty = await phase("empty database", "E");

    log(`filling: ${f0(ROWS)} messages of the last 60 days in one INSERT … SELECT (load ${loadavg()[0].toFixed(2)})`);
    let t0 = performance.now();
    // The insert holds `db`; a second connection reports how far the table has grown meanwhile.
    const progress = setInterval(() => {
      void watch
        .query("select pg_relation_size('messages')::float8 as t, pg_indexes_size('messages')::float8 as i")
        .then((r) => log(`  … ${secs(t0)}: messages ${mib(r.rows[0].t)}, its indexes ${mib(r.rows[0].i)} (load ${loadavg()[0].toFixed(2)})`))
        .catch(() => undefined);
    }, 15_000);
    try {
      await db.query(FILL_SQL, [accounts.map((a) => a.sid), accounts.map((a) => a.property), accounts.map((a) => a.number), ROWS]);
    } finally {
      clearInterval(progress);
    }
    const fillSeconds = (performance.now() - t0) / 1000;
    // A deployment that ran those 60 days has its receipt-timeout sweep (src/delivery/receipt-timeout.ts)
    // at the last message submitted 72 hours (RECEIPT_TIMEOUT_HOURS) ago: the same position here.
    await db.query(
      `insert into sweep_positions (name, submitted_at, sid)
       select 'receipt-timeout', submitted_at, sid from messages
        where submitted_at is not null and submitted_at <= now() - interval '72 hours'
        order by submitted_at desc, sid desc limit 1`,
    );
    log(`  inserted in ${fillSeconds.toFixed(1)} s; VACUUM ANALYZE`);
    t0 = performance.now();
    await db.query("vacuum analyze messages");
    const vacuumSeconds = (performance.now() - t0) / 1000;
    log(`  vacuumed in ${vacuumSeconds.toFixed(1)} s; CHECKPOINT`);
    t0 = performance.now();
    await db.query("checkpoint");
    log(`  checkpoint in ${secs(t0)}`);
    const sizes = (
      await db.query(
        `select c.relname as name, pg_relation_size(c.oid)::float8 as bytes, c.reltuples::float8 as rows
           from pg_class c where c.oid = 'messages'::regclass or c.oid in (select indexrelid from pg_index where indrelid = 'messages'::regclass)
          order by c.relkind desc, c.relname`,
      )
    ).rows as { name: string; bytes: number; rows: number }[];
    for (const z of sizes) log(`  ${z.name}: ${mib(z.bytes)}${z.name === "messages" ? `, ${f0(z.rows)} rows (estimate)` : ""}`);

    const grown = await phase(`${f0(ROWS)} messages stored`, "G");
    const pgVersion = (await db.query("show server_version")).rows[0].server_version as string;

    const report = render(empty, grown, sizes, fillSeconds, vacuumSeconds, s);
    const header = [
      ...benchHeader(
        started,
        load0,
        `(${s.warmup} s warm-up + ${s.seconds} s measured per REST run, ${s.connections} connections, ${f0(s.dispatch)} due messages per drain, ${s.rounds} round(s) each side, medians)`,
      ),
      `- PostgreSQL ${pgVersion} (${cluster ? "a private cluster with pg_stat_statements" : "the shared server"}; database ${dbName}, dropped after). The same service process, settings and database for both sides: the empty runs first, then the fill, then the same runs again; every run starts from a CHECKPOINT`,
    ].join("\n");
    const full = `${header}\n\n${report}\n`;
    if (s.write) {
      writeBenchmarks(full, "growth", "Growth (issue 32)");
      log("results written to docs/benchmarks.md");
    }
    return full;
  } finally {
    process.removeListener("SIGINT", onSigint);
    await cleanup();
  }
}

/** The statements that took the most time since the last reset, per message of a run of `count`. */
async function logStatements(db: InstanceType<typeof pg.Client>, count: number, log: (s: string) => void): Promise<void> {
  const { rows } = await db.query(
    `select toplevel, calls::float8 as calls, total_exec_time::float8 as ms, shared_blks_hit::float8 as hit, shared_blks_read::float8 as read,
            shared_blks_dirtied::float8 as dirtied, wal_fpi::float8 as fpi, wal_bytes::float8 as wal, regexp_replace(left(query, 110), '\\s+', ' ', 'g') as query
       from pg_stat_statements order by total_exec_time desc limit 12`,
  );
  const per = (n: number) => (n / Math.max(1, count)).toFixed(2);
  log(`  statements per message (${f0(count)} messages; µs, calls, buffers hit / read / dirtied, full-page images, WAL bytes):`);
  for (const r of rows as Record<string, number | string | boolean>[]) {
    const n = (k: string) => Number(r[k]);
    log(
      `    ${((n("ms") * 1000) / Math.max(1, count)).toFixed(1).padStart(7)} µs ${per(n("calls")).padStart(6)} calls ${per(n("hit"))} / ${per(n("read"))} / ${per(n("dirtied"))} blks ${per(n("fpi"))} fpi ${per(n("wal"))} B ${r.toplevel ? "" : "(nested) "}${String(r.query)}`,
    );
  }
}

function render(
  empty: Phase,
  grown: Phase,
  sizes: { name: string; bytes: number; rows: number }[],
  fillSeconds: number,
  vacuumSeconds: number,
  s: GrowthSettings,
): string {
  const restOf = (p: Phase) => (p.rest.length ? median(p.rest, (r) => r.result.rps) : undefined);
  const p99Of = (p: Phase) => (p.rest.length ? median(p.rest, (r) => r.result.p99Ms).result.p99Ms : NaN);
  const dispatchOf = (p: Phase) => (p.dispatch.length ? median(p.dispatch, (d) => d.rate) : undefined);
  const [re, rg] = [restOf(empty), restOf(grown)];
  const [de, dg] = [dispatchOf(empty), dispatchOf(grown)];
  const lines = [
    `| Run (median of ${s.rounds}) | empty database | ${f0(ROWS)} messages stored | grown ÷ empty |`,
    "| --- | ---: | ---: | ---: |",
    `| REST Send SMS req/s | ${f0(re?.result.rps ?? NaN)} | ${f0(rg?.result.rps ?? NaN)} | ${f2((rg?.result.rps ?? NaN) / (re?.result.rps ?? NaN))} |`,
    `| REST p50 ms | ${f2(re?.result.p50Ms ?? NaN)} | ${f2(rg?.result.p50Ms ?? NaN)} | ${f2((rg?.result.p50Ms ?? NaN) / (re?.result.p50Ms ?? NaN))} |`,
    `| REST p99 ms | ${f2(p99Of(empty))} | ${f2(p99Of(grown))} | ${f2(p99Of(grown) / p99Of(empty))} |`,
    `| REST errors | ${re?.result.errors ?? "—"} | ${rg?.result.errors ?? "—"} | |`,
    `| REST Node / PostgreSQL CPU µs per send | ${f0(re?.serverCpuUs ?? NaN)} / ${f0(re?.dbCpuUs ?? NaN)} | ${f0(rg?.serverCpuUs ?? NaN)} / ${f0(rg?.dbCpuUs ?? NaN)} | ${f2((rg?.dbCpuUs ?? NaN) / (re?.dbCpuUs ?? NaN))} (PostgreSQL) |`,
    `| Dispatcher msg/s (${f0(s.dispatch)} due) | ${f0(de?.rate ?? NaN)} | ${f0(dg?.rate ?? NaN)} | ${f2((dg?.rate ?? NaN) / (de?.rate ?? NaN))} |`,
    `| Dispatcher Node / PostgreSQL CPU µs per message | ${f0(de?.serverCpuUs ?? NaN)} / ${f0(de?.dbCpuUs ?? NaN)} | ${f0(dg?.serverCpuUs ?? NaN)} / ${f0(dg?.dbCpuUs ?? NaN)} | ${f2((dg?.dbCpuUs ?? NaN) / (de?.dbCpuUs ?? NaN))} (PostgreSQL) |`,
    "",
    `Every round: REST ${[empty, grown].map((p) => p.rest.map((r) => `${f0(r.result.rps)} req/s p99 ${f2(r.result.p99Ms)} ms`).join(", ")).join(" | ")}; dispatcher ${[
      empty,
      grown,
    ]
      .map((p) => p.dispatch.map((d) => `${f0(d.rate)}${d.complete ? "" : " (not drained)"}`).join(", "))
      .join(" | ")} msg/s (empty | grown).`,
    "",
    `The fill: ${f0(ROWS)} messages in ${fillSeconds.toFixed(0)} s, VACUUM ANALYZE ${vacuumSeconds.toFixed(0)} s; sizes after it: ${sizes.map((z) => `${z.name} ${mib(z.bytes)}`).join(", ")}.`,
    "",
    "| Target | Measured | Verdict |",
    "| --- | --- | --- |",
  ];
  const verdict = (ok: boolean, miss: string) => (ok ? "met" : `missed: ${miss}`);
  const rps = (rg?.result.rps ?? NaN) / (re?.result.rps ?? NaN);
  const p99 = p99Of(grown) / p99Of(empty);
  const disp = (dg?.rate ?? NaN) / (de?.rate ?? NaN);
  lines.push(`| REST req/s grown ≥ 0.9 × empty | ${f2(rps)} × | ${verdict(rps >= 0.9, `${((0.9 - rps) * 100).toFixed(0)} points below 0.9 ×`)} |`);
  lines.push(`| REST p99 grown ≤ 1.5 × empty | ${f2(p99)} × | ${verdict(p99 <= 1.5, `${f2(p99 - 1.5)} × over`)} |`);
  if (s.dispatch > 0)
    lines.push(`| Dispatcher grown ≥ 0.9 × empty | ${f2(disp)} × | ${verdict(disp >= 0.9, `${((0.9 - disp) * 100).toFixed(0)} points below 0.9 ×`)} |`);
  return lines.join("\n");
}
