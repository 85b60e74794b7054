/**
 * Every environment variable the service reads, declared once: its kind (type, default, bounds:
 * a Zod schema, ./kinds.ts), where it is documented and one line on what it does. src/config.ts
 * parses them all at once and builds the Config; docs/configuration.md and docs/carriers.md show
 * the tables generated from here (`npm run docs:config`, checked by a test).
 */
import {
  countries,
  country,
  countryModes,
  currency,
  dnsServers,
  domains,
  duration,
  flag,
  type Kind,
  oneOf,
  optionalName,
  optionalText,
  optionalUrl,
  prefixes,
  rate,
  text,
  whole,
} from "./kinds.js";

/** Which generated table a variable is documented in. */
export type Group = "service" | "kannel" | "smpp" | "smpp-server";

export interface Variable<T = unknown> {
  kind: Kind<T>;
  group: Group;
  /** The Meaning column: what it does, in one line (Markdown). */
  doc: string;
  /** The Default column when the kind's own would mislead (a default computed from other settings). */
  shown?: string;
  /** Its value is a secret: an error never repeats it. */
  secret?: boolean;
}

const v = <T>(kind: Kind<T>, group: Group, doc: string, extra: Omit<Variable<T>, "kind" | "group" | "doc"> = {}): Variable<T> => ({
  kind,
  group,
  doc,
  ...extra,
});

/** Webhook calls in flight by default: per process, per (account, host), per account (a quarter of the default pool). */
export const WEBHOOK_CONCURRENCY = 64;
export const WEBHOOK_CONCURRENCY_PER_HOST = 4;
export const WEBHOOK_CONCURRENCY_PER_ACCOUNT = 16;
/** Default sustained send rate, segments per second per account (SEND_RATE_LIMIT). */
export const DEFAULT_SEND_RATE_LIMIT = 50;
/** SUBMISSION_HOLD_MS's default (the test harness's engine too). */
export const DEFAULT_SUBMISSION_HOLD_MS = 1000;
/** The domain of the no-reply address, the only one a ForwardFromEmail may use by default. */
export const DEFAULT_MAIL_FROM_DOMAINS: readonly string[] = ["switchboard.invalid"];
/** Countries whose operators do not take alphanumeric sender IDs by default. */
export const DEFAULT_NO_ALPHA_COUNTRIES: readonly string[] = ["US", "CA"];

/** How a country checks alphanumeric sender IDs (SENDER_ID_REGISTRATION): refuse unregistered ones, or send and mark them. */
export type SenderIdMode = "require" | "label";
/** Countries whose alphanumeric sender IDs must be registered by default: Australia's SMS Sender ID Register (from 1 July 2026). */
export const DEFAULT_SENDER_ID_REGISTRATION: Readonly<Record<string, SenderIdMode>> = { AU: "require" };

