import { Resolver } from "node:dns";
import { isSupportedCountry } from "libphonenumber-js/max";

/** Sender of forwarded e-mails when the message named no ForwardFromEmail. */
export const NO_REPLY_EMAIL = "no-reply@switchboard.invalid";

/** The domains a ForwardFromEmail may use when MAIL_FROM_DOMAINS is not set: the no-reply address's. */
export const DEFAULT_MAIL_FROM_DOMAINS: readonly string[] = [NO_REPLY_EMAIL.slice(NO_REPLY_EMAIL.lastIndexOf("@") + 1)];

/** Parses MAIL_FROM_DOMAINS: comma-separated domains, any case; `*` allows any domain. */
export function parseMailFromDomains(value: string | undefined): string[] {
  const domains = (value ?? "")
    .split(",")
    .map((d) => d.trim().toLowerCase())
    .filter(Boolean);
  return domains.length > 0 ? domains : [...DEFAULT_MAIL_FROM_DOMAINS];
}

/** Countries whose operators do not take alphanumeric sender IDs when NO_ALPHA_SENDER_COUNTRIES is not set. */
export const DEFAULT_NO_ALPHA_COUNTRIES: readonly string[] = ["US", "CA"];

/** How many failed authentications a window allows (0 turns that limit off). */
export interface AuthFailureLimits {
  /** Per client address (the socket's remote address), whatever the credential. */
  perAddress: number;
  /** Per AccountSid named in HTTP Basic, from any address not yet known good for it. */
  perAccount: number;
  /** Length of a window, ms; windows are aligned to the clock (multiples of windowMs since the epoch). */
  windowMs: number;
}

/** What one client connection may hold (docs/configuration.md). */
export interface ConnectionLimits {
  /** HTTP/2: streams one session may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxStreamsPerConnection: number;
  /** HTTP/1.1: pipelined requests that may wait behind the one being served. */
  maxPipelinedRequests: number;
  /** HTTP/1.1: time to receive a request's headers. */
  headersTimeoutMs: number;
  /** HTTP/1.1: time to receive a whole request, headers and body. */
  requestTimeoutMs: number;
  /** Largest header block, bytes (HTTP/1.1 header section; HTTP/2 header list). */
  maxHeaderBytes: number;
  /** HTTP/2: a session with no stream open and no frame for this long gets GOAWAY and is closed. */
  idleTimeoutMs: number;
}

/** Which engine a database URL selects. */
export function databaseKind(databaseUrl: string): "postgres" | "pglite" {
  return /^postgres(ql)?:\/\//i.test(databaseUrl) ? "postgres" : "pglite";
}

/** Connections in the pool by default (createOrm's poolMax). */
export const DEFAULT_POOL_MAX = 10;

/** How many reads may run at once (docs/configuration.md, READ_*). */
export interface ReadLimits {
  /** Reads in flight at once per account (the operator counts as one account). */
  perAccount: number;
  /** Reads of one account that may wait for a slot; one more is 429 RateLimited. */
  queuePerAccount: number;
  /** Reads in flight at once in this process, all accounts together: below the pool size, so sends keep connections. */
  global: number;
  /** PostgreSQL cancels a read's statement running longer than this, ms (PGlite cannot cancel a statement). */
  statementTimeoutMs: number;
}

/**
 * Reads in flight per account by default (READ_CONCURRENCY_PER_ACCOUNT): one, because a flood of
 * large pages slows another account's sends more the more of them run at once, while one at a time
 * still lets the flooding account through (docs/benchmarks.md, Hostile load). Further reads queue.
 */
export const READ_CONCURRENCY_PER_ACCOUNT = 1;
/** Reads of one account waiting by default (READ_QUEUE_PER_ACCOUNT). */
export const READ_QUEUE_PER_ACCOUNT = 8;
/** Connections of the pool no read may take: sends, the dispatcher, receipts and webhooks keep them. */
export const POOL_RESERVED_FOR_WRITES = 4;
/** A read's statement timeout by default, ms (READ_STATEMENT_TIMEOUT_MS). */
export const READ_STATEMENT_TIMEOUT_MS = 5000;

