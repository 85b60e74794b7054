/**
 * `BENCH_ONLY=smpp npm run bench`: the SMPP carrier's pacing as the SMSC sees it, against the Perl
 * Net::SMPP SMSC of the tests (test/carriers/smpp/smsc.pl). Switchboard runs in this process (the delivery
 * engine with its loops; embedded PGlite unless DATABASE_URL names a PostgreSQL server) and sends
 * BENCH_SMPP_MESSAGES messages queued at once, twice:
 * - the rate: SMPP_TPS (default 50), SMPP_WINDOW (default 10), an SMSC answering at once;
 * - the window: no SMPP_TPS, SMPP_WINDOW, an SMSC answering each submit_sm BENCH_SMPP_DELAY_MS
 *   (default 200) after it came, so the window is what limits.
 * Reported for each: the submit_sm per second the SMSC received overall and in its busiest
 * second, the most submissions outstanding (as the SMSC counted them when it delays, and as this
 * process sampled them every 2 ms).
 */
import { buildApp } from "../src/app.js";
import { systemClock } from "../src/common/clock.js";
import { createSmppCarrier } from "../src/carriers/smpp/smpp-carrier.js";
import { createDeliveryEngine } from "../src/delivery/engine.js";
import { createOrm } from "../src/db/orm.js";
import { entities } from "../src/entities.js";
import { createTestOrm } from "../test/support/db.js";
import { ADMIN_TOKEN, createTenant } from "../test/support/harness.js";
import { acceptedSubmits, startSmsc } from "../test/carriers/smpp/smsc.js";

interface Run {
  tps: number;
  window: number;
  delayMs: number;
  total: number;
}

async function runOnce(r: Run, log: (s: string) => void): Promise<string> {
  const smsc = await startSmsc();
  if (r.delayMs > 0) smsc.send(`delay ${r.delayMs}`);
  const db = await createTestOrm();
  const carrier = createSmppCarrier({
    host: "127.0.0.1",
    port: smsc.port,
    tls: false,
    systemId: "switchboard",
    password: "secret",
    systemType: "",
    window: r.window,
    tps: r.tps,
    enquireLinkMs: 30_000,
    moReassemblyMs: 300_000,
    clock: systemClock,
  });
  const engine = createDeliveryEngine({ orm: db.orm, clock: systemClock, carrier, webhookAllowPrivate: true, pollMs: 50 });
  const app = await buildApp({
    orm: db.orm,
    clock: systemClock,
    carrier,
    onQueued: () => engine.nudge(),
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: true, noAlphaCountries: new Set(), bodyLimit: 1 << 20, sendRateLimit: 0 },
  });
  await app.ready();
  const tenant = await createTenant(app);
  let maxInFlight = 0;
  const sampler = setInterval(() => (maxInFlight = Math.max(maxInFlight, carrier.status().inFlight)), 2);
  try {
    // Queued before the engine starts, so the dispatcher finds them all due at once.
    await queueBatches(app, tenant, r.total);
    const what = `SMPP_TPS=${r.tps || "off"}, SMPP_WINDOW=${r.window}, SMSC answering ${r.delayMs > 0 ? `${r.delayMs} ms after each submit_sm` : "at once"}`;
    log(`smpp: ${r.total} messages queued; ${what}`);
    await engine.start();
    await smsc.waitFor(`${r.total} submits`, (ev) => acceptedSubmits(ev).length >= r.total, 600_000);
    const accepted = acceptedSubmits(smsc.events);
    // The SMSC's own reading times: this process reads its stdout in chunks.
    const at = accepted.map((e) => Number(e.f.t) * 1000);
    const span = (at[at.length - 1]! - at[0]!) / 1000;
    let busiest = 0;
    for (let i = 0, j = 0; i < at.length; i++) {
      while (at[i]! - at[j]! >= 1000) j++;
      busiest = Math.max(busiest, i - j + 1);
    }
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    const close = r.tps > 0 ? gaps.filter((g) => g < 500 / r.tps).length : 0;
    const smscOutstanding = Math.max(0, ...accepted.map((e) => Number(e.f.outstanding ?? 0)));
    return [
      `SMPP pacing (${what}; ${r.total} messages queued at once):`,
      `  submit_sm seen by the SMSC: ${at.length} in ${span.toFixed(2)} s = ${((at.length - 1) / span).toFixed(1)} per second; busiest 1 s window: ${busiest}${r.tps > 0 ? `; ${close} of ${gaps.length} gaps under half of 1/SMPP_TPS` : ""}`,
      `  most outstanding: ${r.delayMs > 0 ? `${smscOutstanding} as the SMSC counted (received, not yet answered); ` : ""}${maxInFlight} in this process (sampled every 2 ms)`,
    ].join("\n");
  } finally {
    clearInterval(sampler);
    await engine.stop();
    await app.close();
    await smsc.stop();
    await db.close();
  }
}

