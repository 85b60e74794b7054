import { destination as pinoDestination, pino, stdSerializers, stdTimeFunctions, type DestinationStream, type Logger } from "pino";
import type { Config } from "../config.js";

/** Replaces a secret wherever the logger finds one. */
export const REDACTED = "[Redacted]";

/** Field names whose values are secrets wherever they appear (up to four levels deep). */
const SECRET_KEYS = [
  "authorization",
  "Authorization",
  "cookie",
  "password",
  "Password",
  "token",
  "Token",
  "adminToken",
  "metricsToken",
  "secret",
  "webhookSecret",
  "WebhookSecret",
  "webhook_secret",
  "callbackSecret",
  "token_hash",
  "tokenHash",
];

/** Field names holding URLs that may carry a password: the URL stays, the password goes. */
const URL_KEYS = ["databaseUrl", "smtpUrl", "sendsmsUrl", "callbackBaseUrl", "url", "uri", "DATABASE_URL", "SMTP_URL"];

/** Values shipped as documented defaults are public, so they are not scrubbed out of every line. */
const PUBLIC_DEFAULTS = new Set(["switchboard", "switchboard-kannel"]);

/** Known secrets shorter than this are not scrubbed as substrings: they would mangle ordinary words. */
const MIN_SCRUBBED_LENGTH = 6;

