/**
 * A message's whole life in PostgreSQL, per message (issue 32), selected by `BENCH_ONLY=life`:
 * the built service (API + delivery engine, simulator carrier, as `npm start` runs it) on a
 * private PostgreSQL cluster (bench/private-pg.ts: its statistics and WAL are then this run's
 * alone) with pg_stat_statements loaded. After a warm-up, the statistics are reset, the window
 * starts at a checkpoint, BENCH_LIFE_MESSAGES REST sends go in (BENCH_LIFE_CONNECTIONS at a time)
 * and the window ends when every one of them is final. Read per message: the statements by kind
 * and the costliest ones (pg_stat_statements, track = all), WAL bytes, records and full-page
 * images (pg_stat_wal, and pg_waldump by relation), inserts, updates and heap-only updates per
 * table (pg_stat_user_tables), B-tree leaf entries per index (counted in the WAL: bench/wal-stats.ts),
 * and the dispatcher's claims. The bench's own reads run as another role and are left out.
 */
import { createServer, type Server } from "node:http";
import { loadavg } from "node:os";
import { join } from "node:path";
import pg, { type Client } from "pg";
import { freePort } from "../test/support/kannel.js";
import { buildService, startService, stopService, type Service } from "../test/support/service.js";
import { startPrivateCluster, type PrivateCluster } from "./private-pg.js";
import { adminCall, benchHeader, SMS, writeBenchmarks } from "./service-runs.js";
import { leafEntries, walByRelation, type WalByRelation } from "./wal-stats.js";

const env = process.env;
const num = (name: string, def: number) => (env[name] ? Number(env[name]) : def);
const MESSAGES = num("BENCH_LIFE_MESSAGES", 20_000);
const CONNECTIONS = num("BENCH_LIFE_CONNECTIONS", 50);
/** 1: every send asks for a delivery-receipt webhook (to a receiver in this process), so the life includes the outbox. */
const WEBHOOK = env.BENCH_LIFE_WEBHOOK === "1";
/** Autovacuum is off unless 1: its writes are not a message's own, and when it runs in a short window is chance. */
const AUTOVACUUM = env.BENCH_LIFE_AUTOVACUUM === "1";
const WARMUP = 500;
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdefghijklmnop";
/** The role the bench's own reads run as, so that pg_stat_statements can leave them out. */
const OBSERVER = "sb_observer";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "—");
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "—");
const f3 = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : "—");

/** What a statement is for, from its text (first match wins). */
const KINDS: [RegExp, string][] = [
  [/sb_claim_due|sb_claim_fair|sb_due_accounts|claimed_until = p_until|where q\.queued/i, "dispatcher claim"],
  [/sb_record_submissions|then 'Submitted'/i, "submission"],
  [/sb_apply_(plain_)?final_states|delivered_at = v\.delivered_at/i, "final state (delivery report)"],
  [/sb_send_facts|insert into messages|token_hash/i, "send batch (facts + insert)"],
  // The foreign keys' triggers: each inserted message checks its account and property (FOR KEY SHARE).
  [/^SELECT 1 FROM ONLY/, "foreign-key check"],
  [/webhook_/i, "webhook outbox"],
  [/limit_buckets|sb_take_tokens/i, "limits"],
  [/from emails|into emails|update emails/i, "mail outbox"],
  [/carrier_segments|carrier_pending_receipts|inbound_parts/i, "carrier segments"],
  [/submitted_at is not null/i, "receipt timeout sweep"],
  [/idempotency_keys/i, "idempotency keys"],
  [/^\s*(begin|commit|rollback|savepoint|release|set |show )/i, "transaction / session"],
  [/from (accounts|properties|numbers|carriers|routes)\b/i, "lookups"],
];
const kindOf = (query: string) => KINDS.find(([re]) => re.test(query))?.[1] ?? "other";

/** A relation of the service's database by "<db oid>/<relfilenode>", as pg_waldump names it; `of_table`: an index's (or TOAST index's) table. */
interface Relation {
  key: string;
  name: string;
  kind: string;
  of_table: string;
}

interface Statement {
  query: string;
  toplevel: boolean;
  calls: number;
  rows: number;
  totalMs: number;
  walBytes: number;
  walFpi: number;
}

