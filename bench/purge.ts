/**
 * Retention (issue 33), selected by `BENCH_ONLY=purge` (`npm run bench`): the built service (as
 * `npm start` runs it, without a retention setting) on a fresh PostgreSQL database holding
 * BENCH_PURGE_MESSAGES (1,000,000) settled messages created 40 days ago, one in ten with a
 * delivered receipt webhook and its attempt. REST sends (wrk, BENCH_PURGE_CONNECTIONS connections,
 * each pausing BENCH_PURGE_DELAY_MS between requests: a steady load below the maximum) run for
 * BENCH_PURGE_SECONDS first alone, then while a worker process (`npm run worker` with
 * MESSAGE_RETENTION_DAYS=30, and PURGE_BATCH_SIZE / PURGE_PAUSE_MS passed on) purges them.
 * Reports send p99 both ways, the purge's rate (its own `retention pass done` line), and the
 * sizes of the tables and their indexes before, right after the purge, after a VACUUM, and after
 * a second VACUUM and as many new messages again (whether the freed space is reused). Prints only.
 */
import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import pg, { type Client } from "pg";
import { freePort } from "../test/support/kannel.js";
import { buildService, startService, stopService, type Service } from "../test/support/service.js";
import { type LoadResult, VARY, wrk } from "./load.js";
import { adminCall } from "./service-runs.js";

const env = process.env;
const num = (name: string, def: number) => (env[name] ? Number(env[name]) : def);
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdefghijklmnop";
const MESSAGES = num("BENCH_PURGE_MESSAGES", 1_000_000);
const SECONDS = num("BENCH_PURGE_SECONDS", 15);
const CONNECTIONS = num("BENCH_PURGE_CONNECTIONS", 10);
const DELAY_MS = num("BENCH_PURGE_DELAY_MS", 10);
const INSERT_CHUNK = 100_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;
const f0 = (x: number) => x.toFixed(0);
const f2 = (x: number) => x.toFixed(2);

interface Sizes {
  messages: number;
  messagesIndexes: number;
  webhooks: number;
  webhooksIndexes: number;
  rows: number;
}

async function sizes(db: Client): Promise<Sizes> {
  const r = await db.query(
    `select pg_relation_size('messages')::float8 as m, pg_indexes_size('messages')::float8 as mi,
            (pg_relation_size('webhook_deliveries') + pg_relation_size('webhook_attempts'))::float8 as w,
            (pg_indexes_size('webhook_deliveries') + pg_indexes_size('webhook_attempts'))::float8 as wi,
            (select count(*) from messages)::float8 as n`,
  );
  const row = r.rows[0] as Record<string, number>;
  return { messages: row.m, messagesIndexes: row.mi, webhooks: row.w, webhooksIndexes: row.wi, rows: row.n };
}

/** N settled messages of a property created `daysAgo` days ago (spread over a day), one in ten with a delivered receipt webhook and its attempt. */
async function insertMessages(db: Client, accountSid: string, propertySid: string, n: number, daysAgo: number, tag: string): Promise<void> {
  for (let from = 0; from < n; from += INSERT_CHUNK) {
    const count = Math.min(INSERT_CHUNK, n - from);
    await db.query(
      `with m as (
         insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at, created_at, delivered_at)
         select 'MG' || $5 || lpad(i::text, 27, '0'), $1, $2, 'Transmit', 'Delivered', '+447700900001', '+447700900002',
                'Your code is ' || (i % 1000000), 'GSM7', 1, t, t, t
           from generate_series($3::int + 1, $3::int + $6::int) as i,
                lateral (select now() - make_interval(days => $4::int) + make_interval(secs => i % 86400) as t) c
         returning sid, account_sid, created_at),
       d as (
         insert into webhook_deliveries (id, account_sid, message_sid, event_type, url, target_host, method, payload, status, attempts, next_attempt_at, created_at, delivered_at)
         select 'msg_' || m.sid, m.account_sid, m.sid, 'DeliveryReceipt', 'https://hooks.example.com/dr', 'hooks.example.com', 'POST',
                jsonb_build_object('Type', 'DeliveryReceipt', 'MessageSid', m.sid), 'Delivered', 1, m.created_at, m.created_at, m.created_at
           from m where right(m.sid, 1) = '0'
         returning id, created_at)
       insert into webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms)
       select d.id, d.created_at, 200, '', 12 from d`,
      [accountSid, propertySid, from, daysAgo, tag, count],
    );
  }
}