/**
 * The read limits when the environment does not say. On PostgreSQL reads may take the pool less
 * the connections kept for writes; PGlite has one connection, which runs one statement at a time
 * whatever the caps: there one read at a time takes turns with sends on it.
 */
export function defaultReadLimits(kind: "postgres" | "pglite"): ReadLimits {
  return {
    perAccount: READ_CONCURRENCY_PER_ACCOUNT,
    queuePerAccount: READ_QUEUE_PER_ACCOUNT,
    global: kind === "postgres" ? DEFAULT_POOL_MAX - POOL_RESERVED_FOR_WRITES : 1,
    statementTimeoutMs: READ_STATEMENT_TIMEOUT_MS,
  };
}

/** Default calls in flight per process (WEBHOOK_CONCURRENCY). */
export const WEBHOOK_CONCURRENCY = 64;
/** Default calls in flight per (account, destination host) per process (WEBHOOK_CONCURRENCY_PER_HOST). */
export const WEBHOOK_CONCURRENCY_PER_HOST = 4;
/** Default calls in flight per account, all its hosts together, per process (WEBHOOK_CONCURRENCY_PER_ACCOUNT): a quarter of the default pool. */
export const WEBHOOK_CONCURRENCY_PER_ACCOUNT = 16;

/** Default sustained send rate, messages per second per account (SEND_RATE_LIMIT). */
export const DEFAULT_SEND_RATE_LIMIT = 50;

/** Default bucket size for a send rate (SEND_RATE_BURST): ten seconds' worth, never less than one full batch (100). */
export function defaultSendBurst(ratePerSecond: number): number {
  return Math.max(100, Math.ceil(ratePerSecond * 10));
}

/** Connection limits when the environment does not say (docs/configuration.md). */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  maxStreamsPerConnection: 100,
  maxPipelinedRequests: 16,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  maxHeaderBytes: 16 * 1024,
  // As long as Node keeps an idle HTTP/1.1 keep-alive connection (its keepAliveTimeout).
  idleTimeoutMs: 5000,
};

/** Failed authentications allowed before 429 when the environment does not say (docs/configuration.md). */
export const DEFAULT_AUTH_FAILURE_LIMITS: AuthFailureLimits = { perAddress: 20, perAccount: 10, windowMs: 60_000 };

/**
 * The shortest operator token and Kannel callback secret the service starts with: a guessable secret
 * on the public port undoes every other limit (32 random characters are beyond any guessing rate).
 */
export const MIN_SECRET_LENGTH = 32;

/** Secrets that were defaults or examples once: public knowledge, refused whatever their length. */
const PUBLIC_SECRETS = new Set(["switchboard-kannel", "switchboard", "secret", "changeme", "change-me"]);

