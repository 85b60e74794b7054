/**
 * Hostile load (issue 27), selected by `BENCH_ONLY=read-flood` and/or `BENCH_ONLY=webhook-flood`
 * (`npm run bench`): the built service (as `npm start` runs it) on a fresh PostgreSQL database.
 * - read-flood: account A holds 300,000 messages (one INSERT … SELECT generate_series) and runs
 *   BENCH_READERS (40) concurrent `GET …/Messages?Status=Received&Results_Count=1000` for
 *   BENCH_FLOOD_SECONDS (20); account B sends one message at a time, quiet first, then under the flood.
 * - webhook-flood: A queues 300 receipts to 40 host names (a test DNS server answers 127.0.0.1 for
 *   all) whose receiver never answers; then B sends one message with a receipt to a receiver that
 *   answers at once: B's receipt latency from its send.
 * Prints one report; writes nothing.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import pg from "pg";
import { startDnsServer } from "../test/support/dns-server.js";
import { freePort } from "../test/support/kannel.js";
import { buildService, startService, stopService, type Service } from "../test/support/service.js";
import { adminCall } from "./service-runs.js";

const env = process.env;
const num = (name: string, def: number) => (env[name] ? Number(env[name]) : def);
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdefghijklmnop";
const MESSAGES = num("BENCH_FLOOD_MESSAGES", 300_000);
const READERS = num("BENCH_READERS", 40);
const FLOOD_SECONDS = num("BENCH_FLOOD_SECONDS", 20);
const QUIET_SECONDS = num("BENCH_QUIET_SECONDS", 10);

interface Tenant {
  accountSid: string;
  propertySid: string;
  number: string;
  auth: string;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};
const ms = (x: number) => `${x.toFixed(1)} ms`;

async function withService<T>(extraEnv: Record<string, string>, fn: (svc: Service, tenants: [Tenant, Tenant], dbUrl: string) => Promise<T>): Promise<T> {
  const pgUrl = env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  const dbName = `sb_hostile_${process.pid}_${randomBytes(3).toString("hex")}`;
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  await admin.query(`create database "${dbName}"`);
  const dbUrl = new URL(pgUrl);
  dbUrl.pathname = `/${dbName}`;
  let svc: Service | undefined;
  try {
    svc = await startService({
      port: await freePort(),
      compiled: true,
      env: { DATABASE_URL: dbUrl.toString(), SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: "error", SEND_RATE_LIMIT: "off", ...extraEnv },
    });
    const call = adminCall(svc!.base, ADMIN_TOKEN);
    const tenant = async (n: number): Promise<Tenant> => {
      const acc = await call("/admin/v1/Accounts", { Name: `Hostile ${n}`, SmsEnabled: true });
      const prop = await call(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "P", SmsEnabled: true });
      const number = `+4477009000${n}0`;
      await call("/admin/v1/Numbers", { Number: number, AccountSid: acc.AccountSid });
      return {
        accountSid: acc.AccountSid,
        propertySid: prop.PropertySid,
        number,
        auth: `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}`,
      };
    };
    return await fn(svc, [await tenant(1), await tenant(2)], dbUrl.toString());
  } finally {
    if (svc) await stopService(svc).catch(() => undefined);
    await admin.query(`drop database if exists "${dbName}" with (force)`).catch(() => undefined);
    await admin.end();
  }
}

let seq = 0;
async function send(base: string, t: Tenant, extra: object = {}): Promise<{ ms: number; status: number; sid?: string }> {
  const t0 = performance.now();
  const res = await fetch(`${base}/v2/Properties/${t.propertySid}/Messages`, {
    method: "POST",
    headers: { authorization: t.auth, "content-type": "application/json" },
    body: JSON.stringify({ From: t.number, To: `+4477009${String(++seq % 100_000).padStart(5, "0")}`, Text: "hi", ...extra }),
  });
  const body = (await res.json()) as { MessageSid?: string };
  return { ms: performance.now() - t0, status: res.status, sid: body.MessageSid };
}

/** B sends one at a time until `stop`; the latencies of its 200s and how many were not 200. */
async function sendLoop(base: string, b: Tenant, stop: () => boolean): Promise<{ ms: number[]; failed: number }> {
  const out = { ms: [] as number[], failed: 0 };
  while (!stop()) {
    const r = await send(base, b);
    if (r.status === 200) out.ms.push(r.ms);
    else out.failed++;
  }
  return out;
}