function line(label: string, s: Sizes): string {
  return `| ${label} | ${s.rows.toLocaleString("en")} | ${mib(s.messages)} | ${mib(s.messagesIndexes)} | ${mib(s.webhooks)} | ${mib(s.webhooksIndexes)} |`;
}

export async function benchPurge(log: (s: string) => void): Promise<string> {
  buildService();
  const pgUrl = env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  const dbName = `sb_purge_${process.pid}_${randomBytes(3).toString("hex")}`;
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  await admin.query(`create database "${dbName}"`);
  const dbUrl = new URL(pgUrl);
  dbUrl.pathname = `/${dbName}`;
  const baseEnv = { DATABASE_URL: dbUrl.toString(), SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: "error", SEND_RATE_LIMIT: "off", CARRIER: "simulator" };
  let svc: Service | undefined;
  let worker: Service | undefined;
  const db = new pg.Client({ connectionString: dbUrl.toString() });
  try {
    svc = await startService({ port: await freePort(), compiled: true, env: baseEnv });
    await db.connect();
    const call = adminCall(svc!.base, ADMIN_TOKEN);
    const acc = await call("/admin/v1/Accounts", { Name: "Purge", SmsEnabled: true });
    const prop = await call(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "P", SmsEnabled: true });
    const sender = "+447700900001";
    await call("/admin/v1/Numbers", { Number: sender, AccountSid: acc.AccountSid });
    const auth = `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}`;

    let t0 = performance.now();
    await insertMessages(db, acc.AccountSid, prop.PropertySid, MESSAGES, 40, "old");
    await db.query("vacuum analyze messages, webhook_deliveries, webhook_attempts");
    log(`purge: ${MESSAGES} expired messages inserted in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const before = await sizes(db);

    const req = {
      url: `${svc.base}/v2/Properties/${prop.PropertySid}/Messages`,
      method: "POST" as const,
      headers: { authorization: auth, "content-type": "application/json" },
      body: JSON.stringify({ From: sender, To: `+4477009${VARY}`, Text: "Hello from the purge benchmark" }),
    };
    const load = { connections: CONNECTIONS, threads: 1, seconds: SECONDS, delayMs: DELAY_MS };
    await wrk(req, { ...load, seconds: 5 });
    const alone: LoadResult = await wrk(req, load);
    log(
      `  sends alone: ${f0(alone.rps)} req/s, p50 ${f2(alone.p50Ms)} ms, p99 ${f2(alone.p99Ms)} ms, errors ${alone.errors} (load ${loadavg()[0].toFixed(2)})`,
    );

    // The purge: a worker process, as `npm run worker` runs it, with a retention of 30 days.
    const expired = async () => Number((await db.query("select count(*)::int as n from messages where created_at < now() - interval '30 days'")).rows[0].n);
    let pass: { purged: number; ms: number; webhooks: number } | undefined;
    t0 = performance.now();
    worker = await startService({
      port: await freePort(),
      compiled: true,
      script: "src/worker.ts",
      waitReady: false,
      env: {
        ...baseEnv,
        LOG_LEVEL: "info",
        MESSAGE_RETENTION_DAYS: "30",
        ...(env.PURGE_BATCH_SIZE ? { PURGE_BATCH_SIZE: env.PURGE_BATCH_SIZE } : {}),
        ...(env.PURGE_PAUSE_MS ? { PURGE_PAUSE_MS: env.PURGE_PAUSE_MS } : {}),
      },
      onLine: (l) => {
        if (l.includes("retention pass done") && !pass) pass = JSON.parse(l);
      },
    });
    while ((await expired()) >= MESSAGES && performance.now() - t0 < 60_000) await sleep(100);
    const during: LoadResult = await wrk(req, load);
    const leftAfterSends = await expired();
    log(
      `  sends during the purge: ${f0(during.rps)} req/s, p50 ${f2(during.p50Ms)} ms, p99 ${f2(during.p99Ms)} ms, errors ${during.errors}; ${leftAfterSends} expired left when they ended (load ${loadavg()[0].toFixed(2)})`,
    );
    while (!pass && performance.now() - t0 < 3_600_000) await sleep(250);
    if (!pass) throw new Error("the worker's retention pass did not finish within an hour");
    const rate = (pass.purged / pass.ms) * 1000;
    log(`  purge: ${pass.purged} messages (${pass.webhooks} webhook calls) in ${(pass.ms / 1000).toFixed(1)} s: ${f0(rate)} messages/s`);
    await stopService(worker);
    worker = undefined;

    const afterPurge = await sizes(db);
    await db.query("vacuum analyze messages, webhook_deliveries, webhook_attempts");
    const afterVacuum = await sizes(db);
    // B-tree pages a VACUUM deletes become free for reuse only at a later one (once no snapshot can still see them).
    await db.query("vacuum analyze messages, webhook_deliveries, webhook_attempts");
    await insertMessages(db, acc.AccountSid, prop.PropertySid, MESSAGES, 1, "new");
    await db.query("analyze messages, webhook_deliveries, webhook_attempts");
    const refilled = await sizes(db);

    const ratio = during.p99Ms / alone.p99Ms;
    return [
      `Retention purge: ${MESSAGES.toLocaleString("en")} expired messages (one in ten with a receipt webhook and its attempt), PostgreSQL, ${new Date().toISOString()}, load ${loadavg()
        .map((x) => x.toFixed(2))
        .join(" ")}`,
      `REST sends: ${CONNECTIONS} connections, ${DELAY_MS} ms pause per request, ${SECONDS} s each run`,
      "",
      "| Sends | req/s | p50 | p99 | errors |",
      "|---|---|---|---|---|",
      `| alone | ${f0(alone.rps)} | ${f2(alone.p50Ms)} ms | ${f2(alone.p99Ms)} ms | ${alone.errors} |`,
      `| during the purge | ${f0(during.rps)} | ${f2(during.p50Ms)} ms | ${f2(during.p99Ms)} ms | ${during.errors} |`,
      "",
      `p99 during / alone: ${f2(ratio)} (target ≤ 1.5); ${leftAfterSends.toLocaleString("en")} expired messages were still left when the sends ended (the purge ran throughout: ${leftAfterSends > 0 ? "yes" : "no"})`,
      `Purge: ${pass.purged.toLocaleString("en")} messages and ${pass.webhooks.toLocaleString("en")} webhook calls in ${(pass.ms / 1000).toFixed(1)} s: ${f0(rate)} messages/s (PURGE_BATCH_SIZE ${env.PURGE_BATCH_SIZE ?? 1000}, PURGE_PAUSE_MS ${env.PURGE_PAUSE_MS ?? 100})`,
      "",
      "| Moment | messages rows | messages | its indexes | webhook tables | their indexes |",
      "|---|---|---|---|---|---|",
      line("before the purge", before),
      line("right after it", afterPurge),
      line("after VACUUM", afterVacuum),
      line(`after a second VACUUM and ${MESSAGES.toLocaleString("en")} new messages`, refilled),
    ].join("\n");
  } finally {
    if (worker) await stopService(worker).catch(() => undefined);
    if (svc) await stopService(svc).catch(() => undefined);
    await db.end().catch(() => undefined);
    await admin.query(`drop database if exists "${dbName}" with (force)`).catch(() => undefined);
    await admin.end();
  }
}
