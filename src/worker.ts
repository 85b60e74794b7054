import { pino } from "pino";
import { createCarrier } from "./carriers/index.js";
import { systemClock } from "./common/clock.js";
import { loadConfig } from "./config.js";
import { createOrm, migrateUp } from "./db/orm.js";
import { createDeliveryEngine } from "./delivery/engine.js";

/** A dispatcher + webhook worker process without the HTTP API, for scaling delivery out. */
async function main(): Promise<void> {
  const config = loadConfig();
  const log = pino({ level: config.logLevel });
  if (!config.databaseUrl.startsWith("postgres")) {
    throw new Error("the separate worker needs a shared PostgreSQL database: set DATABASE_URL=postgres://…");
  }
  const orm = await createOrm({ databaseUrl: config.databaseUrl });
  await migrateUp(orm);
  const carrier = await createCarrier(config, systemClock);
  const mailTransport = config.smtpUrl ? (await import("nodemailer")).createTransport(config.smtpUrl) : undefined;
  const engine = createDeliveryEngine({ orm, clock: systemClock, carrier, webhookAllowPrivate: config.webhookAllowPrivate, log, mailTransport });
  await engine.start();
  log.info({ carrier: carrier.name }, "Switchboard worker running");
  const stop = async (signal: string) => {
    log.info({ signal }, "worker shutting down");
    await engine.stop();
    await orm.close(true);
    process.exit(0);
  };
  process.once("SIGTERM", () => void stop("SIGTERM"));
  process.once("SIGINT", () => void stop("SIGINT"));
}

main().catch((err) => {
  process.stderr.write(`Switchboard worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