/** Runtime configuration, read once from the environment (docs/configuration.md). */
export interface Config {
  port: number;
  host: string;
  /** postgres://… for a server; memory:// for in-memory PGlite; a folder path for PGlite on disk. */
  databaseUrl: string;
  adminToken: string | undefined;
  carrier: "simulator" | "kannel" | "smpp";
  smtpUrl: string | undefined;
  webhookAllowPrivate: boolean;
  /** Webhook calls in flight at once per process. */
  webhookConcurrency: number;
  /** Webhook calls in flight at once per (account, destination host) per process. */
  webhookConcurrencyPerHost: number;
  /** Webhook calls in flight at once per account, all its hosts together, per process. */
  webhookConcurrencyPerAccount: number;
  /** DNS servers (`ip` or `ip:port`) webhook host names are resolved with; empty: the system resolver. */
  webhookDnsServers: string[];
  logLevel: string;
  /** Bearer token GET /metrics requires; unset leaves /metrics open. */
  metricsToken?: string;
  /** Countries (ISO alpha-2) whose operators do not take alphanumeric sender IDs. */
  noAlphaCountries: Set<string>;
  /** Domains a ForwardFromEmail may be in (MAIL_FROM_DOMAINS; `*` allows any). */
  mailFromDomains: string[];
  /** Largest accepted request body, bytes. */
  bodyLimit: number;
  /** Sustained sends per second per account; 0 turns the limit off. */
  sendRateLimit: number;
  /** How many sends an account may make at once before the rate applies. */
  sendRateBurst: number;
  /** Where the limits shared by every process are counted (docs/limits.md): Redis at this URL; unset, the database. */
  redisUrl?: string;
  /** What one client connection may hold. */
  connections: ConnectionLimits;
  /** Failed authentications per client address and per account before 429. */
  authFailures: AuthFailureLimits;
  /** How many reads (Get and List methods) may run at once, and for how long. */
  reads: ReadLimits;
  /** Delay before the simulator's delivery reports, ms. */
  simulatorReportDelayMs: number;
  /** The Kannel carrier's settings (CARRIER=kannel). */
  kannel: KannelConfig;
  /** The SMPP carrier's settings (CARRIER=smpp); undefined with another carrier. */
  smpp?: SmppConfig;
  /** How long a dispatcher's claim on a message lasts; a crashed dispatcher's claims expire after it, ms. */
  dispatchClaimMs: number;
  /** DELIVERY: "on" runs the delivery engine's loops beside the API; "off" leaves them to `npm run worker` processes. */
  delivery: "on" | "off";
  /** How long after its submission a message without a delivery report gets ErrorCode ReceiptTimeout, ms (RECEIPT_TIMEOUT_HOURS). */
  receiptTimeoutMs: number;
  /** Retention and redaction (docs/configuration.md#retention). */
  retention: RetentionConfig;
  /** The deployment's destination permissions (docs/api.md#destination-permissions; docs/configuration.md). */
  destinations: DestinationConfig;
}

/** The purge worker's settings. */
export interface RetentionConfig {
  /** MESSAGE_RETENTION_DAYS: days a message is kept when its account sets none; null (unset) keeps them. */
  defaultDays: number | null;
  /** PURGE_BATCH_SIZE: messages deleted or redacted per statement (default 1000). */
  batch: number;
  /** PURGE_PAUSE_MS: pause between two batches, ms (default 100), so that sends keep their latency. */
  pauseMs: number;
  /** PURGE_INTERVAL_SECONDS: time between two passes once one has found nothing more to do, ms (default 300 s). */
  intervalMs: number;
}

/** Where the deployment lets accounts send (DEFAULT_ALLOWED_COUNTRIES, BLOCKED_PREFIXES, ALLOW_PREMIUM_DESTINATIONS). */
export interface DestinationConfig {
  /** ISO alpha-2 codes an account without its own AllowedCountries may send to; empty: every country. */
  defaultAllowedCountries: string[];
  /** E164 prefixes (`+` and digits) no account may send to. */
  blockedPrefixes: string[];
  /** Whether premium-rate, shared-cost and other special-service numbers may be sent to. */
  allowPremium: boolean;
}

/** Whether a string is an ISO 3166-1 alpha-2 code the phone-number library has a numbering plan for. */
export function isKnownCountry(code: string): boolean {
  return /^[A-Z]{2}$/.test(code) && isSupportedCountry(code);
}

