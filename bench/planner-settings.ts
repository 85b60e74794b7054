/**
 * The measurement behind the planner settings of the functions in src/messaging/sql/: for each
 * function, the generic plan of its statement (the one the function caches per connection) under
 * all four settings off, with each turned back on in turn, with none, and with the function's own
 * settings, on an analyzed `messages` table of MESSAGES rows (30: a new deployment, whose first
 * call makes the connection's plan; 300,000: a busy one). Run against a PostgreSQL server; it
 * creates and drops a scratch database:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres MESSAGES=30 npx tsx bench/planner-settings.ts
 */
import { executeBound } from "../src/db/bound-sql.js";
import { entities } from "../src/entities.js";
import { createOrm, migrateUp } from "../src/db/orm.js";

const SETTINGS = ["enable_seqscan", "enable_bitmapscan", "enable_hashjoin", "enable_mergejoin"];

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Relation Name"?: string;
  Plans?: PlanNode[];
}

const nodes = (p: PlanNode): PlanNode[] => [p, ...(p.Plans ?? []).flatMap(nodes)];
const shape = (p: PlanNode) =>
  nodes(p)
    .map((n) => n["Node Type"] + (n["Index Name"] ? `:${n["Index Name"]}` : n["Relation Name"] ? `:${n["Relation Name"]}` : ""))
    .join(" > ");
const sidArray = (from: number, to: number) =>
  `'{${Array.from({ length: to - from + 1 }, (_, i) => `MG${String(from + i).padStart(30, "0")}`).join(",")}}'::text[]`;
const repeated = (v: string, type: string) => `'{${Array.from({ length: 100 }, () => v).join(",")}}'::${type}[]`;
const accounts = `'{${Array.from({ length: 20 }, (_, i) => `AC${String(i + 1).padStart(30, "0")}`).join(",")}}'::text[]`;
const FINAL = `${sidArray(294001, 294100)}, ${repeated("Delivered", "text")}, ${repeated("2026-11-25T10:00:00Z", "timestamptz")}, ${repeated('""', "text")}, ${repeated('""', "text")}, ${repeated("r1", "text")}, ${repeated("2026-11-25T10:00:00Z", "timestamptz")}, ${repeated("default", "text")}`;
const FINAL_TYPES = "text[], text[], timestamptz[], text[], text[], text[], timestamptz[], text[]";
const FUNCTIONS: [string, string, string][] = [
  ["sb_claim_due", "timestamptz, timestamptz, integer, boolean", "now() + interval '1 minute', now(), 500, false"],
  ["sb_claim_fair", "timestamptz, text[], timestamptz, integer, boolean", `now() + interval '1 minute', ${accounts}, now(), 25, false`],
  ["sb_due_accounts", "timestamptz", "now()"],
  [
    "sb_record_submissions",
    "text[], text[], timestamptz[], text[]",
    `${sidArray(296001, 296100)}, ${repeated("r1", "text")}, ${repeated("2026-11-25T10:00:00Z", "timestamptz")}, ${repeated("default", "text")}`,
  ],
  ["sb_apply_final_states", FINAL_TYPES, FINAL],
  ["sb_apply_plain_final_states", FINAL_TYPES, FINAL],
];

