/** Runtime configuration, read once from the environment (README: Configuration). */
export interface Config {
  port: number;
  host: string;
  /** postgres://… for a server; memory:// for in-memory PGlite; a folder path for PGlite on disk. */
  databaseUrl: string;
  /** True when DATABASE_URL was not set and the embedded default data folder is used. */
  embeddedDefault: boolean;
  adminToken: string | undefined;
  carrier: "simulator" | "kannel" | "smpp";
  smtpUrl: string | undefined;
  webhookAllowPrivate: boolean;
  logLevel: string;
  /** Countries (ISO alpha-2) whose operators do not take alphanumeric sender IDs. */
  noAlphaCountries: Set<string>;
  /** Largest accepted request body, bytes. */
  bodyLimit: number;
  /** Delay before the simulator's delivery reports, ms. */
  simulatorReportDelayMs: number;
  /** The Kannel carrier's settings (CARRIER=kannel). */
  kannel: KannelConfig;
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
}

const DEFAULT_DATA_DIR = ".switchboard/data";

/** Parses the environment into a Config, failing fast on values that cannot work. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = Number(env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be a port number, got "${env.PORT}"`);
  const carrier = (env.CARRIER ?? "simulator") as Config["carrier"];
  if (!["simulator", "kannel", "smpp"].includes(carrier)) throw new Error(`CARRIER must be simulator, kannel or smpp, got "${carrier}"`);
  const raw = env.DATABASE_URL?.trim();
  return {
    port,
    host: env.HOST ?? "0.0.0.0",
    databaseUrl: raw || DEFAULT_DATA_DIR,
    embeddedDefault: !raw,
    adminToken: env.SWITCHBOARD_ADMIN_TOKEN || undefined,
    carrier,
    smtpUrl: env.SMTP_URL || undefined,
    webhookAllowPrivate: /^(1|true|yes)$/i.test(env.WEBHOOK_ALLOW_PRIVATE ?? ""),
    logLevel: env.LOG_LEVEL ?? "info",
    noAlphaCountries: new Set(
      (env.NO_ALPHA_SENDER_COUNTRIES ?? "US,CA")
        .split(",")
        .map((c) => c.trim().toUpperCase())
        .filter(Boolean),
    ),
    bodyLimit: Number(env.BODY_LIMIT_BYTES ?? 1024 * 1024),
    simulatorReportDelayMs: Number(env.SIMULATOR_REPORT_DELAY_MS ?? 200),
    kannel: {
      sendsmsUrl: env.KANNEL_SENDSMS_URL ?? "http://127.0.0.1:13013/cgi-bin/sendsms",
      username: env.KANNEL_USERNAME ?? "switchboard",
      password: env.KANNEL_PASSWORD ?? "switchboard",
      callbackBaseUrl: env.KANNEL_CALLBACK_URL ?? `http://127.0.0.1:${port}`,
      callbackSecret: env.KANNEL_CALLBACK_SECRET ?? "switchboard-kannel",
    },
  };
}
