/**
 * Secrets never reach the log (issue 7, item 6), checked on the real service at LOG_LEVEL=trace:
 * an operator creates an account (token shown once) and rotates its token, the account sends
 * with HTTP Basic over REST and Connect (and once with the old token), signed webhooks go out
 * keyed with the account's WebhookSecret, a reply is forwarded by e-mail through an SMTP server
 * that wants a password, /metrics is scraped with its token — with passwords in DATABASE_URL
 * (PostgreSQL), SMTP_URL and KANNEL_PASSWORD in the environment. Everything the process writes is
 * captured: every stdout line must be JSON, request-scoped lines must carry their request id,
 * and none of those secrets (nor an Authorization value) may appear anywhere.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic } from "../support/harness.js";
import { freePort } from "../support/kannel.js";
import { killService, serviceDatabase, startService, stopService, waitForOutput, type Service, type ServiceDatabase } from "../support/service.js";

const secret = (label: string) => `${label}-${randomBytes(24).toString("base64url")}`;
const ADMIN = secret("admin");
const DB_PASSWORD = secret("dbpw");
const SMTP_USER = "mailer";
const SMTP_PASSWORD = secret("smtppw");
const KANNEL_PASSWORD = secret("kannelpw");
const KANNEL_SECRET = secret("kannelsecret");
const METRICS = secret("metrics");

interface Hook {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let db: ServiceDatabase;
let svc: Service | undefined;
let smtp: SMTPServer;
let smtpAuthenticated = 0;
const mails: string[] = [];
let hookServer: Server;
let hookBase = "";
const hooks: Hook[] = [];

beforeAll(async () => {
  db = await serviceDatabase({ password: DB_PASSWORD });
  smtp = new SMTPServer({
    authOptional: false,
    allowInsecureAuth: true,
    disabledCommands: ["STARTTLS"],
    disableReverseLookup: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === SMTP_USER && auth.password === SMTP_PASSWORD) {
        smtpAuthenticated++;
        callback(null, { user: SMTP_USER });
      } else callback(new Error("Invalid username or password"));
    },
    onData(stream, _session, callback) {
      let raw = "";
      stream.on("data", (c: Buffer) => (raw += c.toString("utf8")));
      stream.on("end", () => {
        mails.push(raw);
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    smtp.once("error", reject);
    smtp.listen(0, "127.0.0.1", () => resolve());
  });
  hookServer = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => {
      hooks.push({ path: req.url ?? "", headers: req.headers, body });
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((resolve) => hookServer.listen(0, "127.0.0.1", resolve));
  hookBase = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}`;
}, 180_000);

afterAll(async () => {
  await killService(svc);
  await new Promise<void>((resolve) => (smtp ? smtp.close(() => resolve()) : resolve()));
  await new Promise<void>((resolve) => (hookServer ? hookServer.close(() => resolve()) : resolve()));
  await db?.drop();
});

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("secrets in the log", () => {
  it("a full scenario at LOG_LEVEL=trace writes JSON lines only, with request ids, and no secret", { timeout: 300_000 }, async () => {
    const port = await freePort();
    const smtpPort = (smtp.server.address() as AddressInfo).port;
    svc = await startService({
      port,
      waitReady: false,
      env: {
        DATABASE_URL: db.url,
        SWITCHBOARD_ADMIN_TOKEN: ADMIN,
        LOG_LEVEL: "trace",
        SMTP_URL: `smtp://${SMTP_USER}:${SMTP_PASSWORD}@127.0.0.1:${smtpPort}`,
        KANNEL_USERNAME: "switchboard",
        KANNEL_PASSWORD,
        KANNEL_CALLBACK_SECRET: KANNEL_SECRET,
        METRICS_TOKEN: METRICS,
        WEBHOOK_ALLOW_PRIVATE: "true",
        SIMULATOR_REPORT_DELAY_MS: "50",
      },
    });
    await waitForOutput(svc, /"msg":"Switchboard listening"/);
    const base = `http://127.0.0.1:${port}`;

    const ids: string[] = [];
    let seq = 0;
    /** One call with its own X-Request-Id; returns status and JSON body. */
    const call = async (method: string, path: string, opts: { auth?: string; body?: object; type?: string } = {}) => {
      const id = `scenario-${++seq}`;
      ids.push(id);
      const res = await fetch(`${base}${path}`, {
        method,
        headers: {
          "x-request-id": id,
          ...(opts.auth ? { authorization: opts.auth } : {}),
          ...(opts.body ? { "content-type": opts.type ?? "application/json" } : {}),
        },
        body: opts.body ? JSON.stringify(opts.body) : undefined,
      });
      const text = await res.text();
      expect(res.headers.get("x-request-id")).toBe(id);
      return { id, status: res.status, body: text.startsWith("{") ? JSON.parse(text) : text };
    };
    const operator = `Bearer ${ADMIN}`;

    // The operator creates an account (token and webhook secret shown once), a property, a pool number.
    const acc = await call("POST", "/admin/v1/Accounts", { auth: operator, body: { Name: "Secretive" } });
    expect(acc.status).toBe(200);
    const { AccountSid: accountSid, Token: token1, WebhookSecret: webhookSecret } = acc.body;
    const prop = await call("POST", `/admin/v1/Accounts/${accountSid}/Properties`, { auth: operator, body: { Name: "Site" } });
    expect(prop.status).toBe(200);
    const propertySid = prop.body.PropertySid;
    expect((await call("POST", "/admin/v1/Numbers", { auth: operator, body: { Number: "+12025550177" } })).status).toBe(200);
    // ...and rotates the token.
    const rotated = await call("POST", `/admin/v1/Accounts/${accountSid}/Token`, { auth: operator });
    expect(rotated.status).toBe(200);
    const token2 = rotated.body.Token as string;
    expect(token2).not.toBe(token1);
    expect((await call("GET", "/admin/v1/Emails", { auth: "Bearer not-the-operator-token" })).status).toBe(401);

    // The old token is refused; the new one sends over REST (with a receipt webhook) and Connect (leased, replies forwarded).
    const oldAuth = basic(accountSid, token1);
    const newAuth = basic(accountSid, token2);
    const messages = `/v2/Properties/${propertySid}/Messages`;
    expect((await call("POST", messages, { auth: oldAuth, body: { From: "Acme", To: "+447911300001", Text: "old token" } })).status).toBe(401);
    const sent = await call("POST", messages, {
      auth: newAuth,
      body: { From: "Acme", To: "+447911300002", Text: "with a receipt", DeliveryReceiptWebhookUri: `${hookBase}/receipts` },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const leased = await call("POST", "/switchboard.v2.MessagingService/SendMessage", {
      auth: newAuth,
      body: { PropertySid: propertySid, To: "+14155550177", Text: "reply to this", ForwardToEmail: "ops@example.com", WebhookUri: `${hookBase}/replies` },
    });
    expect(leased.status, JSON.stringify(leased.body)).toBe(200);

    // The receipt webhook is signed with the account's WebhookSecret.
    const receipt = await until("the receipt webhook", () => hooks.find((h) => h.path === "/receipts"));
    const verified = new Webhook(webhookSecret).verify(receipt.body, receipt.headers as Record<string, string>) as { MessageSid: string };
    expect(verified.MessageSid).toBe(sent.body.MessageSid);

    // The handset replies: forwarded by e-mail (SMTP with a password) and by the signed Response webhook.
    const inbound = await call("POST", "/admin/v1/Simulator/Inbound", {
      auth: operator,
      body: { From: "+14155550177", To: leased.body.From, Text: "replying" },
    });
    expect(inbound.status).toBe(200);
    expect(inbound.body.InReplyTo).toBe(leased.body.MessageSid);
    await until("the forwarded e-mail", () => (mails.length > 0 ? true : undefined));
    expect(smtpAuthenticated).toBeGreaterThan(0);
    const response = await until("the Response webhook", () => hooks.find((h) => h.path === "/replies"));
    new Webhook(webhookSecret).verify(response.body, response.headers as Record<string, string>);

    // Operator reads, and a scrape with (and one without) the metrics token.
    // The SMTP server has the mail before the outbox records it as sent: wait for that too.
    const emails = await until("the e-mail recorded as Sent", async () => {
      const res = await call("GET", "/admin/v1/Emails", { auth: operator });
      return res.status === 200 && res.body.Emails[0]?.Status === "Sent" ? res : undefined;
    });
    expect(emails.body.Emails[0]).toMatchObject({ Status: "Sent" });
    expect((await call("GET", `/admin/v1/Messages/${sent.body.MessageSid}/Webhooks`, { auth: operator })).status).toBe(200);
    expect((await call("GET", "/metrics", { auth: `Bearer ${METRICS}` })).status).toBe(200);
    expect((await call("GET", "/metrics")).status).toBe(401);

    const end = await stopService(svc);
    expect(end.code, svc.stderr()).toBe(0);

    const stdout = svc.stdout();
    const stderr = svc.stderr();
    // Every line is JSON, with a level, a time and a message.
    const lines = stdout.split("\n").filter((l) => l !== "");
    const parsed = lines.map((l, i) => {
      let obj: Record<string, unknown>;
      try {
        obj = JSON.parse(l) as Record<string, unknown>;
      } catch {
        throw new Error(`stdout line ${i + 1} is not JSON: ${l}`);
      }
      expect(obj, l).toMatchObject({ level: expect.any(String), time: expect.any(String), msg: expect.any(String) });
      return obj;
    });
    expect(stderr, "nothing on stderr").toBe("");

    // Request-scoped lines carry the request id; each request has one received and one completed line.
    for (const l of parsed) {
      if (["request received", "request completed", "REST request failed", "RPC failed"].includes(String(l.msg)) || "route" in l) {
        expect(l.requestId, JSON.stringify(l)).toEqual(expect.any(String));
      }
    }
    for (const id of ids) {
      const mine = parsed.filter((l) => l.requestId === id);
      expect(
        mine.filter((l) => l.msg === "request completed"),
        id,
      ).toHaveLength(1);
      expect(
        mine.filter((l) => l.msg === "request received"),
        id,
      ).toHaveLength(1);
    }
    const completedSend = parsed.find((l) => l.requestId === sent.id && l.msg === "request completed");
    expect(completedSend).toMatchObject({ route: "/v2/Properties/:property_sid/Messages", status: 200, accountSid, protocol: "rest" });

    // Trace level really was on, and the delivery engine's lines name the message they concern.
    expect(parsed.some((l) => l.level === "debug")).toBe(true);
    expect(parsed.find((l) => l.msg === "message submitted to the carrier" && l.messageSid === sent.body.MessageSid)).toBeDefined();
    expect(parsed.find((l) => l.msg === "webhook attempt" && l.messageSid === sent.body.MessageSid)).toBeDefined();
    expect(parsed.find((l) => l.msg === "e-mail sent" && typeof l.messageSid === "string")).toBeDefined();

    // No secret, in any form it could take.
    const everything = stdout + stderr;
    const secrets: Record<string, string> = {
      "operator token": ADMIN,
      "metrics token": METRICS,
      "SMTP password": SMTP_PASSWORD,
      "Kannel password": KANNEL_PASSWORD,
      "Kannel callback secret": KANNEL_SECRET,
      "first account token": token1,
      "rotated account token": token2,
      "webhook secret": webhookSecret,
      "webhook secret key": webhookSecret.replace(/^whsec_/, ""),
      "old Basic credentials": oldAuth.slice("Basic ".length),
      "new Basic credentials": newAuth.slice("Basic ".length),
    };
    if (db.kind === "postgres") secrets["database password"] = DB_PASSWORD;
    for (const [what, value] of Object.entries(secrets)) {
      expect(everything.includes(value), `${what} in the log`).toBe(false);
      expect(everything.includes(encodeURIComponent(value)), `${what} (URL-encoded) in the log`).toBe(false);
    }
    expect(everything).not.toMatch(/authorization"\s*:\s*"(?!\[Redacted\])/i);
    expect(everything).not.toMatch(/\b(Basic|Bearer) (?!\[Redacted\])[A-Za-z0-9+/=_-]{8,}/);
    console.log("log-secrets:", JSON.stringify({ lines: lines.length, requests: ids.length, db: db.kind, levels: [...new Set(parsed.map((l) => l.level))] }));
  });
});
