import type { RateCache } from "../../src/billing/rate-cache.js";
import { ConnectError } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { buildApp, type AppDeps } from "../../src/app.js";
import type { Carrier } from "../../src/delivery/carrier.js";
import { createSimulatorCarrier } from "../../src/carriers/simulator.js";
import { ManualClock } from "../../src/common/clock.js";
import { createDeliveryEngine, type DeliveryEngine, type DeliveryEngineOptions } from "../../src/delivery/engine.js";
import { createPostgresBucketStore } from "../../src/limits/bucket-store.js";
import { createSharedAllowance, type SharedAllowance } from "../../src/limits/shared-allowance.js";
import { createLimitCounters } from "../../src/limits/account-limits.js";
import { createSendCounters } from "../../src/messaging/send-counters.js";
import { createTestOrm, type TestOrm } from "./db.js";
import { type PrivateRedis, startPrivateRedis } from "./private-redis.js";
import { openBucketStore } from "../../src/limits/limits-store.js";
import type { BucketStore } from "../../src/limits/bucket-store.js";
import { DEFAULT_SEND_RATE_LIMIT, DEFAULT_SUBMISSION_HOLD_MS, defaultSendBurst } from "../../src/config.js";
import type { SendRules } from "../../src/messaging/send-steps.js";

/** The operator token every test app uses. */
export const ADMIN_TOKEN = "test-admin-token-0123456789abcdefghijkl";

/** A built (not listening) app on its own database, with a controllable clock. */
export interface TestApp {
  app: FastifyInstance;
  db: TestOrm;
  clock: ManualClock;
  /** The carrier given to the app (and to the engine, when there is one). */
  carrier?: Carrier;
  /** The delivery engine, when asked for: started (carrier events wired), loops off unless asked. */
  engine?: DeliveryEngine;
  /** The shared limits' allowance the app and the engine's dispatcher take from (buckets in the test database unless given). */
  limits: SharedAllowance;
  close(): Promise<void>;
}

/** Options of the delivery engine a test app may create (orm, clock and carrier come from the app). */
/**
 * The engine's dispatcher writing each round's submissions at once (SUBMISSION_HOLD_MS=0), for a
 * test that reads a message's Submitted state right after a round with a carrier that has not
 * reported (the default holds a submission up to 1 s for its report: delivery/held-submissions.ts).
 */
export const SUBMISSIONS_AT_ONCE = { dispatcher: { submissionHoldMs: 0 } } as const;

/**
 * Waits until the app's dispatcher holds no submission: the carrier's reports wrote them with the
 * final states (the simulator reports at once), or the hold ended. For a test that reads a message
 * right after the dispatcher's rounds.
 */
