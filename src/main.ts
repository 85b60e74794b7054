import { pino } from "pino";
import { buildApp } from "./app.js";
import { firstRunBanner, resolveAdminToken, seedDemo } from "./bootstrap.js";
import { systemClock } from "./common/clock.js";
import { loadConfig } from "./config.js";
import { createCarrier } from "./carriers/index.js";
import { createOrm, migrateUp } from "./db/orm.js";
import { createDeliveryEngine } from "./delivery/engine.js";

/** Starts the service: config, database and migrations, HTTP port; stops cleanly on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  const config = loadConfig();
  const log = pino({ level: config.logLevel });
  const admin = resolveAdminToken(config);
  config.adminToken = admin.token;
  log.info({ database: config.databaseUrl.startsWith("postgres") ? "postgresql" : `pglite:${config.databaseUrl}` }, "opening database");
  const orm = await createOrm({ databaseUrl: config.databaseUrl });
  await migrateUp(orm);
  const demo = await seedDemo(orm, systemClock);
  const carrier = await createCarrier(config, systemClock);
  const mailTransport = config.smtpUrl ? (await import("nodemailer")).createTransport(config.smtpUrl) : undefined;
  const engine = createDeliveryEngine({ orm, clock: systemClock, carrier, webhookAllowPrivate: config.webhookAllowPrivate, log, mailTransport });
  const app = await buildApp({ orm, config, clock: systemClock, logger: log, carrier, onQueued: () => engine.nudge() });
  await engine.start();
  await app.listen({ port: config.port, host: config.host });
  const shown = config.host === "0.0.0.0" || config.host === "::" ? "localhost" : config.host;
  const base = `http://${shown}:${config.port}`;
  if (demo) process.stdout.write(firstRunBanner(base, admin, demo) + "\n");
  else if (admin.generated) process.stdout.write(`SWITCHBOARD_ADMIN_TOKEN is not set; operator token for this run: ${admin.token}\n`);
  log.info({ url: base, carrier: carrier.name }, "Switchboard listening");

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    const timer = setTimeout(() => {
      log.error("shutdown took longer than 10 s; exiting");
      process.exit(1);
    }, 10_000);
    timer.unref();
    try {
      // Stop taking requests (in-flight ones finish), then let the workers finish their round.
      await app.close();
      await engine.stop();
      await orm.close(true);
    } finally {
      process.exit(0);
    }
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

main().catch((err) => {
  process.stderr.write(`Switchboard failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