/** The destination settings from the environment; a bad value stops start-up naming its variable. */
export function destinationConfig(env: NodeJS.ProcessEnv): DestinationConfig {
  const list = (name: string) =>
    (env[name] ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  const countries = list("DEFAULT_ALLOWED_COUNTRIES").map((c) => c.toUpperCase());
  const badCountry = countries.find((c) => !isKnownCountry(c));
  if (badCountry !== undefined) {
    throw new Error(`DEFAULT_ALLOWED_COUNTRIES must be a comma-separated list of ISO 3166-1 alpha-2 country codes such as GB,AU; "${badCountry}" is not one`);
  }
  const prefixes = list("BLOCKED_PREFIXES");
  const badPrefix = prefixes.find((x) => !/^\+[1-9]\d{0,14}$/.test(x));
  if (badPrefix !== undefined) {
    throw new Error(`BLOCKED_PREFIXES must be a comma-separated list of E164 prefixes such as +4470,+882; "${badPrefix}" is not one`);
  }
  const premium = (env.ALLOW_PREMIUM_DESTINATIONS ?? "").trim();
  if (!/^(|1|0|true|false|yes|no)$/i.test(premium)) throw new Error(`ALLOW_PREMIUM_DESTINATIONS must be true or false, got "${premium}"`);
  return { defaultAllowedCountries: [...new Set(countries)], blockedPrefixes: [...new Set(prefixes)], allowPremium: /^(1|true|yes)$/i.test(premium) };
}

/** How to reach Kannel's sendsms and how Kannel reaches us back. */
export interface KannelConfig {
  sendsmsUrl: string;
  username: string;
  password: string;
  /** Base URL at which Kannel reaches this service for delivery reports and inbound SMS. */
  callbackBaseUrl: string;
  /** Shared secret Kannel's callbacks must carry. */
  callbackSecret: string;
  /** After a crash, how long to wait for Kannel's report on a submission whose answer was lost, ms. */
  confirmWaitMs: number;
  /** sendsms calls per second from this process (KANNEL_TPS); 0 for no limit. */
  tps: number;
}

/** Where the SMSC is and how this process's bind behaves (README: Carriers). */
export interface SmppConfig {
  host: string;
  port: number;
  /** smpps://: TLS to the SMSC. */
  tls: boolean;
  systemId: string;
  password: string;
  systemType: string;
  /** Outstanding submit_sm per bind (SMPP_WINDOW). */
  window: number;
  /** submit_sm per second per bind (SMPP_TPS); 0 for no limit. */
  tps: number;
  /** How long the parts of a concatenated inbound SMS wait for the rest, ms. */
  moReassemblyMs: number;
  /** enquire_link interval, ms. */
  enquireLinkMs: number;
  /** ISO country of national (TON 2) numbers from the SMSC, if any (SMPP_COUNTRY). */
  country?: string;
  /** PEM file of the CA that signed the SMSC's TLS certificate (SMPP_TLS_CA), beside the system's. */
  tlsCaFile?: string;
}

/** Parses SMPP_URL and the other SMPP_ settings. */
export function smppConfig(env: NodeJS.ProcessEnv): SmppConfig {
  const raw = env.SMPP_URL?.trim() ?? "";
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`SMPP_URL must be smpp://system_id:password@host:port or smpps://…, got "${raw}"`);
  }
  if (url.protocol !== "smpp:" && url.protocol !== "smpps:") throw new Error(`SMPP_URL must start with smpp:// or smpps://, got "${url.protocol}//"`);
  if (!url.hostname || !url.username) throw new Error("SMPP_URL must name the system_id and the host: smpp://system_id:password@host:port");
  const tls = url.protocol === "smpps:";
  const seconds = Number(env.SMPP_MO_REASSEMBLY_SECONDS?.trim() || 300);
  if (!Number.isFinite(seconds) || seconds < 1)
    throw new Error(`SMPP_MO_REASSEMBLY_SECONDS must be a number of seconds, at least 1; got "${env.SMPP_MO_REASSEMBLY_SECONDS}"`);
  const enquire = Number(env.SMPP_ENQUIRE_LINK_SECONDS?.trim() || 30);
  if (!Number.isFinite(enquire) || enquire < 1)
    throw new Error(`SMPP_ENQUIRE_LINK_SECONDS must be a number of seconds, at least 1; got "${env.SMPP_ENQUIRE_LINK_SECONDS}"`);
  return {
    host: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port ? Number(url.port) : tls ? 3550 : 2775,
    tls,
    systemId: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    systemType: env.SMPP_SYSTEM_TYPE ?? "",
    window: wholeNumber(env, "SMPP_WINDOW", 10, 1),
    tps: rate(env, "SMPP_TPS", 0),
    moReassemblyMs: Math.round(seconds * 1000),
    enquireLinkMs: Math.round(enquire * 1000),
    country: env.SMPP_COUNTRY?.trim().toUpperCase() || undefined,
    tlsCaFile: env.SMPP_TLS_CA?.trim() || undefined,
  };
}