export async function submissionsWritten(t: TestApp, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (t.engine!.dispatcher.held.size() > 0) {
    if (Date.now() > end) throw new Error(`the dispatcher still holds ${t.engine!.dispatcher.held.size()} submission(s) after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export type TestEngineOptions = Partial<Omit<DeliveryEngineOptions, "orm" | "clock" | "carrier">> & {
  /** Run the background loops (default false: the test calls dispatcher.tick() / webhooks.tick()). */
  loops?: boolean;
  /**
   * Store the app's sends due now already claimed by this engine's dispatcher, as src/main.ts does
   * (messaging/claim-at-accept.ts; default false: they are stored unclaimed and the dispatcher
   * claims them from the database, as with a separate worker). TEST_CLAIM_AT_ACCEPT=1 turns it on
   * for every test app, with the dispatcher looking at the database every round (databasePollMs 0:
   * tests move a manual clock, not the real one), to run the engine's tests against it.
   */
  claimAtAccept?: boolean;
};

/** Options of createTestApp; all optional, and createTestApp() alone gives what it always did. */
export interface TestAppOptions {
  now?: Date;
  webhookAllowPrivate?: boolean;
  /** Run on this database instead of a fresh one; close() leaves it open. */
  db?: TestOrm;
  /** Use this clock (e.g. one shared across a restart) instead of a new one at `now`. */
  clock?: ManualClock;
  /** The carrier to pass to buildApp and the engine; with `engine` and no carrier, a simulator reporting after 0 ms. */
  carrier?: Carrier;
  /** Create and start a delivery engine (true for the defaults); the app's onQueued nudges it. */
  engine?: boolean | TestEngineOptions;
  /** Configuration over the defaults below (e.g. send rate limits, body limit). */
  config?: Partial<AppDeps["config"]>;
  /** The built operator console to serve (default: dist/console). */
  consoleDir?: string;
  /** The shared limits' allowance (e.g. over Redis); default: buckets in the test database, on the app's clock. */
  limits?: SharedAllowance;
  /** The send rules (default SEND_RULES); the database must hold the facts function built from them. */
  rules?: SendRules;
  /** The app's copies of the rate cards (default: its own, billing/rate-cache.ts). */
  rates?: RateCache;
}

/** A fresh app on a fresh migrated database (PGlite, or PostgreSQL when DATABASE_URL is set). */
export async function createTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const db = opts.db ?? (await createTestOrm());
  const ownDb = opts.db === undefined;
  const clock = opts.clock ?? new ManualClock(opts.now ?? new Date("2026-11-22T12:00:00Z"));
  const webhookAllowPrivate = opts.webhookAllowPrivate ?? false;
  const engineOpts: TestEngineOptions | undefined = opts.engine === true ? {} : opts.engine || undefined;
  const carrier = opts.carrier ?? (engineOpts ? createSimulatorCarrier({ clock, reportDelayMs: 0 }) : undefined);
  const everywhere = process.env.TEST_CLAIM_AT_ACCEPT === "1";
  const { loops, claimAtAccept = everywhere, ...engineRest } = engineOpts ?? {};
  const limits = opts.limits ?? createSharedAllowance({ store: createPostgresBucketStore(db.orm), clock });
  // What the limits refused and paced, for /metrics, as src/main.ts wires them.
  const limitCounters = createLimitCounters();
  const sendCounters = createSendCounters();
  const sendRateLimit = opts.config?.sendRateLimit ?? DEFAULT_SEND_RATE_LIMIT;
  const engine = engineOpts
    ? createDeliveryEngine({
        orm: db.orm,
        clock,
        carrier: carrier!,
        webhookAllowPrivate,
        // Forwards and keyword answers pass the admit step with the app's default rate, as src/main.ts wires it.
        sendRate: { ratePerSecond: sendRateLimit, burst: opts.config?.sendRateBurst ?? defaultSendBurst(sendRateLimit) },
        limitCounters,
        sendCounters,
        rules: opts.rules,
        // Forwards obey the same SENDER_ID_REGISTRATION and DEFAULT_RATE_CARD as the app's sends, as src/main.ts wires them.
        senderIdRegistration: opts.config?.senderIdRegistration,
        defaultRateCard: opts.config?.billing?.defaultRateCard,
        currency: opts.config?.billing?.currency,
        ...engineRest,
        dispatcher: {
          shared: limits,
          onPaced: (sid, throttled, timedOut) => limitCounters.paced(sid, throttled, timedOut),
          // As `npm start` runs it: submissions wait for their reports (SUBMISSION_HOLD_MS).
          submissionHoldMs: DEFAULT_SUBMISSION_HOLD_MS,
          ...(everywhere ? { databasePollMs: 0 } : {}),
          ...engineRest.dispatcher,
        },
      })
    : undefined;
  const app = await buildApp({
    orm: db.orm,
    clock,
    carrier,
    limits,
    limitCounters,
    sendCounters,
    onQueued: engine ? () => engine.nudge() : undefined,
    claims: engine && claimAtAccept ? engine.claims : undefined,
    consoleDir: opts.consoleDir,
    rules: opts.rules,
    rates: opts.rates,
    config: {
      adminToken: ADMIN_TOKEN,
      webhookAllowPrivate,
      noAlphaCountries: new Set(["US", "CA"]),
      bodyLimit: 1024 * 1024,
      // The simulator's outcome numbers (+1500555000N, docs/carriers.md) are US personal numbers,
      // which the default destination permissions refuse; tests of those permissions set their own.
      destinations: { defaultAllowedCountries: [], blockedPrefixes: [], allowPremium: true },
      ...opts.config,
    },
  });
  await app.ready();
  await engine?.start({ loops: loops ?? false });
  return {
    app,
    db,
    clock,
    carrier,
    engine,
    limits,
    async close() {
      await app.close();
      await engine?.stop();
      if (!opts.limits) await limits.close();
      if (ownDb) await db.close();
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

// Owned numbers come from +44 7700 95xxxx, a block no test sends to, so a recipient can never be
// one of the service's own numbers by chance (they once took the process id, and collided).
let numberSeq = 0;

/** Calls the operator API and returns the JSON body; throws on a non-200 answer. */
export async function admin(app: FastifyInstance, url: string, body: object = {}): Promise<any> {
  const res = await app.inject({ method: "POST", url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: body });
  if (res.statusCode !== 200) throw new Error(`${url} → ${res.statusCode} ${res.body}`);
  return res.json();
}

/**
 * Sends one SMS through the REST API as the tenant (From its own number, Text "hello", unless
 * `payload` says otherwise; `payload` names the To), expects 200 and returns its MessageSid.
 */
export async function sendOk(app: FastifyInstance, tenant: Tenant, payload: Record<string, unknown>): Promise<string> {
  const res = await app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: tenant.auth },
    payload: { From: tenant.ownedNumber, Text: "hello", ...payload },
  });
  if (res.statusCode !== 200) throw new Error(`send → ${res.statusCode} ${res.body}`);
  return res.json().MessageSid;
}

/** Creates an account with a property and one owned number through the operator API. */
export async function createTenant(app: FastifyInstance, opts: { smsEnabled?: boolean; propertySmsEnabled?: boolean } = {}): Promise<Tenant> {
  const acc = await admin(app, "/admin/v1/Accounts", { Name: "Tenant", SmsEnabled: opts.smsEnabled ?? true });
  const prop = await admin(app, `/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Site", SmsEnabled: opts.propertySmsEnabled ?? true });
  const ownedNumber = `+44770095${String(++numberSeq).padStart(4, "0")}`;
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

/**
 * Submits every due message through the app's engine and waits (real time, at most 10 s) until the
 * simulator has reported on each: the handsets have them then.
 */
export async function drainDeliveries(t: TestApp): Promise<void> {
  while ((await t.engine!.dispatcher.tick()) > 0) {
    /* every due message */
  }
  const em = t.db.orm.em.fork();
  for (const until = Date.now() + 10_000; ;) {
    const [{ n }] = await em.execute<{ n: number | string }[]>(
      "select count(*) as n from messages where direction = 'Transmit' and status in ('Processing', 'Submitted') and send_at <= ?",
      [t.clock.now()],
    );
    if (Number(n) === 0) break;
    if (Date.now() > until) throw new Error("timed out waiting for delivery reports");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The texts the simulated network delivered to the handset `number` from `from`, in order (the operator's Handsets API). */
export async function handsetTexts(app: FastifyInstance, number: string, from: string): Promise<string[]> {
  const res = await app.inject({
    method: "GET",
    url: `/admin/v1/Simulator/Handsets/${number.slice(1)}/Messages`,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  return (res.json().Messages as { From: string; Text: string }[]).filter((m) => m.From === from).map((m) => m.Text);
}

/**
 * Registers an alphanumeric sender ID to the tenant for a country (SENDER_ID_REGISTRATION requires
 * it for AU by default): the application, then the operator's approval. Returns its SenderIdSid.
 */
export async function registerSenderId(app: FastifyInstance, tenant: Tenant, senderId: string, country = "AU"): Promise<string> {
  const res = await app.inject({
    method: "POST",
    url: `/v2/Accounts/${tenant.accountSid}/SenderIds`,
    headers: { authorization: tenant.auth },
    payload: { SenderId: senderId, Country: country, UseCase: "Test traffic" },
  });
  if (res.statusCode !== 200) throw new Error(`sender ID application → ${res.statusCode} ${res.body}`);
  const sid = res.json().SenderIdSid as string;
  await admin(app, `/admin/v1/SenderIds/${sid}/Review`, { Status: "Registered" });
  return sid;
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

/** A handset texts the service (POST /admin/v1/Simulator/Inbound); fails the test unless it is taken. */
export async function simulatorInbound(app: FastifyInstance, from: string, to: string, text: string): Promise<{ MessageSid: string; InReplyTo: string }> {
  const res = await app.inject({
    method: "POST",
    url: "/admin/v1/Simulator/Inbound",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    payload: { From: from, To: to, Text: text },
  });
  if (res.statusCode !== 200) throw new Error(`inbound SMS refused: ${res.statusCode} ${res.body}`);
  return res.json();
}

/** The ConnectError an RPC call fails with; fails the test if the call succeeds. */
export async function rpcRefusal(call: () => Promise<unknown>): Promise<ConnectError> {
  try {
    await call();
  } catch (e) {
    if (e instanceof ConnectError) return e;
    throw e;
  }
  throw new Error("the call succeeded but was expected to fail");
}

/** A test app whose shared limits are counted in a private Redis (and the database), on a manual clock. */
export interface RedisTestApp {
  redis: PrivateRedis;
  app: TestApp;
  store: BucketStore;
  close(): Promise<void>;
}

/** Starts a private redis-server and a test app on its own database whose bucket store routes to it (limits/limits-store.ts). */
export async function startRedisTestApp(): Promise<RedisTestApp> {
  const redis = await startPrivateRedis();
  const db = await createTestOrm();
  const store = await openBucketStore(db.orm, redis.url);
  const clock = new ManualClock(new Date("2026-11-22T12:00:00Z"));
  const app = await createTestApp({ db, clock, limits: createSharedAllowance({ store, clock }), config: { sendRateLimit: 0 } });
  return {
    redis,
    app,
    store,
    async close() {
      await app.limits.close();
      await app.close();
      await store.close();
      await db.close();
      await redis.stop();
    },
  };
}
