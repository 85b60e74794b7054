import { systemClock } from "./common/clock.js";
import { createLogger } from "./common/logger.js";
import { loadConfig, databaseKind } from "./config.js";
import { createOrm, migrateUp } from "./db/orm.js";
import { entities } from "./entities.js";
import { createConfiguredEngine } from "./carriers/configured-engine.js";
import { openSharedAllowance } from "./limits/limits-store.js";
import { onShutdownSignal } from "./ops/shutdown.js";

/** A dispatcher + webhook worker process without the HTTP API, for scaling delivery out. */
async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config, { name: "switchboard-worker" });
  if (databaseKind(config.databaseUrl) !== "postgres") {
    throw new Error("the separate worker needs a shared PostgreSQL database: set DATABASE_URL=postgres://…");
  }
  const orm = await createOrm({ entities, databaseUrl: config.databaseUrl });
  await migrateUp(orm);
  // The limits every process shares (docs/limits.md): Redis with REDIS_URL, else this database.
  const limits = await openSharedAllowance({ orm, redisUrl: config.redisUrl, clock: systemClock, log });
  const { carrier, engine } = await createConfiguredEngine(config, orm, log, limits);
  // Installed before the "running" line: until a handler exists, SIGTERM kills the process outright.
  // The loops finish their current round (claimed messages are handed to the carrier) before the database goes.
  onShutdownSignal(log, async () => {
    await engine.stop();
    await limits.close();
    await limits.store.close();
    await orm.close(true);
  });
  await engine.start();
  log.info({ carrier: carrier.name }, "Switchboard worker running");
}

main().catch((err) => {
  process.stderr.write(`Switchboard worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
