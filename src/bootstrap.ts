import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { MikroORM } from "@mikro-orm/sql";
import { addAccount, addProperty, anyAccount } from "./accounts/account-store.js";
import { hashToken } from "./accounts/auth.js";
import { newWebhookSecret, TOKEN_LENGTH } from "./admin/admin-service.js";
import type { Clock } from "./common/clock.js";
import { newSid, randomSecret } from "./common/sid.js";
import { checkSecret, type Config, databaseKind } from "./config.js";
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
