import { type FirstStartMessage, prepareDatabase, resolveAdminToken, seedsDemo } from "./bootstrap.js";
import { systemClock } from "./common/clock.js";
import { createLogger } from "./common/logger.js";
import { loadConfig } from "./config.js";
import { createOrm } from "./db/orm.js";
import { entities } from "./entities.js";

/**
 * The one-time work of a first start on a new embedded data folder, in a short-lived process that
 * main.ts forks before it opens the folder itself (bootstrap.ts, preparesInChild: why): creates the
 * database, applies the migrations and the repeatable SQL, makes the demo data, closes the folder,
 * sends the demo data to its parent and exits. Same environment as the server, so the same folder.
 */
async function firstStart(): Promise<FirstStartMessage> {
  const config = loadConfig();
  // The file main.ts just wrote (or SWITCHBOARD_ADMIN_TOKEN): among the secrets scrubbed from every line.
  config.adminToken = resolveAdminToken(config).token;
  const log = createLogger(config);
  const orm = await createOrm({ entities, databaseUrl: config.databaseUrl });
  try {
    const demo = await prepareDatabase(orm, { log, clock: systemClock, seed: seedsDemo(config.databaseUrl) });
    return { ok: true, demo };
  } finally {
    // PGlite writes its shutdown checkpoint here; the server opens the folder only after this process has exited.
    await orm.close(true);
  }
}

function reply(message: FirstStartMessage, code: number): void {
  // Without a parent (run by hand) there is no channel; with one that has gone, the send fails: exit either way.
  if (process.send) process.send(message, () => process.exit(code));
  else process.exit(code);
}

firstStart().then(
  (message) => reply(message, 0),
  (err: unknown) => {
    const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
    if (!process.send) process.stderr.write(`Switchboard failed to prepare the new data folder: ${error}\n`);
    reply({ ok: false, error }, 1);
  },
);
