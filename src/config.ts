/**
 * The service's configuration: every environment variable is declared once in
 * ./config/variables.ts (its kind, default, bounds and one-line description); loadConfig parses
 * them all at once, names every bad one with the form it expects, and builds the Config the rest
 * of the service takes. docs/configuration.md is generated from the same table.
 */
import { isKnownCountry } from "./config/kinds.js";
import {
  DEFAULT_MAIL_FROM_DOMAINS,
  DEFAULT_NO_ALPHA_COUNTRIES,
  DEFAULT_SEND_RATE_LIMIT,
  DEFAULT_SENDER_ID_REGISTRATION,
  DEFAULT_SUBMISSION_HOLD_MS,
  type SenderIdMode,
  type Values,
  type Variable,
  type VariableName,
  VARIABLES,
  WEBHOOK_CONCURRENCY,
  WEBHOOK_CONCURRENCY_PER_ACCOUNT,
  WEBHOOK_CONCURRENCY_PER_HOST,
} from "./config/variables.js";

export {
  DEFAULT_MAIL_FROM_DOMAINS,
  DEFAULT_NO_ALPHA_COUNTRIES,
  DEFAULT_SEND_RATE_LIMIT,
  DEFAULT_SENDER_ID_REGISTRATION,
  DEFAULT_SUBMISSION_HOLD_MS,
  isKnownCountry,
  type SenderIdMode,
  WEBHOOK_CONCURRENCY,
  WEBHOOK_CONCURRENCY_PER_ACCOUNT,
  WEBHOOK_CONCURRENCY_PER_HOST,
};

/** Sender of forwarded e-mails when the message named no ForwardFromEmail. */
export const NO_REPLY_EMAIL = `no-reply@${DEFAULT_MAIL_FROM_DOMAINS[0]}`;

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

/** Connections of the pool no read may take: sends, the dispatcher, receipts and webhooks keep them. */
export const POOL_RESERVED_FOR_WRITES = 4;

/** The defaults of every variable: the table parsed with nothing set. */
const DEFAULTS = parseVariables({}).values;

/**
 * The read limits when the environment does not say. On PostgreSQL reads may take the pool less
 * the connections kept for writes; PGlite has one connection, which runs one statement at a time
 * whatever the caps: there one read at a time takes turns with sends on it.
 */
export function defaultReadLimits(kind: "postgres" | "pglite"): ReadLimits {
  return readLimits(DEFAULTS, kind);
}

function readLimits(v: Values, kind: "postgres" | "pglite"): ReadLimits {
  return {
    perAccount: v.READ_CONCURRENCY_PER_ACCOUNT,
    queuePerAccount: v.READ_QUEUE_PER_ACCOUNT,
    global: v.READ_CONCURRENCY ?? (kind === "postgres" ? DEFAULT_POOL_MAX - POOL_RESERVED_FOR_WRITES : 1),
    statementTimeoutMs: v.READ_STATEMENT_TIMEOUT_MS,
  };
}

function connectionLimits(v: Values): ConnectionLimits {
  return {
    maxStreamsPerConnection: v.MAX_STREAMS_PER_CONNECTION,
    maxPipelinedRequests: v.MAX_PIPELINED_REQUESTS,
    headersTimeoutMs: v.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: v.REQUEST_TIMEOUT_MS,
    maxHeaderBytes: v.MAX_HEADER_BYTES,
    idleTimeoutMs: v.HTTP2_IDLE_TIMEOUT_MS,
  };
}

function authFailureLimits(v: Values): AuthFailureLimits {
  return { perAddress: v.AUTH_FAILURES_PER_ADDRESS, perAccount: v.AUTH_FAILURES_PER_ACCOUNT, windowMs: v.AUTH_FAILURE_WINDOW_SECONDS * 1000 };
}

/** Default bucket size for a send rate (SEND_RATE_BURST): ten seconds' worth, never less than one full batch (100). */
export function defaultSendBurst(ratePerSecond: number): number {
  return Math.max(100, Math.ceil(ratePerSecond * 10));
}

/** Connection limits when the environment does not say (docs/configuration.md). */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = connectionLimits(DEFAULTS);