export async function benchReadFlood(log: (s: string) => void): Promise<string> {
  return withService({}, async (svc, [a, b], dbUrl) => {
    const db = new pg.Client({ connectionString: dbUrl });
    await db.connect();
    const t0 = performance.now();
    // Half inbound (Received), half delivered, spread over the last 30 days.
    await db.query(
      `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at, created_at)
       select 'MGflood' || lpad(i::text, 25, '0'), $1, $2,
              case when i % 2 = 0 then 'Receive' else 'Transmit' end,
              case when i % 2 = 0 then 'Received' else 'Delivered' end,
              '+447700900000', $3, 'flood message ' || i, 'GSM7', 1,
              now() - (i || ' seconds')::interval * 8, now() - (i || ' seconds')::interval * 8
         from generate_series(1, $4::int) as i`,
      [a.accountSid, a.propertySid, a.number, MESSAGES],
    );
    await db.query("analyze messages");
    log(`read-flood: ${MESSAGES} messages for A in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await db.end();

    for (let i = 0; i < 20; i++) await send(svc.base, b); // warm-up
    let end = performance.now() + QUIET_SECONDS * 1000;
    const quiet = await sendLoop(svc.base, b, () => performance.now() > end);
    log(`  quiet: ${quiet.ms.length} sends, p50 ${ms(pct(quiet.ms, 50))}`);

    const url = `${svc.base}/v2/Properties/${a.propertySid}/Messages?Status=Received&Results_Count=1000`;
    // One of A's pages alone: what each read of the flood costs.
    const alone: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r0 = performance.now();
      await (await fetch(url, { headers: { authorization: a.auth } })).arrayBuffer();
      alone.push(performance.now() - r0);
    }
    const answers = new Map<number, number>();
    const readMs: number[] = [];
    end = performance.now() + FLOOD_SECONDS * 1000;
    const stop = () => performance.now() > end;
    const reader = async () => {
      while (!stop()) {
        const r0 = performance.now();
        const res = await fetch(url, { headers: { authorization: a.auth } });
        await res.arrayBuffer();
        answers.set(res.status, (answers.get(res.status) ?? 0) + 1);
        if (res.status === 200) readMs.push(performance.now() - r0);
        else await new Promise((r) => setTimeout(r, 50)); // a hostile client retries at once, nearly
      }
    };
    const load0 = loadavg()[0];
    const [flood] = await Promise.all([sendLoop(svc.base, b, stop), ...Array.from({ length: READERS }, reader)]);
    const lines = [
      `### read-flood (${MESSAGES.toLocaleString("en")} messages for A, ${READERS} concurrent Status=Received&Results_Count=1000 reads for ${FLOOD_SECONDS} s)`,
      "",
      "| B's sends | count | p50 | p99 | not 200 |",
      "|---|---:|---:|---:|---:|",
      `| quiet (${QUIET_SECONDS} s) | ${quiet.ms.length} | ${ms(pct(quiet.ms, 50))} | ${ms(pct(quiet.ms, 99))} | ${quiet.failed} |`,
      `| under A's read flood | ${flood.ms.length} | ${ms(pct(flood.ms, 50))} | ${ms(pct(flood.ms, 99))} | ${flood.failed} |`,
      "",
      `A's reads: ${[...answers].map(([s, n]) => `${n} × ${s}`).join(", ")}; 200s p50 ${ms(pct(readMs, 50))} (one alone, before the flood: ${ms(pct(alone, 50))}). p50 ratio flood / quiet: ${(pct(flood.ms, 50) / pct(quiet.ms, 50)).toFixed(2)}. Load average at the flood's start: ${load0.toFixed(2)}.`,
    ];
    return lines.join("\n");
  });
}