/** Runs the SMPP pacing bench (the rate, then the window); returns the lines to print. */
export async function benchSmpp(log: (s: string) => void): Promise<string> {
  const window = Number(process.env.SMPP_WINDOW ?? 10);
  const total = Number(process.env.BENCH_SMPP_MESSAGES ?? 1000);
  const rate = await runOnce({ tps: Number(process.env.SMPP_TPS ?? 50), window, delayMs: 0, total }, log);
  const windowed = await runOnce({ tps: 0, window, delayMs: Number(process.env.BENCH_SMPP_DELAY_MS ?? 200), total }, log);
  return `${rate}\n${windowed}`;
}

/**
 * `BENCH_ONLY=smpp-tps npm run bench` (issue 31): a carrier's Tps as the total over every process.
 * BENCH_SMPP_WORKERS (default 3) worker processes (`npm run worker`, src/worker.ts) on one
 * PostgreSQL database (DATABASE_URL; BENCH_REDIS_URL puts the shared buckets in Redis), each bound
 * to one Net::SMPP SMSC with SMPP_TPS=BENCH_SMPP_TPS (default 100), drain BENCH_SMPP_TPS_MESSAGES
 * (default 3,000: a 30 s backlog) queued before they start. The SMSC's own reading times say
 * whether the deployment kept to the Tps: at most 5 % over it in any one second, and at least
 * 90 % of it on average while the backlog lasts.
 */
export async function benchSmppTps(log: (s: string) => void): Promise<string> {
  const { serviceDatabase, startService } = await import("../test/support/service.js");
  const { freePort } = await import("../test/support/kannel.js");
  if (!/^postgres(ql)?:\/\//i.test(process.env.DATABASE_URL ?? "")) {
    throw new Error("BENCH_ONLY=smpp-tps needs DATABASE_URL=postgres://… (worker processes share one database)");
  }
  const tps = Number(process.env.BENCH_SMPP_TPS ?? 100);
  const workers = Number(process.env.BENCH_SMPP_WORKERS ?? 3);
  const total = Number(process.env.BENCH_SMPP_TPS_MESSAGES ?? 3000);
  const redisUrl = process.env.BENCH_REDIS_URL;
  const smsc = await startSmsc({ multi: true });
  const db = await serviceDatabase();
  const orm = await createOrm({ entities, databaseUrl: db.url, poolMax: 2 });
  const app = await buildApp({
    orm,
    clock: systemClock,
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: true, noAlphaCountries: new Set(), bodyLimit: 1 << 20, sendRateLimit: 0 },
  });
  const procs: Awaited<ReturnType<typeof startService>>[] = [];
  try {
    await app.ready();
    const tenant = await createTenant(app);
    await queueBatches(app, tenant, total);
    const what = `${workers} worker processes, SMPP_TPS=${tps} each and for the carrier, shared buckets in ${redisUrl ? "Redis" : "PostgreSQL"}`;
    log(`smpp-tps: ${total} messages queued; ${what}`);
    const env = {
      DATABASE_URL: db.url,
      LOG_LEVEL: "warn",
      CARRIER: "smpp",
      SMPP_URL: `smpp://switchboard:secret@127.0.0.1:${smsc.port}`,
      SMPP_TPS: String(tps),
      ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
    };
    for (let i = 0; i < workers; i++) procs.push(await startService({ port: await freePort(), script: "src/worker.ts", waitReady: false, env }));
    await smsc.waitFor(`${total} submits`, (ev) => acceptedSubmits(ev).length >= total, 900_000);
    const at = acceptedSubmits(smsc.events).map((e) => Number(e.f.t) * 1000);
    at.sort((a, b) => a - b);
    const span = (at[at.length - 1]! - at[0]!) / 1000;
    let busiest = 0;
    for (let i = 0, j = 0; i < at.length; i++) {
      while (at[i]! - at[j]! >= 1000) j++;
      busiest = Math.max(busiest, i - j + 1);
    }
    const average = (at.length - 1) / span;
    const verdict = busiest <= tps * 1.05 && average >= tps * 0.9 ? "within" : "OUTSIDE";
    return [
      `Carrier Tps across processes (${what}; ${total} messages queued at once):`,
      `  submit_sm seen by the SMSC: ${at.length} in ${span.toFixed(2)} s = ${average.toFixed(1)} per second; busiest 1 s window: ${busiest}`,
      `  ${verdict} the bounds: at most ${(tps * 1.05).toFixed(0)} in any one second, at least ${(tps * 0.9).toFixed(0)} per second on average`,
    ].join("\n");
  } finally {
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    await app.close();
    await orm.close(true);
    await smsc.stop();
    await db.drop();
  }
}

/** Queues `total` one-segment sends from the tenant's own number, in batches of 100 (none due later). */
async function queueBatches(app: Parameters<typeof createTenant>[0], tenant: Awaited<ReturnType<typeof createTenant>>, total: number): Promise<void> {
  for (let i = 0; i < total; i += 100) {
    const Messages = Array.from({ length: Math.min(100, total - i) }, (_, j) => ({
      From: tenant.ownedNumber,
      To: `+4477009${String(10_000 + ((i + j) % 90_000)).slice(-5)}`,
      Text: "Bench",
    }));
    const res = await app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/BatchMessages`,
      headers: { authorization: tenant.auth },
      payload: { Messages },
    });
    if (res.statusCode !== 200) throw new Error(`batch: ${res.statusCode} ${res.body}`);
  }
}