const DEFAULT_DATA_DIR = ".switchboard/data";

/** REDIS_URL: redis:// or rediss://; blank or unset, the shared limits are counted in the database. */
function redisUrl(raw: string | undefined): string | undefined {
  const url = raw?.trim();
  if (!url) return undefined;
  if (!/^rediss?:\/\/[^\s]+$/i.test(url)) throw new Error(`REDIS_URL must be a redis:// or rediss:// URL, got "${raw}"`);
  return url;
}

/** Parses the environment into a Config, failing fast on values that cannot work. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = Number(env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be a port number, got "${env.PORT}"`);
  const carrier = (env.CARRIER ?? "simulator") as Config["carrier"];
  if (!["simulator", "kannel", "smpp"].includes(carrier)) throw new Error(`CARRIER must be simulator, kannel or smpp, got "${carrier}"`);
  const raw = env.DATABASE_URL?.trim();
  const sendRateLimit = rate(env, "SEND_RATE_LIMIT", DEFAULT_SEND_RATE_LIMIT);
  const seconds = (name: string, fallback: number, min: number): number => {
    const v = Number(env[name] ?? fallback);
    if (!Number.isFinite(v) || v < min) throw new Error(`${name} must be a number of seconds, at least ${min}; got "${env[name]}"`);
    return Math.round(v * 1000);
  };
  return {
    port,
    host: env.HOST ?? "0.0.0.0",
    databaseUrl: raw || DEFAULT_DATA_DIR,
    adminToken: adminToken(env),
    carrier,
    smtpUrl: env.SMTP_URL || undefined,
    webhookAllowPrivate: /^(1|true|yes)$/i.test(env.WEBHOOK_ALLOW_PRIVATE ?? ""),
    webhookConcurrency: wholeNumber(env, "WEBHOOK_CONCURRENCY", WEBHOOK_CONCURRENCY, 1),
    webhookConcurrencyPerHost: wholeNumber(env, "WEBHOOK_CONCURRENCY_PER_HOST", WEBHOOK_CONCURRENCY_PER_HOST, 1),
    webhookConcurrencyPerAccount: wholeNumber(env, "WEBHOOK_CONCURRENCY_PER_ACCOUNT", WEBHOOK_CONCURRENCY_PER_ACCOUNT, 1),
    webhookDnsServers: dnsServers(env, "WEBHOOK_DNS_SERVERS"),
    logLevel: env.LOG_LEVEL ?? "info",
    metricsToken: env.METRICS_TOKEN || undefined,
    noAlphaCountries: new Set(
      (env.NO_ALPHA_SENDER_COUNTRIES ?? DEFAULT_NO_ALPHA_COUNTRIES.join(","))
        .split(",")
        .map((c) => c.trim().toUpperCase())
        .filter(Boolean),
    ),
    mailFromDomains: parseMailFromDomains(env.MAIL_FROM_DOMAINS),
    bodyLimit: wholeNumber(env, "BODY_LIMIT_BYTES", 1024 * 1024, 1),
    sendRateLimit,
    sendRateBurst: wholeNumber(env, "SEND_RATE_BURST", defaultSendBurst(sendRateLimit), 1),
    redisUrl: redisUrl(env.REDIS_URL),
    connections: connectionLimits(env),
    authFailures: {
      perAddress: wholeNumber(env, "AUTH_FAILURES_PER_ADDRESS", DEFAULT_AUTH_FAILURE_LIMITS.perAddress, 0),
      perAccount: wholeNumber(env, "AUTH_FAILURES_PER_ACCOUNT", DEFAULT_AUTH_FAILURE_LIMITS.perAccount, 0),
      windowMs: wholeNumber(env, "AUTH_FAILURE_WINDOW_SECONDS", DEFAULT_AUTH_FAILURE_LIMITS.windowMs / 1000, 1) * 1000,
    },
    reads: readLimits(env, raw || DEFAULT_DATA_DIR),
    simulatorReportDelayMs: Number(env.SIMULATOR_REPORT_DELAY_MS ?? 200),
    kannel: {
      sendsmsUrl: env.KANNEL_SENDSMS_URL ?? "http://127.0.0.1:13013/cgi-bin/sendsms",
      username: env.KANNEL_USERNAME ?? "switchboard",
      password: env.KANNEL_PASSWORD ?? "switchboard",
      callbackBaseUrl: env.KANNEL_CALLBACK_URL ?? `http://127.0.0.1:${port}`,
      callbackSecret: carrier === "kannel" ? kannelCallbackSecret(env) : "",
      confirmWaitMs: seconds("KANNEL_CONFIRM_WAIT_SECONDS", 30, 0),
      tps: rate(env, "KANNEL_TPS", 0),
    },
    smpp: carrier === "smpp" ? smppConfig(env) : undefined,
    dispatchClaimMs: seconds("DISPATCH_CLAIM_SECONDS", 60, 1),
    delivery: delivery(env.DELIVERY, raw || DEFAULT_DATA_DIR),
    receiptTimeoutMs: receiptTimeoutMs(env),
    retention: {
      defaultDays: env.MESSAGE_RETENTION_DAYS?.trim() ? wholeNumber(env, "MESSAGE_RETENTION_DAYS", 0, 1) : null,
      batch: wholeNumber(env, "PURGE_BATCH_SIZE", 1000, 1),
      pauseMs: wholeNumber(env, "PURGE_PAUSE_MS", 100, 0),
      intervalMs: seconds("PURGE_INTERVAL_SECONDS", 300, 1),
    },
    destinations: destinationConfig(env),
  };
}

const DELIVERY_OFF_NEEDS_POSTGRES =
  "DELIVERY=off needs a shared PostgreSQL database (DATABASE_URL=postgres://…) and `npm run worker` processes on it: on the embedded database nothing else can deliver this process's messages";

/** DELIVERY: on (default) or off; off needs PostgreSQL, where `npm run worker` processes can deliver. */
function delivery(raw: string | undefined, databaseUrl: string): "on" | "off" {
  const v = raw?.trim().toLowerCase() || "on";
  if (v !== "on" && v !== "off") throw new Error(`DELIVERY must be on or off, got "${raw}"`);
  if (v === "off" && databaseKind(databaseUrl) !== "postgres") throw new Error(DELIVERY_OFF_NEEDS_POSTGRES);
  return v;
}