export const VARIABLES = {
  PORT: v(whole(8080, 0, 65535, "a port number"), "service", "the one listening port (HTTP/1.1 and h2c)"),
  HOST: v(text("0.0.0.0"), "service", "listen address"),
  DATABASE_URL: v(
    optionalText("embedded PGlite in `.switchboard/data`"),
    "service",
    "`postgres://…` for a PostgreSQL server; `memory://` for an in-memory PGlite; any other value is a PGlite data folder",
  ),
  SWITCHBOARD_ADMIN_TOKEN: v(
    optionalText("generated on first run (40 characters) and kept in `.switchboard/admin-token` (embedded default) or printed for that run"),
    "service",
    "operator bearer token; the service refuses to start with one under 32 characters or a published default (e.g. use `openssl rand -hex 32`)",
    { secret: true },
  ),
  AUTH_FAILURES_PER_ADDRESS: v(
    whole(20, 0),
    "service",
    "failed authentications a client address may make per window before every request from it gets `429 RateLimited` until the window ends; `0` turns it off ([Failed authentications](api.md#failed-authentications))",
  ),
  AUTH_FAILURES_PER_ACCOUNT: v(
    whole(10, 0),
    "service",
    "failed authentications naming one AccountSid per window before its requests get `429`, except from addresses it authenticated from; `0` turns it off",
  ),
  AUTH_FAILURE_WINDOW_SECONDS: v(whole(60, 1), "service", "length of the window of both limits, whole seconds"),
  CARRIER: v(
    oneOf(["simulator", "kannel", "smpp"], "simulator"),
    "service",
    "`simulator`, `kannel` or `smpp` ([carriers](carriers.md)): the carrier named `default` while no carrier is configured through `/admin/v1/Carriers` ([carriers and routes](operations.md#carriers-and-routes))",
  ),
  SIMULATOR_REPORT_DELAY_MS: v(
    whole(200, 0),
    "service",
    "delay before the simulator's delivery reports, ms ([the simulator](carriers.md#carriersimulator-default))",
  ),
  SMTP_URL: v(optionalText(), "service", "SMTP server for forwarded e-mails; unset keeps them in the database", { secret: true }),
  WEBHOOK_ALLOW_PRIVATE: v(flag(false), "service", "allow webhooks to loopback/private addresses (development, tests)"),
  WEBHOOK_CONCURRENCY: v(whole(WEBHOOK_CONCURRENCY, 1), "service", "webhook calls in flight at once per process"),
  WEBHOOK_CONCURRENCY_PER_HOST: v(
    whole(WEBHOOK_CONCURRENCY_PER_HOST, 1),
    "service",
    "webhook calls in flight at once per (account, destination host) per process; an endpoint of one account never takes more, however long its queue",
  ),
  WEBHOOK_CONCURRENCY_PER_ACCOUNT: v(
    whole(WEBHOOK_CONCURRENCY_PER_ACCOUNT, 1),
    "service",
    "webhook calls in flight at once per account, all its destination hosts together, per process; an account naming many slow hosts holds no more",
  ),
  WEBHOOK_DNS_SERVERS: v(
    dnsServers(),
    "service",
    "comma-separated `ip[:port]` DNS servers to resolve webhook hosts with (A and AAAA) instead of the system resolver (`/etc/hosts`, then DNS)",
  ),
  NO_ALPHA_SENDER_COUNTRIES: v(
    countries([...DEFAULT_NO_ALPHA_COUNTRIES]),
    "service",
    "recipients' countries that get a leased sender instead of an alphanumeric one",
  ),
  SENDER_ID_REGISTRATION: v(
    countryModes(["require", "label"], DEFAULT_SENDER_ID_REGISTRATION),
    "service",
    "per recipient country, `CC=require` (an alphanumeric `From` not Registered to the account for that country is refused, `400 SenderIdNotRegistered`) or `CC=label` (sent, and the record says `SenderIdRegistered: false`); unlisted countries are not checked; `none` checks none ([Sender IDs](api.md#sender-ids))",
  ),
  DEFAULT_ALLOWED_COUNTRIES: v(
    countries([], "unset (every country)"),
    "service",
    "comma-separated ISO 3166-1 alpha-2 codes (any case) the accounts without their own `AllowedCountries` may send to ([Destination permissions](api.md#destination-permissions))",
  ),
  BILLING_CURRENCY: v(
    currency("AUD"),
    "service",
    "the deployment's one currency (ISO 4217, three capital letters): the `PriceUnit` of every balance, ledger and price ([Billing](billing.md))",
  ),
  DEFAULT_RATE_CARD: v(
    // billing/rate-rules.ts's CARD_NAME_RE, written again: the configuration imports nothing of the domain.
    optionalName(/^[A-Za-z0-9._-]{1,64}$/, "a rate card name: 1 to 64 letters, digits, '.', '_' or '-'"),
    "service",
    "the rate card of the accounts without their own `RateCard`; unset: those accounts' sends are not priced ([Billing](billing.md))",
  ),
  BLOCKED_PREFIXES: v(prefixes(), "service", "comma-separated E164 prefixes (`+` and digits, e.g. `+4470,+882`) no account may send to"),
  ALLOW_PREMIUM_DESTINATIONS: v(
    flag(false),
    "service",
    "`true` lets accounts send to premium-rate, shared-cost and other special-service numbers (refused by default)",
  ),
  MAIL_FROM_DOMAINS: v(
    domains([...DEFAULT_MAIL_FROM_DOMAINS]),
    "service",
    "comma-separated domains a `ForwardFromEmail` may be in (exact, any case); `*` allows any (development only: it lets a client send mail as anyone through your server)",
  ),
  BODY_LIMIT_BYTES: v(whole(1024 * 1024, 1), "service", "largest request body, every protocol"),
  SEND_RATE_LIMIT: v(
    rate(DEFAULT_SEND_RATE_LIMIT),
    "service",
    "segments per second per account, sustained, for the whole deployment (an account's `SendRatePerSecond` overrides it); `0` or `off`: no default limit (see [Limits](api.md#limits))",
  ),
  SEND_RATE_BURST: v(whole(undefined, 1), "service", "segments an account may send at once", { shown: "10 × `SEND_RATE_LIMIT`, at least `100`" }),
  REDIS_URL: v(
    optionalUrl(["redis", "rediss"], "a redis:// or rediss:// URL"),
    "service",
    "`redis://` or `rediss://`: the limits shared by every process (request rates, dispatch rates, carriers' Tps) are counted in this Redis, daily quotas still in the database (they must survive a Redis restart); unset, all in the database. `/readyz` is 503 while it does not answer ([limits.md](limits.md))",
    { secret: true },
  ),
  // One at a time: a flood of large pages slows another account's sends more the more of them run
  // at once, while one at a time still lets the flooding account through (docs/benchmarks.md).
  READ_CONCURRENCY_PER_ACCOUNT: v(
    whole(1, 1),
    "service",
    "reads (`Get…`/`List…` methods) an account runs at once per process; see [Reads, per account](api.md#reads-per-account)",
  ),
  READ_QUEUE_PER_ACCOUNT: v(whole(8, 0), "service", "further reads of an account that wait for a slot; one more is `429 RateLimited`"),
  READ_CONCURRENCY: v(
    whole(undefined, 1),
    "service",
    "reads of all accounts at once per process; keep it below the pool size so sends always find a connection",
    { shown: "`6` on PostgreSQL (the pool's 10 connections less 4 kept for writes), `1` on PGlite" },
  ),
  READ_STATEMENT_TIMEOUT_MS: v(
    whole(5000, 1),
    "service",
    "PostgreSQL cancels a read's statement running longer (answered `503 ServiceUnavailable`); PGlite cannot cancel a statement",
  ),
  MAX_STREAMS_PER_CONNECTION: v(whole(100, 1), "service", "HTTP/2 streams open at once per connection"),
  MAX_PIPELINED_REQUESTS: v(whole(16, 0), "service", "HTTP/1.1 pipelined requests that may wait on one connection"),
  MAX_HEADER_BYTES: v(whole(16 * 1024, 1024), "service", "largest request header block"),
  HEADERS_TIMEOUT_MS: v(whole(10_000, 1), "service", "time to receive a request's headers (HTTP/1.1); at most `REQUEST_TIMEOUT_MS`"),
  REQUEST_TIMEOUT_MS: v(whole(30_000, 1), "service", "time to receive a whole request (HTTP/1.1)"),
  // As long as Node keeps an idle HTTP/1.1 keep-alive connection (its keepAliveTimeout).
  HTTP2_IDLE_TIMEOUT_MS: v(
    whole(5000, 1),
    "service",
    "an HTTP/2 connection with no stream open and no frame for this long gets GOAWAY and is closed (a stream in flight keeps it open)",
  ),
  RECEIPT_TIMEOUT_HOURS: v(
    duration(72, 0, "hours", { positive: true }),
    "service",
    "a message still `Submitted` this long after its submission, without a delivery report, gets `ErrorCode` `ReceiptTimeout` (it stays `Submitted`; a later report still counts); see [Operations](operations.md#messages-without-a-delivery-report)",
  ),
  DISPATCH_CLAIM_SECONDS: v(
    duration(60, 1, "seconds"),
    "service",
    "how long a dispatcher's claim on a message lasts; a crashed dispatcher's messages are taken again after it. Keep it above the carrier's 10 s submit timeout",
  ),
  SUBMISSION_HOLD_MS: v(
    whole(DEFAULT_SUBMISSION_HOLD_MS, 0),
    "service",
    "how long a submission the carrier accepted waits in memory for the carrier's report, so that the message's final state and its submission are written by one statement (two writes per delivered message instead of three); what no report settles in time is written alone. A crash within this time after the hand-over may send such a message again, as a crash between the carrier's answer and its record always could (see [Reliability](reliability.md#submissions-held-for-their-report)). `0`: each round's submissions are written at once",
  ),
  DELIVERY: v(
    oneOf(["on", "off"], "on"),
    "service",
    "`off`: `npm start` serves the API only; sends are stored in the queue and `npm run worker` processes on the same PostgreSQL database deliver them (within 250 ms of their due time). The carrier still starts in the API process, so reports and replies that reach it are applied. Needs `DATABASE_URL=postgres://…`",
  ),
  MESSAGE_RETENTION_DAYS: v(
    whole(undefined, 1),
    "service",
    "days a message is kept, counted from its `Created`, when its account sets no `RetentionDays`; then it is deleted with its webhook calls and attempts, e-mails and Idempotency-Keys. See [Retention](#retention)",
    { shown: "unset (keep every message)" },
  ),
  PURGE_BATCH_SIZE: v(whole(1000, 1), "service", "messages the purge deletes or redacts per statement (one short transaction each)"),
  PURGE_PAUSE_MS: v(
    whole(100, 0),
    "service",
    "pause between two purge batches, so sends and the dispatcher keep their latency while a backlog drains; `0` for none",
  ),
  PURGE_INTERVAL_SECONDS: v(duration(300, 1, "seconds"), "service", "time between two purge passes once one has caught up"),
  LOG_LEVEL: v(
    oneOf(["fatal", "error", "warn", "info", "debug", "trace", "silent"], "info"),
    "service",
    "`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent` (see [Logging](operations.md#logging))",
  ),
  METRICS_TOKEN: v(
    optionalText(),
    "service",
    "when set, `GET /metrics` wants `Authorization: Bearer <METRICS_TOKEN>`; unset leaves it open (see [Metrics](operations.md#metrics))",
    { secret: true },
  ),
  SERVER_TIMING: v(
    flag(false),
    "service",
    "answer every REST call with a `Server-Timing` header naming the steps of its handling with their durations (the interceptors, the send's group-commit wait, its statement, the hand-off's reservation, the shared limits when on, the answer's body); for measuring where a send's time goes (`BENCH_LATENCY_STEPS=1`, [benchmarks.md](benchmarks.md)), not for production",
  ),

  KANNEL_SENDSMS_URL: v(text("http://127.0.0.1:13013/cgi-bin/sendsms"), "kannel", "smsbox's sendsms URL"),
  KANNEL_USERNAME: v(text("switchboard"), "kannel", "the `sendsms-user` username"),
  KANNEL_PASSWORD: v(text("switchboard"), "kannel", "its password", { secret: true }),
  KANNEL_CALLBACK_URL: v(optionalText("`http://127.0.0.1:$PORT`"), "kannel", "base URL at which Kannel reaches this service"),
  KANNEL_CALLBACK_SECRET: v(
    optionalText("none: required"),
    "kannel",
    "shared secret of the callbacks, which are on the public port; with `CARRIER=kannel` the service and `npm run worker` refuse to start when it is unset, empty, a published default (such as the former `switchboard-kannel`) or under 32 characters (e.g. use `openssl rand -hex 32`)",
    { secret: true },
  ),
  KANNEL_CONFIRM_WAIT_SECONDS: v(
    duration(30, 0, "seconds"),
    "kannel",
    "after a crash, how long to wait for Kannel's type 8 report on a submission whose answer was lost before submitting it again; keep it above smsbox's `http-queue-delay`",
  ),
  KANNEL_TPS: v(
    rate(0),
    "kannel",
    "sendsms calls per second for the whole deployment, every process together ([limits.md](limits.md)); also each process's own ceiling (`0` or `off`: no limit); the dispatcher claims no more than this lets through in two seconds",
  ),

  SMPP_URL: v(
    optionalText("— (required)"),
    "smpp",
    "`smpp://system_id:password@host:port` (port 2775 if omitted), `smpps://…` for TLS (3550); URL-encode `@`, `:` and `%` in the credentials",
    { secret: true },
  ),
  SMPP_SYSTEM_TYPE: v(text(""), "smpp", "`system_type` of the bind, if the operator asks for one"),
  SMPP_WINDOW: v(whole(10, 1), "smpp", "most `submit_sm` outstanding (sent, not yet answered) on the bind"),
  SMPP_TPS: v(
    rate(0),
    "smpp",
    "most `submit_sm` per second for the whole deployment, every process and bind together ([limits.md](limits.md)); on each bind evenly spaced, never more in any one second (`0`/`off`: no limit)",
  ),
  SMPP_MO_REASSEMBLY_SECONDS: v(
    duration(300, 1, "seconds"),
    "smpp",
    "how long the parts of a concatenated inbound SMS wait for the rest; then the parts that came are delivered, in order",
  ),
  SMPP_ENQUIRE_LINK_SECONDS: v(duration(30, 1, "seconds"), "smpp", "keepalive interval; no answer within 30 s drops and rebuilds the link"),
  SMPP_COUNTRY: v(country(), "smpp", "ISO country for national numbers (TON 2) the SMSC sends, e.g. `GB`"),
  SMPP_TLS_CA: v(optionalText("—"), "smpp", "PEM file of the CA that signed the SMSC's certificate, if not a public one"),

  SMPP_SERVER_PORT: v(
    whole(undefined, 0, 65535, "a port number"),
    "smpp-server",
    "the SMPP server's port, where customers' SMPP clients bind ([smpp-server.md](smpp-server.md)); unset: no SMPP server",
  ),
  SMPP_SERVER_TLS_PORT: v(
    whole(undefined, 0, 65535, "a port number"),
    "smpp-server",
    "the SMPP server's TLS port (needs `SMPP_SERVER_TLS_CERT` and `SMPP_SERVER_TLS_KEY`); unset: no TLS port",
  ),
  SMPP_SERVER_TLS_CERT: v(optionalText("—"), "smpp-server", "PEM file of the TLS port's certificate chain"),
  SMPP_SERVER_TLS_KEY: v(optionalText("—"), "smpp-server", "PEM file of the TLS port's private key"),
} satisfies Record<string, Variable<any>>;

export type VariableName = keyof typeof VARIABLES;

/** The parsed value of each variable. */
export type Values = { [K in VariableName]: (typeof VARIABLES)[K] extends Variable<infer T> ? T : never };
