/**
 * `BENCH_ONLY=smpp npm run bench`: the SMPP carrier's pacing as the SMSC sees it. The Perl
 * Net::SMPP SMSC of the tests (test/smpp/smsc.pl) answers at once; Switchboard (in this process,
 * embedded PGlite, delivery engine with its loops) sends BENCH_SMPP_MESSAGES messages queued at
 * once, with SMPP_TPS (default 50) and SMPP_WINDOW (default 10). Reported: the submit_sm per
 * second the SMSC received overall and in its busiest second, and the most submissions this
 * process had outstanding.
 */
import { buildApp } from "../src/app.js";
import { systemClock } from "../src/common/clock.js";
import { createSmppCarrier } from "../src/carriers/smpp/smpp-carrier.js";
import { createDeliveryEngine } from "../src/delivery/engine.js";
import { createTestOrm } from "../test/support/db.js";
import { ADMIN_TOKEN, createTenant } from "../test/support/harness.js";
import { acceptedSubmits, startSmsc } from "../test/smpp/smsc.js";

/** Runs the SMPP pacing bench; returns the lines to print. */
export async function benchSmpp(log: (s: string) => void): Promise<string> {
  const tps = Number(process.env.SMPP_TPS ?? 50);
  const window = Number(process.env.SMPP_WINDOW ?? 10);
  const total = Number(process.env.BENCH_SMPP_MESSAGES ?? 1000);
  const smsc = await startSmsc();
  const db = await createTestOrm();
  const carrier = createSmppCarrier({
    host: "127.0.0.1", port: smsc.port, tls: false, systemId: "switchboard", password: "secret", systemType: "",
    window, tps, enquireLinkMs: 30_000, moReassemblyMs: 300_000, clock: systemClock,
  });
  const engine = createDeliveryEngine({ orm: db.orm, clock: systemClock, carrier, webhookAllowPrivate: true, pollMs: 50 });
  const app = await buildApp({
    orm: db.orm, clock: systemClock, carrier, onQueued: () => engine.nudge(),
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: true, noAlphaCountries: new Set(), bodyLimit: 1 << 20, sendRateLimit: 0 },
  });
  await app.ready();
  const tenant = await createTenant(app);
  let maxInFlight = 0;
  const sampler = setInterval(() => (maxInFlight = Math.max(maxInFlight, carrier.status().inFlight)), 2);
  try {
    // Queued before the engine starts, so the dispatcher finds them all due at once.
    for (let i = 0; i < total; i += 100) {
      const Messages = Array.from({ length: Math.min(100, total - i) }, (_, j) => ({ From: tenant.ownedNumber, To: `+4477009${String(10_000 + i + j).slice(-5)}`, Text: "Bench" }));
      const res = await app.inject({ method: "POST", url: `/v2/Properties/${tenant.propertySid}/BatchMessages`, headers: { authorization: tenant.auth }, payload: { Messages } });
      if (res.statusCode !== 200) throw new Error(`batch: ${res.statusCode} ${res.body}`);
    }
    log(`smpp: ${total} messages queued; SMPP_TPS=${tps} SMPP_WINDOW=${window}`);
    await engine.start();
    await smsc.waitFor(`${total} submits`, (ev) => acceptedSubmits(ev).length >= total, 600_000);
    const at = acceptedSubmits(smsc.events).map((e) => e.at);
    const span = (at[at.length - 1]! - at[0]!) / 1000;
    let busiest = 0;
    for (let i = 0, j = 0; i < at.length; i++) {
      while (at[i]! - at[j]! >= 1000) j++;
      busiest = Math.max(busiest, i - j + 1);
    }
    return [
      `SMPP pacing (SMPP_TPS=${tps}, SMPP_WINDOW=${window}, ${total} messages queued at once, Perl Net::SMPP SMSC answering at once):`,
      `  submit_sm seen by the SMSC: ${at.length} in ${span.toFixed(2)} s = ${((at.length - 1) / span).toFixed(1)} per second; busiest 1 s window: ${busiest}`,
      `  most outstanding in this process (sampled every 2 ms): ${maxInFlight}`,
    ].join("\n");
  } finally {
    clearInterval(sampler);
    await engine.stop();
    await app.close();
    await smsc.stop();
    await db.close();
  }
}
