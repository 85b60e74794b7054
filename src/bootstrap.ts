import { fork } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import { addAccount, addProperty, anyAccount } from "./accounts/account-store.js";
import { hashToken } from "./accounts/auth.js";
import { newWebhookSecret, TOKEN_LENGTH } from "./admin/admin-service.js";
import type { Clock } from "./common/clock.js";
import { newSid, randomSecret } from "./common/sid.js";
import { checkSecret, type Config, databaseKind } from "./config.js";
import { migrateUp } from "./db/orm.js";
import { addNumber, findNumber } from "./numbers/number-store.js";

/** The fictional pool number the demo data leases senders from. */
export const DEMO_POOL_NUMBER = "+12025550100";

/**
 * The operator token: SWITCHBOARD_ADMIN_TOKEN if set; otherwise one generated once and kept
 * beside the embedded data folder, so it survives restarts; otherwise one for this process only.
 */
export function resolveAdminToken(config: Config): { token: string; generated: boolean; file?: string } {
  if (config.adminToken) return { token: config.adminToken, generated: false };
  if (config.databaseUrl.startsWith("postgres") || config.databaseUrl.startsWith("memory://")) {
    return { token: randomSecret(TOKEN_LENGTH), generated: true };
  }
  const file = join(dirname(config.databaseUrl), "admin-token");
  if (existsSync(file)) {
    const kept = readFileSync(file, "utf8").trim();
    checkSecret(`The operator token kept in ${file}`, kept, "the operator token (delete the file to have a new one made)");
    return { token: kept, generated: false, file };
  }
  const token = randomSecret(TOKEN_LENGTH);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return { token, generated: true, file };
}

/** What a first run created, to print. */
export interface DemoData {
  accountSid: string;
  token: string;
  propertySid: string;
  poolNumber: string;
}

/**
 * Whether a first run makes demo data: only on the embedded default (a PGlite folder or memory://),
 * as the contract says. An empty PostgreSQL database is a deployment: a demo account with a
 * printed token, and a fictional number in the pool that real sends would lease, do not belong there.
 */
export function seedsDemo(databaseUrl: string): boolean {
  return databaseKind(databaseUrl) === "pglite";
}

/** On an empty database, creates a demo account, property and pool number; undefined otherwise. */
export async function seedDemo(orm: MikroORM, clock: Clock): Promise<DemoData | undefined> {
  const em = orm.em.fork();
  if (await anyAccount(em)) return undefined;
  const now = clock.now();
  const token = randomSecret(TOKEN_LENGTH);
  const account = addAccount(em, {
    sid: newSid("AC"),
    name: "Demo",
    smsEnabled: true,
    tokenHash: hashToken(token),
    webhookSecret: newWebhookSecret(),
    createdAt: now,
  });
  const property = addProperty(em, { sid: newSid("PR"), accountSid: account.sid, name: "Demo property", smsEnabled: true, createdAt: now });
  if (!(await findNumber(em, DEMO_POOL_NUMBER))) {
    addNumber(em, { sid: newSid("PN"), number: DEMO_POOL_NUMBER, accountSid: null, friendly: "Demo pool", addressSid: null, createdAt: now });
  }
  await em.flush();
  return { accountSid: account.sid, token, propertySid: property.sid, poolNumber: DEMO_POOL_NUMBER };
}

/** The first-run banner: operator token, demo account and a curl line that sends an SMS. */
export function firstRunBanner(base: string, admin: { token: string; file?: string }, demo: DemoData): string {
  return [
    "",
    "Switchboard first run: demo data created.",
    `  Operator token:  ${admin.token}${admin.file ? `   (kept in ${admin.file})` : ""}`,
    `  Demo account:    ${demo.accountSid}`,
    `  Account token:   ${demo.token}   (shown once; rotate with POST /admin/v1/Accounts/{AccountSid}/Token)`,
    `  Demo property:   ${demo.propertySid}`,
    `  Pool number:     ${demo.poolNumber}`,
    "",
    "Send an SMS:",
    `  curl -s -u ${demo.accountSid}:${demo.token} -H 'Content-Type: application/json' \\`,
    `    -d '{"To":"+14155550123","Text":"Hello from Switchboard"}' \\`,
    `    ${base}/v2/Properties/${demo.propertySid}/Messages`,
    "",
  ].join("\n");
}

/**
 * What every start does before it serves: the migrations and the repeatable SQL (migrateUp), then
 * on the embedded default the demo data if the database has no account yet. Logs each step and
 * how long it took; returns the demo data it created.
 */
export async function prepareDatabase(orm: MikroORM, opts: { log: Logger; clock: Clock; seed: boolean }): Promise<DemoData | undefined> {
  let t0 = performance.now();
  const ran = await migrateUp(orm);
  const ms = () => Math.round(performance.now() - t0);
  opts.log.info({ migrations: ran.length, ms: ms() }, ran.length > 0 ? "migrations applied" : "database schema up to date");
  if (!opts.seed) return undefined;
  t0 = performance.now();
  const demo = await seedDemo(orm, opts.clock);
  if (demo) opts.log.info({ ms: ms() }, "demo data created");
  return demo;
}

/**
 * Whether the start's one-time work runs in a process of its own (runFirstStart): on an embedded
 * data folder that is missing or empty, where PGlite creates the cluster and every migration runs.
 * That work leaves ~100 MiB of freed memory resident in glibc's heap of the process that did it
 * (docs/benchmarks.md, Memory); a process that exits takes it along. Anything else (an existing
 * folder, memory://, PostgreSQL) prepares in the serving process, where it is a read or two.
 */
export function preparesInChild(databaseUrl: string): boolean {
  if (databaseKind(databaseUrl) !== "pglite" || databaseUrl.startsWith("memory://")) return false;
  const dir = resolve(databaseUrl);
  return !existsSync(dir) || readdirSync(dir).length === 0;
}

/** What the first-start process (src/first-start.ts) sends its parent before it exits. */
export type FirstStartMessage = { ok: true; demo?: DemoData } | { ok: false; error: string };

/** Options of runFirstStart. */
export interface FirstStartOptions {
  /** The first-start entry: src/first-start.ts under tsx, dist/src/first-start.js in the build. */
  script: URL;
  /** Its node flags: the server's own (`process.execArgv`: npm start's flags, and tsx's loader from source). */
  execArgv: string[];
  log: Logger;
}

/**
 * Runs the first-start entry in a child process and waits for it to exit: it prepares the new data
 * folder (prepareDatabase), closes it and sends back the demo data it created. Its log lines go to
 * the same stdout. Throws with the child's own message when it fails, or with its exit code or
 * signal when it died without one; only after it has exited does the server open the folder.
 */
export async function runFirstStart(opts: FirstStartOptions): Promise<DemoData | undefined> {
  const t0 = performance.now();
  const child = fork(opts.script, [], { execArgv: opts.execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  opts.log.info({ childPid: child.pid }, "new data folder: creating the database, its schema and the demo data in a separate process");
  let message: FirstStartMessage | undefined;
  child.on("message", (m) => (message = m as FirstStartMessage));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((done, fail) => {
    child.once("error", fail);
    // "close", not "exit": it comes after the IPC channel has closed, so every message has arrived.
    child.once("close", (c, s) => done([c, s]));
  });
  if (message?.ok === false) throw new Error(`preparing the new data folder failed: ${message.error}`);
  if (code !== 0 || !message) {
    throw new Error(`the process preparing the new data folder ended (${signal ? `signal ${signal}` : `exit code ${code}`}) without reporting success`);
  }
  opts.log.info({ ms: Math.round(performance.now() - t0) }, "new data folder ready");
  return message.demo;
}
