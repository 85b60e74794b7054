import { buildApp } from "./app.js";
import { firstRunBanner, prepareDatabase, preparesInChild, resolveAdminToken, runFirstStart, seedsDemo } from "./bootstrap.js";
import { systemClock } from "./common/clock.js";
import { createLogger } from "./common/logger.js";
import { loadConfig, databaseKind } from "./config.js";
import { createOrm } from "./db/orm.js";
import { entities } from "./entities.js";
import { createConfiguredEngine } from "./carriers/configured-engine.js";
import { openSharedAllowance } from "./limits/limits-store.js";
import { createLimitCounters } from "./limits/account-limits.js";
import { createSendCounters } from "./messaging/send-counters.js";
import { onShutdownSignal } from "./ops/shutdown.js";

/** The first-start entry beside this module: src/first-start.ts under tsx, dist/src/first-start.js in the build (scripts/build.mjs). */
const FIRST_START = new URL(import.meta.url.endsWith(".ts") ? "./first-start.ts" : "./first-start.js", import.meta.url);

/** Starts the service: config, database and migrations, HTTP port; stops cleanly on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  const config = loadConfig();
  const admin = resolveAdminToken(config);
  config.adminToken = admin.token;
  // Created once the operator token is known, so that it is among the secrets scrubbed from every line.
  const log = createLogger(config);
  log.info({ database: databaseKind(config.databaseUrl) === "postgres" ? "postgresql" : `pglite:${config.databaseUrl}` }, "opening database");
  // A new embedded folder is made ready by a process of its own, before this one opens it (preparesInChild: why).
  const firstStart = preparesInChild(config.databaseUrl);
  let demo = firstStart ? await runFirstStart({ script: FIRST_START, execArgv: process.execArgv, log }) : undefined;
  const orm = await createOrm({ entities, databaseUrl: config.databaseUrl });
  if (!firstStart) demo = await prepareDatabase(orm, { log, clock: systemClock, seed: seedsDemo(config.databaseUrl) });
  // The limits every process shares (docs/limits.md): Redis with REDIS_URL, else this database.
  const limits = await openSharedAllowance({ orm, redisUrl: config.redisUrl, clock: systemClock, log });
  const limitCounters = createLimitCounters();
  const sendCounters = createSendCounters();
  const { carrier, router, engine, network } = await createConfiguredEngine(config, orm, log, limits, limitCounters, sendCounters);
  const delivers = config.delivery === "on";
  const app = await buildApp({
    orm,
    config,
    clock: systemClock,
    logger: log,
    carrier,
    router,
    simulatorNetwork: network,
    onQueued: () => engine.nudge(),
    // A process that runs the dispatcher stores its sends due now claimed by it (claim at accept);
    // with DELIVERY=off they are stored unclaimed, for the workers' claims.
    claims: delivers ? engine.claims : undefined,
    retention: engine.retention,
    limits,
    limitCounters,
    sendCounters,
  });
  // Installed before the port opens: until a handler exists, SIGTERM kills the process outright
  // (exit by signal, no "stopped" line), and /readyz may answer before engine.start() returns.
  // New connections are refused at once; requests in flight finish and get their answer (idle
  // HTTP/1.1 connections are closed, h2 sessions get GOAWAY; at most 5 s). Then the delivery
  // loops finish their current round, and only then does the database go.
  onShutdownSignal(log, async () => {
    await app.close();
    await engine.stop();
    // What this process held of the shared limits goes back for the others.
    await limits.close();
    await limits.store.close();
    await orm.close(true);
  });
  // Listening first: after a crash, the dispatcher's wait for the carrier's reports on unconfirmed
  // submissions (Dispatcher) must run while those reports can be heard.
  await app.listen({ port: config.port, host: config.host });
  // The SMPP server's ports (SMPP_SERVER_PORT, SMPP_SERVER_TLS_PORT), when set; app.close() ends its binds.
  await app.smppServer?.listen();
  // DELIVERY=off: the carrier still starts (its reports and replies that reach this process, such as
  // Kannel's callbacks on this port, are applied here), but the loops run in `npm run worker`.
  await engine.start({ loops: delivers });
  const shown = config.host === "0.0.0.0" || config.host === "::" ? "localhost" : config.host;
  const base = `http://${shown}:${config.port}`;
  if (demo) process.stdout.write(firstRunBanner(base, admin, demo) + "\n");
  else if (admin.generated) process.stdout.write(`SWITCHBOARD_ADMIN_TOKEN is not set; operator token for this run: ${admin.token}\n`);
  log.info({ url: base, carrier: carrier.name, delivery: config.delivery }, "Switchboard listening");
}

main().catch((err) => {
  process.stderr.write(`Switchboard failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