/** RECEIPT_TIMEOUT_HOURS (default 72): a positive number of hours, in ms. */
function receiptTimeoutMs(env: NodeJS.ProcessEnv): number {
  const raw = env.RECEIPT_TIMEOUT_HOURS?.trim() || "72";
  const hours = Number(raw);
  if (!Number.isFinite(hours) || hours <= 0) throw new Error(`RECEIPT_TIMEOUT_HOURS must be a positive number of hours; got "${env.RECEIPT_TIMEOUT_HOURS}"`);
  return Math.round(hours * 3_600_000);
}

/** SWITCHBOARD_ADMIN_TOKEN, refused when short enough to guess; undefined when unset (one is generated). */
function adminToken(env: NodeJS.ProcessEnv): string | undefined {
  const token = env.SWITCHBOARD_ADMIN_TOKEN;
  if (!token) return undefined;
  checkSecret("SWITCHBOARD_ADMIN_TOKEN", token, "the operator token");
  return token;
}

/** KANNEL_CALLBACK_SECRET, required with CARRIER=kannel: the callbacks are on the public port. */
function kannelCallbackSecret(env: NodeJS.ProcessEnv): string {
  const secret = env.KANNEL_CALLBACK_SECRET ?? "";
  if (secret.trim() === "") {
    throw new Error(
      `CARRIER=kannel needs KANNEL_CALLBACK_SECRET: anyone who knows it can forge replies and delivery reports. Set it to a random string of at least ${MIN_SECRET_LENGTH} characters (e.g. \`openssl rand -hex 32\`), the same one Kannel's get-url and dlr-url carry.`,
    );
  }
  checkSecret("KANNEL_CALLBACK_SECRET", secret, "the Kannel callbacks' shared secret");
  return secret;
}

