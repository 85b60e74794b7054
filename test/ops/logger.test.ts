/**
 * The logger factory's redaction, line by line: secrets go whether they sit in a known field
 * (headers, config, tokens), inside a URL, in a database error's SQL, or in free text.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { createLogger, lazyChildLoggerFactory, withoutUrlPassword } from "../../src/common/logger.js";

function capture(env: Record<string, string>) {
  const lines: string[] = [];
  const config = { ...loadConfig(env), adminToken: env.SWITCHBOARD_ADMIN_TOKEN };
  const log = createLogger(config, { destination: { write: (s: string) => void lines.push(s) } });
  return { log, lines, config, text: () => lines.join("") };
}

const env = {
  SWITCHBOARD_ADMIN_TOKEN: "op-token-ABCDEFGHIJKLMNOP-0123456789",
  DATABASE_URL: "postgres://sb:db-pass-QRSTUV%2Fw@db.internal:5432/switchboard",
  SMTP_URL: "smtp://mailer:smtp-pass-XYZ123@mail.internal:587",
  KANNEL_PASSWORD: "kannel-pass-777777",
  CARRIER: "kannel",
  KANNEL_CALLBACK_SECRET: "kannel-callback-888888-0123456789abcdef",
  METRICS_TOKEN: "metrics-token-999999",
  LOG_LEVEL: "trace",
};
const SECRETS = [
  "op-token-ABCDEFGHIJKLMNOP-0123456789",
  "db-pass-QRSTUV%2Fw",
  "db-pass-QRSTUV/w",
  "smtp-pass-XYZ123",
  "kannel-pass-777777",
  "kannel-callback-888888-0123456789abcdef",
  "metrics-token-999999",
];

describe("createLogger", () => {
  it("writes JSON lines with a level label, ISO time and the service name", () => {
    const { log, lines } = capture(env);
    log.info({ a: 1 }, "hello");
    const line = JSON.parse(lines[0]!);
    expect(line).toMatchObject({ level: "info", name: "switchboard", a: 1, msg: "hello" });
    expect(line.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("redacts secret fields at any depth, and keeps URLs without their password", () => {
    const { log, lines, config } = capture(env);
    log.info({ config }, "config");
    log.info({ call: { headers: { authorization: "Basic QUM6dG9rZW4=", cookie: "s=1" } } }, "headers");
    log.info({ account: { token: "t0k3n-value-xyz", webhookSecret: "whsec_abcdefgh", Token: "T0K3N-VALUE", WebhookSecret: "whsec_ABCDEFGH" } }, "account");
    const out = lines.map((l) => JSON.parse(l));
    expect(out[0].config.adminToken).toBe("[Redacted]");
    expect(out[0].config.metricsToken).toBe("[Redacted]");
    expect(out[0].config.kannel.password).toBe("[Redacted]");
    expect(out[0].config.kannel.callbackSecret).toBe("[Redacted]");
    expect(out[0].config.databaseUrl).toBe("postgres://sb:[Redacted]@db.internal:5432/switchboard");
    expect(out[0].config.smtpUrl).toBe("smtp://mailer:[Redacted]@mail.internal:587");
    expect(out[1].call.headers).toEqual({ authorization: "[Redacted]", cookie: "[Redacted]" });
    expect(out[2].account).toEqual({ token: "[Redacted]", webhookSecret: "[Redacted]", Token: "[Redacted]", WebhookSecret: "[Redacted]" });
  });

  it("logs a request as method, route template and path: never its headers or query string", () => {
    const { log, lines } = capture(env);
    const req = {
      method: "GET",
      url: "/carriers/kannel/dlr?secret=abcdefgh&sid=MG1",
      routeOptions: { url: "/carriers/kannel/dlr" },
      headers: { authorization: "Basic QUM6dG9rZW4=" },
    };
    log.info({ req }, "request");
    expect(JSON.parse(lines[0]!).req).toEqual({ method: "GET", route: "/carriers/kannel/dlr", path: "/carriers/kannel/dlr" });
  });

  it("scrubs known secrets, URL passwords, secret query parameters and Authorization values out of free text", () => {
    const { log, text } = capture(env);
    log.error(`connect to postgres://sb:db-pass-QRSTUV%2Fw@db.internal failed`);
    log.warn({ detail: "smtp said no to smtp-pass-XYZ123" }, "e-mail not sent");
    log.info({ note: `a JSON-escaped one: ${JSON.stringify("op-token-ABCDEFGHIJKLMNOP-0123456789")}` }, "x");
    log.info("GET /cgi-bin/sendsms?username=sb&password=hunter2hunter2&to=1 and /dlr?secret=s3cr3t-value&sid=MG1");
    log.info("sent Authorization: Basic QUMxMjM6c2VjcmV0LXRva2Vu and Bearer abcdefghijklmnop");
    log.info(`${"metrics-token-999999"} in a message`);
    const all = text();
    for (const s of SECRETS) expect(all, s).not.toContain(s);
    for (const s of ["hunter2hunter2", "s3cr3t-value", "QUMxMjM6c2VjcmV0LXRva2Vu", "abcdefghijklmnop"]) expect(all, s).not.toContain(s);
    expect(all).toContain("username=sb&password=[Redacted]&to=1");
    expect(all).toContain("Basic [Redacted]");
  });

  it("drops the SQL text and parameters MikroORM attaches to database errors", () => {
    const { log, lines } = capture(env);
    const err = Object.assign(new Error("duplicate key value violates unique constraint"), {
      code: "23505",
      query: "insert into accounts (sid, webhook_secret) values ('AC1', 'whsec_leaky')",
      params: ["AC1", "whsec_leaky"],
    });
    log.error({ err }, "REST request failed");
    const line = JSON.parse(lines[0]!);
    expect(line.err).toMatchObject({ type: "Error", message: "duplicate key value violates unique constraint", code: "23505" });
    expect(lines[0]).not.toContain("whsec_leaky");
  });

  it("drops PostgreSQL's detail when it lists a row's values (a message's text); keeps a key's detail", () => {
    const { log, lines } = capture(env);
    const check = Object.assign(new Error('new row for relation "messages" violates check constraint'), {
      code: "23514",
      detail: "Failing row contains (MG1, AC1, Your appointment is at 9:40, GSM7).",
    });
    const unique = Object.assign(new Error("duplicate key value violates unique constraint"), {
      code: "23505",
      detail: "Key (number)=(+447700900001) already exists.",
    });
    log.error({ err: check }, "call failed");
    log.error({ err: unique }, "call failed");
    expect(JSON.parse(lines[0]!).err).toMatchObject({ code: "23514", message: 'new row for relation "messages" violates check constraint' });
    expect(lines[0]).not.toContain("appointment");
    expect(JSON.parse(lines[1]!).err).toMatchObject({ code: "23505", detail: "Key (number)=(+447700900001) already exists." });
  });

  it("leaves documented public defaults and short values alone (they would mangle ordinary words)", () => {
    const { log, text } = capture({ LOG_LEVEL: "info", SWITCHBOARD_ADMIN_TOKEN: "op-token-ABCDEFGHIJKLMNOP-0123456789" });
    log.info("Switchboard uses switchboard and switchboard-kannel by default");
    expect(text()).toContain("Switchboard uses switchboard and switchboard-kannel by default");
  });

  it("withoutUrlPassword keeps everything but the password", () => {
    expect(withoutUrlPassword("postgresql://u:p%40ss@h:1/d?sslmode=require")).toBe("postgresql://u:[Redacted]@h:1/d?sslmode=require");
    expect(withoutUrlPassword("http://example.com/a:b@c")).toBe("http://example.com/a:b@c");
    expect(withoutUrlPassword(".switchboard/data")).toBe(".switchboard/data");
  });
});

describe("lazyChildLoggerFactory (Fastify's per-request loggers)", () => {
  it("builds the child only when a line at an enabled level is written, and that line has the bindings and redaction", () => {
    const { log, lines } = capture({ ...env, LOG_LEVEL: "warn" });
    let children = 0;
    const counting = new Proxy(log, {
      get: (target, prop, receiver) =>
        prop === "child" ? (...args: Parameters<typeof log.child>) => (children++, target.child(...args)) : Reflect.get(target, prop, receiver),
    });
    const quiet = lazyChildLoggerFactory(counting, { requestId: "req-1" }, {});
    quiet.info({ a: 1 }, "not at warn");
    quiet.debug("nor this");
    expect(quiet.level).toBe("warn");
    expect(quiet.isLevelEnabled("info")).toBe(false);
    expect({ children, lines: lines.length }).toEqual({ children: 0, lines: 0 });

    const loud = lazyChildLoggerFactory(counting, { requestId: "req-2" }, {});
    loud.warn({ headers: { authorization: "Bearer abcdefghijkl" } }, "slow");
    loud.error("twice");
    expect(children).toBe(1);
    expect(lines.map((l) => JSON.parse(l))).toMatchObject([
      { level: "warn", requestId: "req-2", msg: "slow", headers: { authorization: "[Redacted]" } },
      { level: "error", requestId: "req-2", msg: "twice" },
    ]);
  });
});