/** Failed authentications allowed before 429 when the environment does not say (docs/configuration.md). */
export const DEFAULT_AUTH_FAILURE_LIMITS: AuthFailureLimits = authFailureLimits(DEFAULTS);

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
  /** SERVER_TIMING: each REST call answers a `Server-Timing` header of its steps (common/server-timing.ts). */
  serverTiming: boolean;
  /** Countries (ISO alpha-2) whose operators do not take alphanumeric sender IDs. */
  noAlphaCountries: Set<string>;
  /** SENDER_ID_REGISTRATION: the recipient countries whose alphanumeric senders are checked against the registered sender IDs, and how. */
  senderIdRegistration: ReadonlyMap<string, SenderIdMode>;
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
  /** The SMPP server's ports (docs/smpp-server.md); undefined when SMPP_SERVER_PORT and SMPP_SERVER_TLS_PORT are unset. */
  smppServer?: SmppServerConfig;
  /** How long a dispatcher's claim on a message lasts; a crashed dispatcher's claims expire after it, ms. */
  dispatchClaimMs: number;
  /** How long a submission the carrier accepted waits for its report, to be written with the final state, ms (SUBMISSION_HOLD_MS; 0: at once). */
  submissionHoldMs: number;
  /** DELIVERY: "on" runs the delivery engine's loops beside the API; "off" leaves them to `npm run worker` processes. */
  delivery: "on" | "off";
  /** How long after its submission a message without a delivery report gets ErrorCode ReceiptTimeout, ms (RECEIPT_TIMEOUT_HOURS). */
  receiptTimeoutMs: number;
  /** Retention and redaction (docs/configuration.md#retention). */
  retention: RetentionConfig;
  /** The deployment's destination permissions (docs/api.md#destination-permissions; docs/configuration.md). */
  destinations: DestinationConfig;
  /** The currency and the default rate card (docs/billing.md). */
  billing: BillingConfig;
}

/** The SMPP server's ports (docs/smpp-server.md): plain, TLS, or both. */
export interface SmppServerConfig {
  /** SMPP_SERVER_PORT: plain TCP; undefined: none. */
  port?: number;
  /** SMPP_SERVER_TLS_PORT: TLS; undefined: none. */
  tlsPort?: number;
  /** PEM files of the TLS port's certificate chain and key. */
  tlsCertFile?: string;
  tlsKeyFile?: string;
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

/** The deployment's billing settings (docs/billing.md). */
export interface BillingConfig {
  /** BILLING_CURRENCY: ISO 4217, the PriceUnit of every amount. */
  currency: string;
  /** DEFAULT_RATE_CARD: the card of the accounts without their own; undefined: those are not priced. */
  defaultRateCard?: string;
}

/** The billing settings when the environment does not say: AUD, no default rate card. */
export const DEFAULT_BILLING: BillingConfig = { currency: DEFAULTS.BILLING_CURRENCY };

/** A configuration that cannot work: every bad variable, each named with the form it expects. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.length === 1 ? problems[0] : `${problems.length} configuration variables are wrong:\n- ${problems.join("\n- ")}`);
    this.name = "ConfigError";
  }
}

/** The parsed values of the named variables (all of them by default), and a line for each bad one. */
export function parseVariables<K extends VariableName>(env: NodeJS.ProcessEnv, names?: readonly K[]): { values: Pick<Values, K>; problems: string[] } {
  const values: Partial<Values> = {};
  const problems: string[] = [];
  for (const name of names ?? (Object.keys(VARIABLES) as K[])) {
    const variable = VARIABLES[name];
    const raw = env[name]?.trim();
    const parsed = variable.kind.schema.safeParse(raw === "" ? undefined : raw);
    if (parsed.success) (values as Record<string, unknown>)[name] = parsed.data;
    else problems.push(`${name} must be ${variable.kind.expected}${problemValue(variable, raw ?? "")}`);
  }
  return { values: values as Pick<Values, K>, problems };
}

/** What an error line says of the bad value: its bad item, or the value, or nothing for a secret. */
function problemValue(variable: Variable, raw: string): string {
  if (variable.secret) return "";
  const culprit = variable.kind.culprit?.(raw);
  return culprit === undefined ? `, got "${raw}"` : `; "${culprit}" is not one`;
}

/** parseVariables, throwing a ConfigError naming every bad variable. */
function variables<K extends VariableName>(env: NodeJS.ProcessEnv, names?: readonly K[]): Pick<Values, K> {
  const { values, problems } = parseVariables(env, names);
  if (problems.length > 0) throw new ConfigError(problems);
  return values;
}

const DESTINATION_VARIABLES = ["DEFAULT_ALLOWED_COUNTRIES", "BLOCKED_PREFIXES", "ALLOW_PREMIUM_DESTINATIONS"] as const;

/** The destination settings from the environment; a bad value stops start-up naming its variable. */
export function destinationConfig(env: NodeJS.ProcessEnv): DestinationConfig {
  return destinations(variables(env, DESTINATION_VARIABLES));
}

function destinations(v: Pick<Values, (typeof DESTINATION_VARIABLES)[number]>): DestinationConfig {
  return { defaultAllowedCountries: v.DEFAULT_ALLOWED_COUNTRIES, blockedPrefixes: v.BLOCKED_PREFIXES, allowPremium: v.ALLOW_PREMIUM_DESTINATIONS };
}

const SMPP_VARIABLES = [
  "SMPP_URL",
  "SMPP_SYSTEM_TYPE",
  "SMPP_WINDOW",
  "SMPP_TPS",
  "SMPP_MO_REASSEMBLY_SECONDS",
  "SMPP_ENQUIRE_LINK_SECONDS",
  "SMPP_COUNTRY",
  "SMPP_TLS_CA",
] as const;

/** Parses SMPP_URL and the other SMPP_ settings (a carrier row's settings come the same way). */
export function smppConfig(env: NodeJS.ProcessEnv): SmppConfig {
  const { values: v, problems } = parseVariables(env, SMPP_VARIABLES);
  const url = smppUrl(v.SMPP_URL ?? "", problems);
  if (problems.length > 0 || !url) throw new ConfigError(problems);
  const tls = url.protocol === "smpps:";
  return {
    host: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port ? Number(url.port) : tls ? 3550 : 2775,
    tls,
    systemId: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    systemType: v.SMPP_SYSTEM_TYPE,
    window: v.SMPP_WINDOW,
    tps: v.SMPP_TPS,
    moReassemblyMs: v.SMPP_MO_REASSEMBLY_SECONDS,
    enquireLinkMs: v.SMPP_ENQUIRE_LINK_SECONDS,
    country: v.SMPP_COUNTRY,
    tlsCaFile: v.SMPP_TLS_CA,
  };
}

/** SMPP_URL as a URL, or a problem pushed (never repeating the URL: it holds the password). */
function smppUrl(raw: string, problems: string[]): URL | undefined {
  const form = "smpp://system_id:password@host:port or smpps://…";
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    problems.push(`SMPP_URL must be ${form}`);
    return undefined;
  }
  if (url.protocol !== "smpp:" && url.protocol !== "smpps:") problems.push(`SMPP_URL must start with smpp:// or smpps://, got "${url.protocol}//"`);
  else if (!url.hostname || !url.username) problems.push("SMPP_URL must name the system_id and the host: smpp://system_id:password@host:port");
  else return url;
  return undefined;
}