const URL_PASSWORD_RE = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/?#"\\]*):[^\s@/?#"\\]*@/gi;
const QUERY_SECRET_RE = /([?&](?:password|passwd|pass|pwd|secret|token|api_?key|access_token)=)[^&\s"#\\]*/gi;
const AUTH_VALUE_RE = /\b(Basic|Bearer)\s+[A-Za-z0-9+/=._~-]{8,}/g;

function redactPaths(): string[] {
  const paths: string[] = [];
  for (const key of [...SECRET_KEYS, ...URL_KEYS]) {
    for (const prefix of ["", "*.", "*.*.", "*.*.*."]) paths.push(prefix + key);
  }
  return paths;
}

/** `postgres://user:pw@host/db` → `postgres://user:[Redacted]@host/db`; other text is kept. */
export function withoutUrlPassword(value: string): string {
  return value.replace(URL_PASSWORD_RE, `$1:${REDACTED}@`);
}

/** The password of a URL, if it has one (as written, and decoded). */
function urlPassword(value: string | undefined): string[] {
  if (!value) return [];
  try {
    const pw = new URL(value).password;
    return pw ? [pw, safeDecode(pw)] : [];
  } catch {
    return [];
  }
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The secrets of a configuration, as they could show up inside a log line. */
export function configSecrets(
  config: Pick<Config, "adminToken" | "databaseUrl" | "smtpUrl" | "metricsToken"> & {
    kannel?: Pick<Config["kannel"], "password" | "callbackSecret" | "sendsmsUrl">;
  },
): string[] {
  return [
    config.adminToken,
    config.metricsToken,
    config.kannel?.password,
    config.kannel?.callbackSecret,
    ...urlPassword(config.databaseUrl),
    ...urlPassword(config.smtpUrl),
    ...urlPassword(config.kannel?.sendsmsUrl),
  ].filter((s): s is string => typeof s === "string");
}

/**
 * The last line of defence, run on every serialized line: known secret values (in plain, JSON-escaped
 * and URL-encoded form), URL passwords, secret query parameters and Authorization values become [Redacted].
 */
export function createScrubber(secrets: string[]): (line: string) => string {
  const forms = new Set<string>();
  for (const s of secrets) {
    if (s.length < MIN_SCRUBBED_LENGTH || PUBLIC_DEFAULTS.has(s)) continue;
    forms.add(s);
    forms.add(JSON.stringify(s).slice(1, -1));
    forms.add(encodeURIComponent(s));
  }
  // Longest first, so that a secret containing another is replaced whole.
  const ordered = [...forms].sort((a, b) => b.length - a.length);
  return (line) => {
    let out = line.replace(URL_PASSWORD_RE, `$1:${REDACTED}@`).replace(QUERY_SECRET_RE, `$1${REDACTED}`).replace(AUTH_VALUE_RE, `$1 ${REDACTED}`);
    for (const f of ordered) if (out.includes(f)) out = out.split(f).join(REDACTED);
    return out;
  };
}

/** A request as logged: never headers, never the query string (Kannel's callback secret travels there). */
function requestSerializer(req: { method?: string; url?: string; routeOptions?: { url?: string } }) {
  return { method: req.method, route: req.routeOptions?.url, path: typeof req.url === "string" ? req.url.split("?", 1)[0] : undefined };
}

/** An error as logged; database errors lose the SQL text and parameters MikroORM attaches (they hold row values). */
function errorSerializer(err: unknown) {
  const out = stdSerializers.err(err as Error) as unknown as Record<string, unknown>;
  if (out && typeof out === "object") {
    delete out.query;
    delete out.params;
    delete out.queryOptions;
    // PostgreSQL's detail of a CHECK or NOT NULL violation lists the row's values (a message's text among them).
    if (typeof out.detail === "string" && out.detail.startsWith("Failing row contains")) delete out.detail;
  }
  return out;
}

/** Options of createLogger. */
export interface LoggerOptions {
  /** `name` on every line: "switchboard" (API) or "switchboard-worker". */
  name?: string;
  /** Where lines go (default stdout, written synchronously so nothing is lost on exit). */
  destination?: DestinationStream;
}

/**
 * The one pino logger of a process (API or worker): JSON lines with ISO time and a level label,
 * secrets redacted by field name (`redact`) and then scrubbed from the text of every line.
 */
export function createLogger(config: Parameters<typeof configSecrets>[0] & Pick<Config, "logLevel">, opts: LoggerOptions = {}): Logger {
  const scrub = createScrubber(configSecrets(config));
  const target = opts.destination ?? pinoDestination({ fd: 1, sync: true });
  const stream: DestinationStream = { write: (line: string) => target.write(scrub(line)) };
  return pino(
    {
      name: opts.name ?? "switchboard",
      level: config.logLevel,
      timestamp: stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: {
        paths: redactPaths(),
        censor: (value: unknown, path: string[]) =>
          URL_KEYS.includes(path[path.length - 1]!) && typeof value === "string" ? withoutUrlPassword(value) : REDACTED,
      },
      serializers: { req: requestSerializer, res: (reply: { statusCode?: number }) => ({ statusCode: reply.statusCode }), err: errorSerializer },
    },
    stream,
  );
}

type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace";
type LogArgs = Parameters<Logger["info"]>;
type ChildOf = ReturnType<Logger["child"]>;

/**
 * A request's logger whose pino child is built on the first line it writes. Building a child runs
 * the redaction over its bindings (the request id) on every request, even when nothing at the
 * configured level is ever logged for it; under load at LOG_LEVEL=warn that was ~3 % of a send.
 */
class LazyChildLogger {
  #parent: Logger;
  #bindings: Record<string, unknown>;
  #opts: Parameters<Logger["child"]>[1];
  #child: ChildOf | undefined;

  constructor(parent: Logger, bindings: Record<string, unknown>, opts: Parameters<Logger["child"]>[1]) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#opts = opts;
  }

  #real(): ChildOf {
    this.#child ??= this.#parent.child(this.#bindings, this.#opts);
    return this.#child;
  }

  get level(): string {
    return (this.#child ?? this.#parent).level;
  }

  set level(level: string) {
    this.#real().level = level;
  }

  isLevelEnabled(level: string): boolean {
    return (this.#child ?? this.#parent).isLevelEnabled(level);
  }

  bindings(): Record<string, unknown> {
    return this.#real().bindings();
  }

  child(bindings: Record<string, unknown>, opts?: Parameters<Logger["child"]>[1]): ChildOf {
    return this.#real().child(bindings, opts);
  }

  #write(level: LogLevel, args: LogArgs): void {
    if (this.isLevelEnabled(level)) (this.#real()[level] as (...a: LogArgs) => void)(...args);
  }

  fatal(...args: LogArgs): void {
    this.#write("fatal", args);
  }
  error(...args: LogArgs): void {
    this.#write("error", args);
  }
  warn(...args: LogArgs): void {
    this.#write("warn", args);
  }
  info(...args: LogArgs): void {
    this.#write("info", args);
  }
  debug(...args: LogArgs): void {
    this.#write("debug", args);
  }
  trace(...args: LogArgs): void {
    this.#write("trace", args);
  }
  silent(): void {}
}

/** Fastify's `childLoggerFactory` with per-request children built on first use (LazyChildLogger). */
export function lazyChildLoggerFactory(logger: Logger, bindings: Record<string, unknown>, opts: Parameters<Logger["child"]>[1]): Logger {
  // Without a logger (tests) Fastify passes its no-op one, which has no levels to ask.
  if (typeof logger.isLevelEnabled !== "function") return logger.child(bindings, opts) as unknown as Logger;
  return new LazyChildLogger(logger, bindings, opts) as unknown as Logger;
}
