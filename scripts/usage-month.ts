/**
 * Measures a usage statement over a month of N messages (docs/billing.md#usage) on the database
 * of DATABASE_URL (PostgreSQL; migrated first): seeds one new account's October 2026 with N
 * messages (generate_series, a million a statement: six destinations, 1–3 segments, every tenth
 * refunded), rolls its usage up, then times the statement by day and by country, live (only up to
 * a million messages: a month read live is a scan of it) and rolled up.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/usage_bench node --import tsx scripts/usage-month.ts 10000000
 */
import { createUsageRollup } from "../src/billing/usage-rollup.js";
import { usageBy } from "../src/billing/usage-store.js";
import { newSid } from "../src/common/sid.js";
import { executeBound } from "../src/db/bound-sql.js";
import { createOrm, migrateUp } from "../src/db/orm.js";
import { entities } from "../src/entities.js";

const n = Number(process.argv[2] ?? 1_000_000);
const orm = await createOrm({ entities, databaseUrl: process.env.DATABASE_URL!, statementTimeoutMs: 3_600_000 });
await migrateUp(orm);
const em = orm.em.fork();
const account = newSid("AC");
const property = newSid("PR");
await executeBound(em, `insert into accounts (sid, token_hash, webhook_secret, created_at) values (?, 'x', 'y', now())`, [account]);
await executeBound(em, `insert into properties (sid, account_sid, created_at) values (?, ?, now())`, [property, account]);
const start = new Date("2026-10-01T00:00:00Z");
const step = Math.floor((31 * 86_400_000) / n);
const recipients = ["+61412345678", "+14155550100", "+14165550100", "+447400123456", "+447797123456", "+33612345678"];
const time = async <T>(what: string, f: () => Promise<T>): Promise<T> => {
  const t0 = performance.now();
  const r = await f();
  console.log(`${what}: ${Math.round(performance.now() - t0)} ms`);
  return r;
};
await time(`seeded ${n} messages`, async () => {
  for (let from = 0; from < n; from += 1_000_000) {
    const to = Math.min(n, from + 1_000_000);
    await executeBound(
      em,
      `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at, created_at, price, cost, carrier)
       select ? || lpad(i::text, 14, '0'), ?, ?, 'Transmit', 'Delivered', '+61400000000', (?::text[])[1 + i % 6], 'x', 'GSM7', 1 + i % 3, at, at, 10000 * (1 + i % 3), 3000, 'alpha'
         from generate_series(?::int, ?::int - 1) i, lateral (select ?::timestamptz + (i::bigint * ?::bigint) * interval '1 millisecond' as at) t`,
      [account.slice(0, 18).replace(/^AC/, "MG"), account, property, recipients, from, to, start, step],
    );
    await executeBound(
      em,
      `insert into balance_entries (account_sid, type, amount, balance_after, message_sid, reference, created_at)
       select ?, 'Refund', 10000 * (1 + i % 3), 0, ? || lpad(i::text, 14, '0'), '', now() from generate_series(?::int, ?::int - 1, 10) i`,
      [account, account.slice(0, 18).replace(/^AC/, "MG"), from, to],
    );
  }
  await executeBound(em, "analyze messages", []);
  await executeBound(em, "analyze balance_entries", []);
});
const q = (by: "day" | "country") => usageBy(orm.em.fork(), { accountSid: account, startDay: start, endDay: new Date("2026-11-01T00:00:00Z"), by });
if (n <= 1_000_000) {
  await time("live, by day", () => q("day"));
  await time("live, by country", () => q("country"));
}
await time("rollup", () => createUsageRollup({ orm, clock: { now: () => new Date("2026-11-02T00:00:00Z") } }).rollUpAccount(account));
for (let i = 0; i < 3; i++) {
  const days = await time("rolled up, by day", () => q("day"));
  const countries = await time("rolled up, by country", () => q("country"));
  if (i === 0) console.log(`${days.length} days; ${countries.map((c) => `${c.key} ${c.messages}`).join(", ")}`);
}
await orm.close(true);
