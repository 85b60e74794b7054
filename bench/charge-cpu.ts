/**
 * The charge's CPU per send, without HTTP load or a load generator (issue 43): one app in this
 * process on PostgreSQL (DATABASE_URL), an unpriced account and a Prepaid one on a card, and
 * rounds of `CHARGE_CPU_BATCHES` group commits of `CHARGE_CPU_SENDS` concurrent sends each,
 * alternating the two accounts. Per send: this process's CPU (process.cpuUsage) and the database
 * backends' CPU (/proc of the pids in pg_stat_activity for the test database), which a busy
 * machine inflates far less than it moves throughput. Usage:
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx bench/charge-cpu.ts
 */
import { readFileSync } from "node:fs";
import { executeBound } from "../src/db/bound-sql.js";
import { createTestOrm } from "../test/support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant } from "../test/support/harness.js";

const SENDS = Number(process.env.CHARGE_CPU_SENDS ?? 15);
const BATCHES = Number(process.env.CHARGE_CPU_BATCHES ?? 300);
const ROUNDS = Number(process.env.CHARGE_CPU_ROUNDS ?? 5);

const db = await createTestOrm();
const t = await createTestApp({ db, config: { sendRateLimit: 0 } });
const op = { authorization: `Bearer ${ADMIN_TOKEN}` };
const put = await t.app.inject({
  method: "PUT",
  url: "/admin/v1/RateCards/cpu",
  headers: op,
  payload: {
    Rates: [
      { Prefix: "+614", PricePerSegment: "0.0525" },
      { Prefix: "+61", PricePerSegment: "0.07" },
    ],
  },
});
if (put.statusCode !== 200) throw new Error(put.body);
const plain = await createTenant(t.app);
const prepaid = await createTenant(t.app);
for (const [url, payload] of [
  [`/admin/v1/Accounts/${prepaid.accountSid}`, { RateCard: "cpu", BillingMode: "Prepaid" }],
  [`/admin/v1/Accounts/${prepaid.accountSid}/BalanceEntries`, { Type: "TopUp", Amount: "999999999", Reference: "cpu" }],
] as const) {
  const r = await t.app.inject({ method: "POST", url, headers: op, payload });
  if (r.statusCode !== 200) throw new Error(r.body);
}

const em = () => db.orm.em.fork();
const dbName = (await executeBound<{ d: string }>(em(), "select current_database() as d", []))[0].d;
async function backendCpuMs(): Promise<number> {
  const pids = await executeBound<{ pid: number }>(em(), "select pid from pg_stat_activity where datname = ?", [dbName]);
  let ticks = 0;
  for (const { pid } of pids) {
    try {
      const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // a backend that ended
    }
  }
  return ticks * 10;
}

let n = 0;
async function batches(tn: Tenant, count: number): Promise<void> {
  for (let b = 0; b < count; b++) {
    const answers = await Promise.all(
      Array.from({ length: SENDS }, () =>
        t.app.inject({
          method: "POST",
          url: `/v2/Properties/${tn.propertySid}/Messages`,
          headers: { authorization: tn.auth },
          payload: { From: tn.ownedNumber, To: `+614${String(10_000_000 + (n++ % 89_999_999))}`, Text: "Hello from the charge CPU bench" },
        }),
      ),
    );
    for (const a of answers) if (a.statusCode !== 200) throw new Error(a.body);
  }
}

const results: Record<string, { node: number[]; db: number[] }> = { unpriced: { node: [], db: [] }, prepaid: { node: [], db: [] } };
await batches(plain, 50);
await batches(prepaid, 50);
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, tn] of [
    ["unpriced", plain],
    ["prepaid", prepaid],
  ] as const) {
    if (process.env.CHARGE_CPU_ONLY && process.env.CHARGE_CPU_ONLY !== name) continue;
    const c0 = process.cpuUsage();
    const d0 = await backendCpuMs();
    await batches(tn, BATCHES);
    const c = process.cpuUsage(c0);
    const d = (await backendCpuMs()) - d0;
    const sends = BATCHES * SENDS;
    results[name].node.push((c.user + c.system) / sends);
    results[name].db.push((d * 1000) / sends);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const [name, r] of Object.entries(results)) {
  if (r.node.length === 0) continue;
  console.log(
    `${name.padEnd(9)} node ${r.node.map((x) => x.toFixed(0)).join(" ")} (median ${median(r.node).toFixed(0)} µs/send)   db ${r.db.map((x) => x.toFixed(0)).join(" ")} (median ${median(r.db).toFixed(0)} µs/send)`,
  );
}
const commits = await executeBound<{ n: string }>(em(), "select count(*)::text as n from balance_entries where account_sid = ?", [prepaid.accountSid]);
console.log(`prepaid ledger rows: ${commits[0].n} for ${(ROUNDS * BATCHES + 50) * SENDS} charges`);
await t.close();
await db.close();