const server = process.env.DATABASE_URL ?? "";
if (!/^postgres(ql)?:\/\//.test(server)) throw new Error("DATABASE_URL must name a PostgreSQL server");
const total = Number(process.env.MESSAGES ?? 300_000);
const scratch = `sb_planner_settings_${process.pid}`;
const admin = await createOrm({ entities, databaseUrl: server });
await admin.em.fork().execute(`create database "${scratch}"`);
const url = new URL(server);
url.pathname = `/${scratch}`;
const orm = await createOrm({ entities, databaseUrl: url.toString() });
try {
  await migrateUp(orm);
  const em = orm.em.fork();
  await executeBound(
    em,
    "insert into accounts (sid, token_hash, webhook_secret) select 'AC' || lpad(g::text, 30, '0'), 'x', 'y' from generate_series(1, 50) g",
    [],
  );
  await executeBound(
    em,
    "insert into properties (sid, account_sid) select 'PR' || lpad(g::text, 30, '0'), 'AC' || lpad(g::text, 30, '0') from generate_series(1, 50) g",
    [],
  );
  // Of 300,000 Sids, `total` spread evenly: mostly Delivered, then Submitted, Processing and due Scheduled ones.
  await executeBound(
    em,
    `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at, created_at, submitted_at, delivered_at, carrier_ref)
     select 'MG' || lpad(g::text, 30, '0'), 'AC' || lpad((g % 50 + 1)::text, 30, '0'), 'PR' || lpad((g % 50 + 1)::text, 30, '0'), 'Transmit',
            case when g <= 294000 then 'Delivered' when g <= 296000 then 'Submitted' when g <= 297000 then 'Processing' else 'Scheduled' end,
            '+447700900001', '+4479110' || lpad((g % 100000)::text, 5, '0'), 'hello there', 'GSM7', 1,
            now() - interval '2 days' + g * interval '0.5 s', now() - interval '2 days' + g * interval '0.5 s',
            case when g <= 296000 then now() - interval '2 days' + g * interval '0.5 s' end,
            case when g <= 294000 then now() - interval '2 days' + g * interval '0.5 s' end, 'ref' || g
       from generate_series(1, 300000) g where g % ? = 0`,
    [Math.max(1, Math.round(300_000 / total))],
  );
  await executeBound(em, "analyze", []);

  const plan = async (name: string, types: string, args: string, off: string[]): Promise<{ shape: string; ms: number }> => {
    const [fn] = await executeBound<{ prosrc: string; args: string }>(
      em,
      "select prosrc, pg_get_function_arguments(oid) as args from pg_proc where proname = ?",
      [name],
    );
    const body = /return query([\s\S]*);\s*end\s*$/.exec(fn.prosrc)![1];
    const params = fn.args.split(",").map((a) => a.trim().split(" ")[0]);
    const sql = params.reduce((text, p, i) => text.replace(new RegExp(`\\b${p}\\b`, "g"), `$${i + 1}`), body);
    let result = { shape: "", ms: 0 };
    const rollback = new Error("rollback");
    await em
      .transactional(async (tx) => {
        for (const s of off) await executeBound(tx, "select set_config(?, 'off', true)", [s]);
        await executeBound(tx, "select set_config('plan_cache_mode', 'force_generic_plan', true)", []);
        await executeBound(tx, `prepare planner_settings(${types}) as ${sql}`, []);
        const [row] = await executeBound<{ "QUERY PLAN": unknown }>(tx, `explain (analyze, format json) execute planner_settings(${args})`, []);
        await executeBound(tx, "deallocate planner_settings", []);
        const json = row["QUERY PLAN"];
        const [out] = (typeof json === "string" ? JSON.parse(json) : json) as { Plan: PlanNode; "Execution Time": number }[];
        result = { shape: shape(out.Plan), ms: out["Execution Time"] };
        throw rollback;
      })
      .catch((e: unknown) => {
        if (e !== rollback) throw e;
      });
    return result;
  };

  for (const [name, types, args] of FUNCTIONS) {
    const all = await plan(name, types, args, SETTINGS);
    const [cfg] = await executeBound<{ proconfig: string[] | string }>(em, "select proconfig from pg_proc where proname = ?", [name]);
    const config = Array.isArray(cfg.proconfig) ? cfg.proconfig : String(cfg.proconfig).replace(/^{|}$/g, "").split(",");
    const own = config.filter((c) => c.startsWith("enable_")).map((c) => c.split("=")[0]);
    console.log(`\n${name} (${total} messages), all four off: ${all.ms.toFixed(2)} ms  ${all.shape}`);
    const rows: [string, string[]][] = [
      ...SETTINGS.map((s): [string, string[]] => [`${s} on`, SETTINGS.filter((x) => x !== s)]),
      ["none off", []],
      [`its own (${own.join(", ")})`, own],
    ];
    for (const [label, off] of rows) {
      const p = await plan(name, types, args, off);
      console.log(`  ${label}: ${p.ms.toFixed(2)} ms  ${p.shape === all.shape ? "(same plan)" : p.shape}`);
    }
  }
} finally {
  await orm.close(true);
  await admin.em.fork().execute(`drop database if exists "${scratch}" with (force)`);
  await admin.close(true);
}