/** Refuses a secret that is public or short enough to guess, naming the variable. */
export function checkSecret(name: string, secret: string, what: string): void {
  if (PUBLIC_SECRETS.has(secret.trim().toLowerCase())) {
    throw new Error(
      `${name} is a published default ("${secret}"); ${what} must be your own random string of at least ${MIN_SECRET_LENGTH} characters (e.g. \`openssl rand -hex 32\`).`,
    );
  }
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new Error(`${name} is ${secret.length} characters long; ${what} must be at least ${MIN_SECRET_LENGTH} (e.g. \`openssl rand -hex 32\`).`);
  }
}

function connectionLimits(env: NodeJS.ProcessEnv): ConnectionLimits {
  const d = DEFAULT_CONNECTION_LIMITS;
  const headersTimeoutMs = wholeNumber(env, "HEADERS_TIMEOUT_MS", d.headersTimeoutMs, 1);
  const requestTimeoutMs = wholeNumber(env, "REQUEST_TIMEOUT_MS", d.requestTimeoutMs, 1);
  // Node refuses a headers timeout longer than the request timeout.
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new Error(`HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not be longer than REQUEST_TIMEOUT_MS (${requestTimeoutMs})`);
  }
  return {
    maxStreamsPerConnection: wholeNumber(env, "MAX_STREAMS_PER_CONNECTION", d.maxStreamsPerConnection, 1),
    maxPipelinedRequests: wholeNumber(env, "MAX_PIPELINED_REQUESTS", d.maxPipelinedRequests, 0),
    headersTimeoutMs,
    requestTimeoutMs,
    maxHeaderBytes: wholeNumber(env, "MAX_HEADER_BYTES", d.maxHeaderBytes, 1024),
    idleTimeoutMs: wholeNumber(env, "HTTP2_IDLE_TIMEOUT_MS", d.idleTimeoutMs, 1),
  };
}

function readLimits(env: NodeJS.ProcessEnv, databaseUrl: string): ReadLimits {
  const d = defaultReadLimits(databaseKind(databaseUrl));
  return {
    perAccount: wholeNumber(env, "READ_CONCURRENCY_PER_ACCOUNT", d.perAccount, 1),
    queuePerAccount: wholeNumber(env, "READ_QUEUE_PER_ACCOUNT", d.queuePerAccount, 0),
    global: wholeNumber(env, "READ_CONCURRENCY", d.global, 1),
    statementTimeoutMs: wholeNumber(env, "READ_STATEMENT_TIMEOUT_MS", d.statementTimeoutMs, 1),
  };
}

/** A whole number from the environment, at least `min`; the default when unset or blank. */
function wholeNumber(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`${name} must be a whole number of at least ${min}, got "${raw}"`);
  return n;
}

/** A comma-separated list of DNS servers (`ip`, `ip:port`, `[ipv6]:port`), checked by Node's own parser. */
function dnsServers(env: NodeJS.ProcessEnv, name: string): string[] {
  const list = (env[name] ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  try {
    new Resolver().setServers(list);
  } catch {
    throw new Error(`${name} must be a comma-separated list of IP addresses, each with an optional :port, got "${env[name]}"`);
  }
  return list;
}

/** A rate per second: a positive number, or 0 / "off" for none. */
function rate(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (/^off$/i.test(raw)) return 0;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a number of messages per second, 0 or "off", got "${raw}"`);
  return n;
}