export async function benchWebhookFlood(log: (s: string) => void): Promise<string> {
  // A black hole: accepts every request and never answers.
  const hole = createServer(() => undefined);
  await new Promise<void>((r) => hole.listen(0, "127.0.0.1", r));
  let arrived = 0;
  const fast = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      arrived = performance.now();
      res.end("ok");
    });
  });
  await new Promise<void>((r) => fast.listen(0, "127.0.0.1", r));
  const dns = await startDnsServer(() => ["127.0.0.1"]);
  try {
    return await withService({ WEBHOOK_ALLOW_PRIVATE: "true", WEBHOOK_DNS_SERVERS: dns.address }, async (svc, [a, b], dbUrl) => {
      const holePort = (hole.address() as AddressInfo).port;
      for (let done = 0; done < 300; done += 100) {
        const items = Array.from({ length: 100 }, (_, i) => ({
          From: a.number,
          To: `+4477008${String(done + i).padStart(5, "0")}`,
          Text: "hi",
          DeliveryReceiptWebhookUri: `http://h${(done + i) % 40}.flood.test:${holePort}/receipt`,
        }));
        const res = await fetch(`${svc.base}/v2/Properties/${a.propertySid}/BatchMessages`, {
          method: "POST",
          headers: { authorization: a.auth, "content-type": "application/json" },
          body: JSON.stringify({ Messages: items }),
        });
        if (res.status !== 200) throw new Error(`A's batch: ${res.status}`);
      }
      const db = new pg.Client({ connectionString: dbUrl });
      await db.connect();
      const count = async () => Number((await db.query("select count(*)::int as n from webhook_deliveries where account_sid = $1", [a.accountSid])).rows[0].n);
      const q0 = performance.now();
      while ((await count()) < 300 && performance.now() - q0 < 30_000) await new Promise((r) => setTimeout(r, 100));
      await new Promise((r) => setTimeout(r, 1000)); // A's calls are out and hanging
      log(`webhook-flood: A's 300 receipts queued to 40 black-hole hosts`);
      const load0 = loadavg()[0];
      const fastPort = (fast.address() as AddressInfo).port;
      const t0 = performance.now();
      const sent = await send(svc.base, b, { DeliveryReceiptWebhookUri: `http://127.0.0.1:${fastPort}/b` });
      if (sent.status !== 200) throw new Error(`B's send: ${sent.status}`);
      while (arrived === 0 && performance.now() - t0 < 60_000) await new Promise((r) => setTimeout(r, 10));
      const pending = Number(
        (await db.query("select count(*)::int as n from webhook_deliveries where account_sid = $1 and status = 'Pending'", [a.accountSid])).rows[0].n,
      );
      await db.end();
      const latency = arrived ? `${((arrived - t0) / 1000).toFixed(2)} s` : "not within 60 s";
      return [
        `### webhook-flood (300 receipts of A to 40 black-hole hosts, then one receipt of B)`,
        "",
        `B's receipt arrived ${latency} after its send (the simulator's report delay, 200 ms, included); A's calls still Pending then: ${pending}. Load average: ${load0.toFixed(2)}.`,
      ].join("\n");
    });
  } finally {
    hole.closeAllConnections();
    hole.close();
    fast.close();
    await dns.close();
  }
}

/** Runs the hostile benches named in `only`. */
export async function benchHostile(only: Set<string>, log: (s: string) => void): Promise<string> {
  buildService();
  const parts: string[] = [
    `Hostile load (issue 27), ${new Date().toISOString()}, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" / ")}`,
    "",
  ];
  if (only.has("read-flood")) parts.push(await benchReadFlood(log), "");
  if (only.has("webhook-flood")) parts.push(await benchWebhookFlood(log), "");
  return parts.join("\n");
}