const DEFAULT_DATA_DIR = ".switchboard/data";

/** Parses the environment into a Config, failing fast, with every bad variable named at once. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const { values: v, problems } = parseVariables(env);
  const databaseUrl = v.DATABASE_URL ?? DEFAULT_DATA_DIR;
  const check = (name: string, fn: () => void) => {
    try {
      fn();
    } catch (e) {
      problems.push(e instanceof ConfigError ? e.problems.join("; ") : e instanceof Error ? e.message : `${name}: ${String(e)}`);
    }
  };
  if (v.SWITCHBOARD_ADMIN_TOKEN !== undefined)
    check("SWITCHBOARD_ADMIN_TOKEN", () => checkSecret("SWITCHBOARD_ADMIN_TOKEN", v.SWITCHBOARD_ADMIN_TOKEN!, "the operator token"));
  if (v.CARRIER === "kannel") check("KANNEL_CALLBACK_SECRET", () => kannelCallbackSecret(v.KANNEL_CALLBACK_SECRET ?? ""));
  let smpp: SmppConfig | undefined;
  if (v.CARRIER === "smpp") check("SMPP_URL", () => (smpp = smppConfig(env)));
  if (v.HEADERS_TIMEOUT_MS !== undefined && v.REQUEST_TIMEOUT_MS !== undefined && v.HEADERS_TIMEOUT_MS > v.REQUEST_TIMEOUT_MS) {
    // Node refuses a headers timeout longer than the request timeout.
    problems.push(`HEADERS_TIMEOUT_MS (${v.HEADERS_TIMEOUT_MS}) must not be longer than REQUEST_TIMEOUT_MS (${v.REQUEST_TIMEOUT_MS})`);
  }
  if (v.DELIVERY === "off" && databaseKind(databaseUrl) !== "postgres") problems.push(DELIVERY_OFF_NEEDS_POSTGRES);
  if (v.SMPP_SERVER_TLS_PORT !== undefined && (v.SMPP_SERVER_TLS_CERT === undefined || v.SMPP_SERVER_TLS_KEY === undefined)) {
    problems.push("SMPP_SERVER_TLS_PORT needs SMPP_SERVER_TLS_CERT and SMPP_SERVER_TLS_KEY (PEM files of the certificate chain and its private key)");
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const sendRateLimit = v.SEND_RATE_LIMIT;
  return {
    port: v.PORT,
    host: v.HOST,
    databaseUrl,
    adminToken: v.SWITCHBOARD_ADMIN_TOKEN,
    carrier: v.CARRIER,
    smtpUrl: v.SMTP_URL,
    webhookAllowPrivate: v.WEBHOOK_ALLOW_PRIVATE,
    webhookConcurrency: v.WEBHOOK_CONCURRENCY,
    webhookConcurrencyPerHost: v.WEBHOOK_CONCURRENCY_PER_HOST,
    webhookConcurrencyPerAccount: v.WEBHOOK_CONCURRENCY_PER_ACCOUNT,
    webhookDnsServers: v.WEBHOOK_DNS_SERVERS,
    logLevel: v.LOG_LEVEL,
    metricsToken: v.METRICS_TOKEN,
    serverTiming: v.SERVER_TIMING,
    noAlphaCountries: new Set(v.NO_ALPHA_SENDER_COUNTRIES),
    senderIdRegistration: v.SENDER_ID_REGISTRATION,
    mailFromDomains: v.MAIL_FROM_DOMAINS,
    bodyLimit: v.BODY_LIMIT_BYTES,
    sendRateLimit,
    sendRateBurst: v.SEND_RATE_BURST ?? defaultSendBurst(sendRateLimit),
    redisUrl: v.REDIS_URL,
    connections: connectionLimits(v),
    authFailures: authFailureLimits(v),
    reads: readLimits(v, databaseKind(databaseUrl)),
    simulatorReportDelayMs: v.SIMULATOR_REPORT_DELAY_MS,
    kannel: {
      sendsmsUrl: v.KANNEL_SENDSMS_URL,
      username: v.KANNEL_USERNAME,
      password: v.KANNEL_PASSWORD,
      callbackBaseUrl: v.KANNEL_CALLBACK_URL ?? `http://127.0.0.1:${v.PORT}`,
      callbackSecret: v.CARRIER === "kannel" ? (v.KANNEL_CALLBACK_SECRET ?? "") : "",
      confirmWaitMs: v.KANNEL_CONFIRM_WAIT_SECONDS,
      tps: v.KANNEL_TPS,
    },
    smpp,
    smppServer:
      v.SMPP_SERVER_PORT === undefined && v.SMPP_SERVER_TLS_PORT === undefined
        ? undefined
        : { port: v.SMPP_SERVER_PORT, tlsPort: v.SMPP_SERVER_TLS_PORT, tlsCertFile: v.SMPP_SERVER_TLS_CERT, tlsKeyFile: v.SMPP_SERVER_TLS_KEY },
    dispatchClaimMs: v.DISPATCH_CLAIM_SECONDS,
    submissionHoldMs: v.SUBMISSION_HOLD_MS,
    delivery: v.DELIVERY,
    receiptTimeoutMs: v.RECEIPT_TIMEOUT_HOURS,
    retention: {
      defaultDays: v.MESSAGE_RETENTION_DAYS ?? null,
      batch: v.PURGE_BATCH_SIZE,
      pauseMs: v.PURGE_PAUSE_MS,
      intervalMs: v.PURGE_INTERVAL_SECONDS,
    },
    destinations: destinations(v),
    billing: { currency: v.BILLING_CURRENCY, defaultRateCard: v.DEFAULT_RATE_CARD },
  };
}

const DELIVERY_OFF_NEEDS_POSTGRES =
  "DELIVERY=off needs a shared PostgreSQL database (DATABASE_URL=postgres://…) and `npm run worker` processes on it: on the embedded database nothing else can deliver this process's messages";

/** KANNEL_CALLBACK_SECRET, required with CARRIER=kannel: the callbacks are on the public port. */
function kannelCallbackSecret(secret: string): void {
  if (secret.trim() === "") {
    throw new Error(
      `CARRIER=kannel needs KANNEL_CALLBACK_SECRET: anyone who knows it can forge replies and delivery reports. Set it to a random string of at least ${MIN_SECRET_LENGTH} characters (e.g. \`openssl rand -hex 32\`), the same one Kannel's get-url and dlr-url carry.`,
    );
  }
  checkSecret("KANNEL_CALLBACK_SECRET", secret, "the Kannel callbacks' shared secret");
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