/** A webhook receiver that answers every call 204. */
async function receiver(): Promise<{ server: Server; url: string; calls: () => number }> {
  let calls = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      calls++;
      res.writeHead(204).end();
    });
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${port}/receipts`, calls: () => calls };
}

/** `n` REST sends, `connections` at a time; recipients differ per send. */
async function sendAll(
  url: string,
  auth: string,
  n: number,
  connections: number,
  extra: object,
): Promise<{ ok: number; failed: number; seconds: number; firstError?: string }> {
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstError: string | undefined;
  const t0 = performance.now();
  const worker = async () => {
    while (next < n) {
      const i = next++;
      try {
        const res = await fetch(url, {
          method: "POST",
          headers: { authorization: auth, "content-type": "application/json" },
          body: JSON.stringify({ From: SMS.from, To: `+4477009${String(10000 + (i % 90000))}`, Text: SMS.text, ...extra }),
        });
        const body = await res.text();
        if (res.status === 200) ok++;
        else {
          failed++;
          firstError ??= `${res.status} ${body.slice(0, 300)}`;
        }
      } catch (e) {
        failed++;
        firstError ??= String(e);
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return { ok, failed, seconds: (performance.now() - t0) / 1000, firstError };
}

interface Counts {
  ins: number;
  upd: number;
  hot: number;
  del: number;
}
type TableCounts = Map<string, Counts>;

async function tableCounts(db: Client): Promise<TableCounts> {
  const r = await db.query("select relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del from pg_stat_user_tables");
  return new Map(
    r.rows.map((x): [string, Counts] => [
      x.relname,
      { ins: Number(x.n_tup_ins), upd: Number(x.n_tup_upd), hot: Number(x.n_tup_hot_upd), del: Number(x.n_tup_del) },
    ]),
  );
}

/**
 * Table and WAL counters reach the shared statistics only when a backend flushes them: when it
 * goes idle, but no sooner than a second after its last flush, and a backend that went idle
 * within that second waits PGSTAT_IDLE_INTERVAL (10 s) before it tries again. Ours is asked to;
 * the service's backends are waited out (a 2 s wait here counted ~5 % of a run's inserts short).
 */
async function settleStats(db: Client): Promise<void> {
  await db.query("select pg_stat_force_next_flush()").catch(() => undefined);
  await sleep(11_000);
}

export async function benchLife(log: (s: string) => void, opts: { write: boolean }): Promise<string> {
  buildService();
  const started = new Date();
  const load0 = loadavg();
  let cluster: PrivateCluster | undefined;
  let svc: Service | undefined;
  let hook: Awaited<ReturnType<typeof receiver>> | undefined;
  const clients: Client[] = [];
  const cleanup = async () => {
    if (svc) await stopService(svc).catch(() => undefined);
    for (const c of clients) await c.end().catch(() => undefined);
    hook?.server.close();
    cluster?.stop();
  };
  const onSigint = () => void cleanup().finally(() => process.exit(130));
  process.once("SIGINT", onSigint);
  try {
    cluster = await startPrivateCluster(
      {
        shared_preload_libraries: "'pg_stat_statements'",
        "pg_stat_statements.track": "all",
        "pg_stat_statements.max": "10000",
        autovacuum: AUTOVACUUM ? "on" : "off",
      },
      log,
    );
    const connect = async (db: string, user = OBSERVER) => {
      const url = new URL(cluster!.url);
      url.pathname = `/${db}`;
      url.username = user;
      const c = new pg.Client({ connectionString: url.toString() });
      await c.connect();
      clients.push(c);
      return c;
    };
    const admin = await connect("postgres", "postgres");
    await admin.query(`create role ${OBSERVER} superuser login`);
    await admin.query("create extension pg_stat_statements");
    await admin.query("create database switchboard");
    const serviceUrl = new URL(cluster.url);
    serviceUrl.pathname = "/switchboard";
    hook = WEBHOOK ? await receiver() : undefined;
    svc = await startService({
      port: await freePort(),
      compiled: true,
      env: {
        DATABASE_URL: serviceUrl.toString(),
        SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN,
        LOG_LEVEL: "warn",
        SEND_RATE_LIMIT: "off",
        CARRIER: "simulator",
        ...(WEBHOOK ? { WEBHOOK_ALLOW_PRIVATE: "true" } : {}),
      },
    });
    const call = adminCall(svc!.base, ADMIN_TOKEN);
    const acc = await call("/admin/v1/Accounts", { Name: "Life", SmsEnabled: true });
    const prop = await call(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Life", SmsEnabled: true });
    await call("/admin/v1/Numbers", { Number: SMS.from, AccountSid: acc.AccountSid });
    const auth = `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}`;
    const sendUrl = `${svc.base}/v2/Properties/${prop.PropertySid}/Messages`;
    const extra = hook ? { DeliveryReceiptWebhookUri: hook.url } : {};
    const db = await connect("switchboard");
    const stats = await connect("postgres");

    const unsettled = async () => {
      const r = await db.query("select count(*) filter (where queued or status = 'Submitted')::int as n from messages");
      const w = hook ? await db.query("select count(*) filter (where status = 'Pending')::int as n from webhook_deliveries") : undefined;
      return Number(r.rows[0].n) + Number(w?.rows[0].n ?? 0);
    };
    // Once a second, not more: the check reads the whole table, and a reader may prune pages (WAL) the service would have pruned later.
    const settle = async (what: string) => {
      const deadline = Date.now() + 600_000;
      while ((await unsettled()) > 0) {
        if (Date.now() > deadline) {
          log(`${what}: still not done after 600 s; going on`);
          return false;
        }
        await sleep(1000);
      }
      return true;
    };

    // Warm-up: prepared statements, plans and caches are made by the first calls, not by the life measured.
    const warm = await sendAll(sendUrl, auth, WARMUP, CONNECTIONS, extra);
    if (warm.ok !== WARMUP) throw new Error(`warm-up sends failed: ${warm.failed} of ${WARMUP}, first: ${warm.firstError}`);
    await settle("warm-up");
    await settleStats(db);

    // The window: a checkpoint first (as every run of the main bench), then the resets.
    await db.query("checkpoint");
    await stats.query("select pg_create_physical_replication_slot('sb_life', true)"); // keeps the window's WAL for pg_waldump
    await stats.query("select pg_stat_statements_reset()");
    await stats.query("select pg_stat_reset_shared('wal')");
    await db.query("select pg_stat_reset()");
    await settleStats(db);
    const tables0 = await tableCounts(db);
    const lsn0 = (await db.query("select pg_current_wal_insert_lsn()::text as l")).rows[0].l as string;
    const wal0 = (await db.query("select wal_records::float8 as r, wal_fpi::float8 as f, wal_bytes::float8 as b from pg_stat_wal")).rows[0];

    const hookCalls0 = hook?.calls() ?? 0;
    log(`life: ${MESSAGES} REST sends, ${CONNECTIONS} at a time${hook ? ", each with a delivery-receipt webhook" : ""}`);
    const sent = await sendAll(sendUrl, auth, MESSAGES, CONNECTIONS, extra);
    log(`  sent: ${sent.ok} answered 200, ${sent.failed} failed in ${sent.seconds.toFixed(1)} s${sent.firstError ? ` (first: ${sent.firstError})` : ""}`);
    const t0 = performance.now();
    const final = await settle("every message final");
    log(`  all final ${((performance.now() - t0) / 1000).toFixed(1)} s after the last send${final ? "" : " (NOT all: the figures include unfinished lives)"}`);
    await sleep(1000); // the last reports' stragglers, and the idle backends' statistics
    await settleStats(db);

    const lsn1 = (await db.query("select pg_current_wal_lsn()::text as l")).rows[0].l as string;
    const walLsnBytes = Number((await db.query("select pg_wal_lsn_diff($1, $2)::float8 as d", [lsn1, lsn0])).rows[0].d);
    const wal1 = (await db.query("select wal_records::float8 as r, wal_fpi::float8 as f, wal_bytes::float8 as b from pg_stat_wal")).rows[0];
    const tables1 = await tableCounts(db);
    const statements: Statement[] = (
      await stats.query(
        `select query, toplevel, calls::float8, rows::float8, total_exec_time::float8 as total_ms, wal_bytes::float8, wal_fpi::float8
           from pg_stat_statements
          where dbid = (select oid from pg_database where datname = 'switchboard') and userid <> (select oid from pg_roles where rolname = $1)`,
        [OBSERVER],
      )
    ).rows.map((r) => ({
      query: r.query as string,
      toplevel: r.toplevel as boolean,
      calls: r.calls,
      rows: r.rows,
      totalMs: r.total_ms,
      walBytes: r.wal_bytes,
      walFpi: r.wal_fpi,
    }));
    const relations = (
      await db.query(
        `select (select oid from pg_database where datname = current_database())::text || '/' || c.relfilenode::text as key,
                coalesce(t.relname, c.relname) as name, c.relkind::text as kind, coalesce(it.relname, ic.relname, '') as of_table
           from pg_class c
           left join pg_class t on t.reltoastrelid = c.oid
           left join pg_index i on i.indexrelid = c.oid left join pg_class ic on ic.oid = i.indrelid
           left join pg_class it on it.reltoastrelid = ic.oid
          where c.relfilenode <> 0 and c.relnamespace in (select oid from pg_namespace where nspname in ('public', 'pg_toast'))`,
      )
    ).rows as Relation[];
    const messageIndexes = (
      await db.query("select indexrelid::regclass::text as name, pg_get_expr(indpred, indrelid) as pred from pg_index where indrelid = 'messages'::regclass")
    ).rows as { name: string; pred: string | null }[];

    log(`  reading the window's WAL (${(walLsnBytes / 1048576).toFixed(1)} MiB) with pg_waldump`);
    const wal = await walByRelation(join(cluster.bin, "pg_waldump"), join(cluster.dataDir, "pg_wal"), lsn0, lsn1);
    await stats.query("select pg_drop_replication_slot('sb_life')");
    const pgVersion = (await db.query("show server_version")).rows[0].server_version as string;
    const sharedBuffers = (await db.query("show shared_buffers")).rows[0].shared_buffers as string;

    const report = render({
      n: sent.ok,
      sent,
      walLsnBytes,
      wal: { records: wal1.r - wal0.r, fpi: wal1.f - wal0.f, bytes: wal1.b - wal0.b },
      tables0,
      tables1,
      statements,
      relations,
      messageIndexes,
      walRel: wal,
      webhookCalls: hook ? hook.calls() - hookCalls0 : undefined,
    });
    const header = [
      ...benchHeader(started, load0),
      `- PostgreSQL ${pgVersion}, a private cluster (initdb defaults: fsync on, synchronous_commit on, shared_buffers ${sharedBuffers}; autovacuum ${AUTOVACUUM ? "on" : "off"}), pg_stat_statements.track = all; the window starts at a CHECKPOINT after ${WARMUP} warm-up sends`,
      `- ${f0(MESSAGES)} REST sends (${CONNECTIONS} at a time, From ${SMS.from}, 5-digit recipients, "${SMS.text}")${hook ? " each with a DeliveryReceiptWebhookUri" : ", no webhook"}; simulator carrier (report after 200 ms); the window ends when every message is final`,
    ].join("\n");
    const full = `${header}\n\n${report}\n`;
    if (opts.write) {
      writeBenchmarks(full, "life", "A message's life in PostgreSQL (issue 32)");
      log("results written to docs/benchmarks.md");
    }
    return full;
  } finally {
    process.removeListener("SIGINT", onSigint);
    await cleanup();
  }
}

