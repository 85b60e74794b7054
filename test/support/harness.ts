import type { FastifyInstance } from "fastify";
import { buildApp } from "../../src/app.js";
import { ManualClock } from "../../src/common/clock.js";
import { createTestOrm, type TestOrm } from "./db.js";

/** The operator token every test app uses. */
export const ADMIN_TOKEN = "test-admin-token-0123456789abcdefghijkl";

/** A built (not listening) app on its own database, with a controllable clock. */
export interface TestApp {
  app: FastifyInstance;
  db: TestOrm;
  clock: ManualClock;
  close(): Promise<void>;
}

/** A fresh app on a fresh migrated database (PGlite, or PostgreSQL when DATABASE_URL is set). */
export async function createTestApp(opts: { now?: Date; webhookAllowPrivate?: boolean } = {}): Promise<TestApp> {
  const db = await createTestOrm();
  const clock = new ManualClock(opts.now ?? new Date("2026-11-22T12:00:00Z"));
  const app = await buildApp({
    orm: db.orm,
    clock,
    config: {
      adminToken: ADMIN_TOKEN,
      webhookAllowPrivate: opts.webhookAllowPrivate ?? false,
      noAlphaCountries: new Set(["US", "CA"]),
      bodyLimit: 1024 * 1024,
    },
  });
  await app.ready();
  return {
    app,
    db,
    clock,
    async close() {
      await app.close();
      await db.close();
    },
  };
}

/** HTTP Basic header for an account. */
export function basic(accountSid: string, token: string): string {
  return `Basic ${Buffer.from(`${accountSid}:${token}`).toString("base64")}`;
}

/** A ready-to-use tenant: account, token, SMS-enabled property, an owned number and auth header. */
export interface Tenant {
  accountSid: string;
  token: string;
  webhookSecret: string;
  propertySid: string;
  ownedNumber: string;
  auth: string;
}

let numberSeq = 0;

/** Calls the operator API and returns the JSON body; throws on a non-200 answer. */
export async function admin(app: FastifyInstance, url: string, body: object = {}): Promise<any> {
  const res = await app.inject({ method: "POST", url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: body });
  if (res.statusCode !== 200) throw new Error(`${url} → ${res.statusCode} ${res.body}`);
  return res.json();
}

/** Creates an account with a property and one owned number through the operator API. */
export async function createTenant(app: FastifyInstance, opts: { smsEnabled?: boolean; propertySmsEnabled?: boolean } = {}): Promise<Tenant> {
  const acc = await admin(app, "/admin/v1/Accounts", { Name: "Tenant", SmsEnabled: opts.smsEnabled ?? true });
  const prop = await admin(app, `/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Site", SmsEnabled: opts.propertySmsEnabled ?? true });
  const ownedNumber = `+4477009${String(process.pid % 100).padStart(2, "0")}${String(++numberSeq).padStart(3, "0")}`;
  await admin(app, "/admin/v1/Numbers", { Number: ownedNumber, AccountSid: acc.AccountSid });
  return {
    accountSid: acc.AccountSid,
    token: acc.Token,
    webhookSecret: acc.WebhookSecret,
    propertySid: prop.PropertySid,
    ownedNumber,
    auth: basic(acc.AccountSid, acc.Token),
  };
}

/** Adds pool numbers (for leased senders): +1202555 01NN, NN from `from`. */
export async function addPoolNumbers(app: FastifyInstance, count: number, from = 10): Promise<string[]> {
  const numbers: string[] = [];
  for (let i = 0; i < count; i++) {
    const n = `+1202555${String(from + i).padStart(4, "0")}`;
    await admin(app, "/admin/v1/Numbers", { Number: n });
    numbers.push(n);
  }
  return numbers;
}