function render(r: {
  n: number;
  sent: { ok: number; failed: number; seconds: number };
  walLsnBytes: number;
  wal: { records: number; fpi: number; bytes: number };
  tables0: TableCounts;
  tables1: TableCounts;
  statements: Statement[];
  relations: Relation[];
  messageIndexes: { name: string; pred: string | null }[];
  walRel: WalByRelation;
  webhookCalls?: number;
}): string {
  const n = Math.max(1, r.n);
  const per = (x: number) => x / n;
  const top = r.statements.filter((s) => s.toplevel);
  const sum = (xs: Statement[], f: (s: Statement) => number) => xs.reduce((a, s) => a + f(s), 0);
  const claims = top.filter((s) => /sb_claim_due|sb_claim_fair/.test(s.query));
  const dueAccounts = top.filter((s) => /sb_due_accounts/.test(s.query));
  const countsOf = (t: TableCounts, name: string): Counts => t.get(name) ?? { ins: 0, upd: 0, hot: 0, del: 0 };
  const diff = (name: string): Counts => {
    const a = countsOf(r.tables0, name);
    const b = countsOf(r.tables1, name);
    return { ins: b.ins - a.ins, upd: b.upd - a.upd, hot: b.hot - a.hot, del: b.del - a.del };
  };
  const m = diff("messages");
  const relName = new Map(r.relations.map((x): [string, Relation] => [x.key, x]));
  const walOf = (name: string) => [...r.walRel].find(([k]) => relName.get(k)?.name === name)?.[1];
  const indexEntries = r.messageIndexes.map((i) => ({ ...i, entries: leafEntries(walOf(i.name)) }));
  const commits = [...r.walRel].filter(([k]) => k === "-/Transaction").reduce((a, [, w]) => a + (w.byType.get("Transaction/COMMIT") ?? 0), 0);

  const lines = [
    `| Per message (${f0(r.n)} messages, ${r.sent.failed} failed sends) | |`,
    "| --- | ---: |",
    `| statements (top level) | ${f2(per(sum(top, (s) => s.calls)))} |`,
    // The foreign keys of messages (and of the webhook tables) are deferred: their checks run at commit, as top-level statements the service never sent.
    `| of them foreign-key checks run at commit (deferred keys) | ${f2(
      per(
        sum(
          top.filter((s) => kindOf(s.query) === "foreign-key check"),
          (s) => s.calls,
        ),
      ),
    )} |`,
    `| statement execution time (top level) | ${f0(per(sum(top, (s) => s.totalMs)) * 1000)} µs |`,
    `| write transactions (WAL commit records) | ${f3(per(commits))} |`,
    `| WAL bytes (pg_stat_wal; LSN difference) | ${f0(per(r.wal.bytes))}; ${f0(per(r.walLsnBytes))} |`,
    `| WAL records; full-page images | ${f2(per(r.wal.records))}; ${f3(per(r.wal.fpi))} |`,
    `| \`messages\`: inserts, updates, of them heap-only | ${f2(per(m.ins))}, ${f2(per(m.upd))}, ${f2(per(m.hot))} (${m.upd ? ((100 * m.hot) / m.upd).toFixed(0) : "—"} % HOT) |`,
    `| \`messages\` index entries written (B-tree leaf inserts in the WAL, all ${indexEntries.length} indexes) | ${f2(per(indexEntries.reduce((a, i) => a + i.entries, 0)))} |`,
    `| dispatcher claims (sb_claim_due / sb_claim_fair calls); messages per claim | ${f3(per(sum(claims, (s) => s.calls)))}; ${f0(
      sum(claims, (s) => s.rows) /
        Math.max(
          1,
          sum(claims, (s) => s.calls),
        ),
    )} |`,
    `| sb_due_accounts calls (the fair claim's account scan) | ${f3(per(sum(dueAccounts, (s) => s.calls)))} |`,
    ...(r.webhookCalls !== undefined ? [`| webhook calls received | ${f2(per(r.webhookCalls))} |`] : []),
  ];

  lines.push("", "Writes by table (pg_stat_user_tables) and their WAL with their indexes and TOAST (pg_waldump), per message:", "");
  lines.push(
    "| Table | inserts | updates | heap-only | deletes | WAL records | WAL bytes | full-page images |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  const walByTable = new Map<string, { records: number; bytes: number; fpi: number }>();
  for (const [key, w] of r.walRel) {
    const rel = relName.get(key);
    const table = key.startsWith("-/") ? `(no relation: ${key.slice(2)})` : rel ? rel.of_table || rel.name : `(other: ${key})`;
    const t = walByTable.get(table) ?? { records: 0, bytes: 0, fpi: 0 };
    walByTable.set(table, { records: t.records + w.records, bytes: t.bytes + w.bytes, fpi: t.fpi + w.fpi });
  }
  const names = new Set(
    [...r.tables1.keys()].filter((k) => {
      const d = diff(k);
      return d.ins + d.upd + d.del > 0;
    }),
  );
  for (const k of walByTable.keys()) names.add(k);
  const rows = [...names]
    .map((name) => ({ name, d: diff(name), w: walByTable.get(name) ?? { records: 0, bytes: 0, fpi: 0 } }))
    .sort((a, b) => b.w.bytes - a.w.bytes);
  for (const { name, d, w } of rows) {
    lines.push(
      `| ${name.startsWith("(") ? name : `\`${name}\``} | ${f3(per(d.ins))} | ${f3(per(d.upd))} | ${f3(per(d.hot))} | ${f3(per(d.del))} | ${f2(per(w.records))} | ${f0(per(w.bytes))} | ${f3(per(w.fpi))} |`,
    );
  }

  // Expected for the plain life (send, claim, submission, report): 4 entries at the insert (the
  // primary key, (property_sid, created_at), and the two queue indexes, whose predicate `queued`
  // holds), none at the claim (status, claimed_until and attempts are in no index: heap-only when
  // the page has room), 3 at the submission (it sets submitted_at and clears `queued`: not
  // heap-only; entries in the primary key, (property_sid, created_at) and submitted_at, whose
  // predicate now holds, none in the queue indexes), none at the final state: 7.
  lines.push("", "Index entries written per message (B-tree leaf inserts and leaf splits in the window's WAL):", "");
  lines.push("| Index of `messages` | predicate | entries | WAL bytes |", "| --- | --- | ---: | ---: |");
  for (const i of indexEntries)
    lines.push(`| \`${i.name}\` | ${i.pred ? `\`${i.pred}\`` : "—"} | ${f3(per(i.entries))} | ${f0(per(walOf(i.name)?.bytes ?? 0))} |`);
  const pkey = indexEntries.find((i) => i.name === "messages_pkey");
  if (pkey)
    lines.push(
      "",
      `Check: the primary key (no predicate) takes one entry per insert and per update that is not heap-only: ${f3(per(m.ins + m.upd - m.hot))} expected, ${f3(per(pkey.entries))} counted.`,
    );

  lines.push("", "Statements by kind (top level; a function's inner statements are inside its time and WAL):", "");
  lines.push("| Kind | calls per message | rows per call | execution µs per message | WAL bytes per message |", "| --- | ---: | ---: | ---: | ---: |");
  const kinds = new Map<string, Statement[]>();
  for (const s of top) kinds.set(kindOf(s.query), [...(kinds.get(kindOf(s.query)) ?? []), s]);
  for (const [kind, xs] of [...kinds].sort((a, b) => sum(b[1], (s) => s.totalMs) - sum(a[1], (s) => s.totalMs))) {
    const calls = sum(xs, (s) => s.calls);
    lines.push(
      `| ${kind} | ${f3(per(calls))} | ${f0(sum(xs, (s) => s.rows) / Math.max(1, calls))} | ${f0(per(sum(xs, (s) => s.totalMs)) * 1000)} | ${f0(per(sum(xs, (s) => s.walBytes)))} |`,
    );
  }

  lines.push("", "The 12 statements with the most execution time (top level and nested):", "");
  lines.push(
    "| Kind | level | calls per message | mean ms | µs per message | WAL bytes per message | statement |",
    "| --- | --- | ---: | ---: | ---: | ---: | --- |",
  );
  for (const s of [...r.statements].sort((a, b) => b.totalMs - a.totalMs).slice(0, 12)) {
    const text = s.query.replace(/\s+/g, " ").trim();
    const short = (text.length > 90 ? `${text.slice(0, 90)}…` : text).replaceAll("|", "\\|").replaceAll("`", "'");
    lines.push(
      `| ${kindOf(s.query)} | ${s.toplevel ? "top" : "nested"} | ${f3(per(s.calls))} | ${f3(s.totalMs / Math.max(1, s.calls))} | ${f0(per(s.totalMs) * 1000)} | ${f0(per(s.walBytes))} | \`${short}\` |`,
    );
  }
  return lines.join("\n");
}
