/**
 * Replies through leased senders (docs/api.md#replies-to-leased-senders, docs/api.md#leased-senders): a reply to a
 * leased pool number is stored as a Received message and forwarded as the outbound message asked —
 * by SMS through the simulator, by e-mail to a real SMTP server (or kept and listed when there is
 * none), and as a signed Response webhook to a real HTTP receiver — within the 30-day lease and
 * not after it. The delivery engine runs without loops; each test drives its workers by hand and
 * makes every operator call through REST.
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import nodemailer from "nodemailer";
import { SMTPServer } from "smtp-server";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { buildApp } from "../../src/app.js";
import { createSimulatorCarrier, type SimulatorCarrier } from "../../src/carriers/simulator.js";
import { ManualClock } from "../../src/common/clock.js";
import { createDeliveryEngine, type DeliveryEngine } from "../../src/delivery/engine.js";
import { NO_REPLY_EMAIL } from "../../src/delivery/inbound.js";
import { createTestOrm, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, addPoolNumbers, createTenant, type Tenant, simulatorInbound } from "../support/harness.js";
import { receivedRecord } from "../support/records.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const DAY = 86_400_000;
const SID = (prefix: string) => expect.stringMatching(new RegExp(`^${prefix}[A-Z0-9]{30}$`));
const RESPONSE_FIELDS = ["AccountSid", "From", "InReplyTo", "MessageSid", "OptOutType", "PropertySid", "Text", "Timestamp", "To", "Type"];

let seq = 0;
/** A fresh US handset (US recipients cannot take alphanumeric senders). */
const usNumber = () => `+1415555${String(2000 + ++seq).padStart(4, "0")}`;
/** A fresh UK handset. */
const ukNumber = () => `+447911${String(++seq).padStart(6, "0")}`;
const secondsOf = (d: Date) => Math.floor(d.getTime() / 1000);

// ---------------------------------------------------------------------------------------------
// A real SMTP server and a real webhook receiver, shared by every test (each test uses its own
// recipients / paths, so the collected traffic can be told apart).

interface ReceivedMail {
  envelopeFrom: string;
  envelopeTo: string[];
  headers: Record<string, string>;
  body: string;
}
const mails: ReceivedMail[] = [];
let smtp: SMTPServer;
let smtpPort = 0;

interface ReceivedHook {
  method: string;
  path: string;
  /** The raw query string without "?" ("" when none). */
  query: string;
  headers: IncomingHttpHeaders;
  body: string;
}
const hooks: ReceivedHook[] = [];
let hookServer: Server;
let hookBase = "";

function decodeQuotedPrintable(s: string): string {
  const soft = s.replace(/=\r?\n/g, "");
  const bytes: number[] = [];
  for (let i = 0; i < soft.length; i++) {
    if (soft[i] === "=" && /^[0-9A-Fa-f]{2}$/.test(soft.slice(i + 1, i + 3))) {
      bytes.push(parseInt(soft.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(soft[i], "utf8"));
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/** A minimal RFC 5322 parse of a single-part text message: unfolded headers and the decoded body. */
function parseMail(raw: string): { headers: Record<string, string>; body: string } {
  const split = raw.indexOf("\r\n\r\n");
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, " ");
  const headers: Record<string, string> = {};
  for (const line of head.split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = raw.slice(split + 4);
  const cte = (headers["content-transfer-encoding"] ?? "7bit").toLowerCase();
  if (cte === "quoted-printable") body = decodeQuotedPrintable(body);
  else if (cte === "base64") body = Buffer.from(body.replace(/\s+/g, ""), "base64").toString("utf8");
  return { headers, body: body.replace(/\r\n/g, "\n") };
}

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    disableReverseLookup: true,
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const { headers, body } = parseMail(Buffer.concat(chunks).toString("utf8"));
        const from = session.envelope.mailFrom;
        mails.push({
          envelopeFrom: from ? from.address : "",
          envelopeTo: session.envelope.rcptTo.map((r) => r.address),
          headers,
          body,
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    smtp.once("error", reject);
    smtp.listen(0, "127.0.0.1", () => resolve());
  });
  smtpPort = (smtp.server.address() as AddressInfo).port;

  hookServer = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = req.url ?? "/";
      const q = url.indexOf("?");
      hooks.push({
        method: req.method ?? "",
        path: q < 0 ? url : url.slice(0, q),
        query: q < 0 ? "" : url.slice(q + 1),
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
  });
  await new Promise<void>((resolve) => hookServer.listen(0, "127.0.0.1", resolve));
  hookBase = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}`;
});

afterAll(async () => {
  hookServer?.closeAllConnections();
  await new Promise<void>((resolve) => (hookServer ? hookServer.close(() => resolve()) : resolve()));
  await new Promise<void>((resolve) => (smtp ? smtp.close(() => resolve()) : resolve()));
});

/** A fresh path on the webhook receiver. */
function hookUri(ownQuery = ""): { uri: string; path: string } {
  const path = `/hooks/${randomUUID()}`;
  return { uri: `${hookBase}${path}${ownQuery ? `?${ownQuery}` : ""}`, path };
}
const hooksAt = (path: string) => hooks.filter((h) => h.path === path);
const mailsTo = (address: string) => mails.filter((m) => m.envelopeTo.includes(address));
const freshEmail = (who: string) => `${who}-${randomUUID().slice(0, 8)}@example.com`;

// ---------------------------------------------------------------------------------------------
// One app + delivery engine on its own database.

interface Rig {
  app: FastifyInstance;
  db: TestOrm;
  clock: ManualClock;
  carrier: SimulatorCarrier;
  engine: DeliveryEngine;
  tenant: Tenant;
  pool: string[];
  close(): Promise<void>;
}

const rigs: Rig[] = [];
afterAll(async () => {
  await Promise.all(rigs.splice(0).map((r) => r.close()));
});

async function createRig(opts: { pool?: number; smtp?: boolean; mailFromDomains?: string[] } = {}): Promise<Rig> {
  const db = await createTestOrm();
  const clock = new ManualClock(T0);
  const carrier = createSimulatorCarrier({ clock, reportDelayMs: 0 });
  const mailTransport = opts.smtp === false ? undefined : nodemailer.createTransport({ host: "127.0.0.1", port: smtpPort, secure: false, ignoreTLS: true });
  const engine = createDeliveryEngine({ orm: db.orm, clock, carrier, webhookAllowPrivate: true, mailTransport });
  const app = await buildApp({
    orm: db.orm,
    clock,
    carrier,
    onQueued: engine.nudge,
    // The tests' ForwardFromEmail addresses are at example.com (MAIL_FROM_DOMAINS).
    config: {
      adminToken: ADMIN_TOKEN,
      webhookAllowPrivate: true,
      noAlphaCountries: new Set(["US", "CA"]),
      bodyLimit: 1024 * 1024,
      mailFromDomains: opts.mailFromDomains ?? ["example.com"],
    },
  });
  await app.ready();
  await engine.start({ loops: false });
  const tenant = await createTenant(app);
  const pool = await addPoolNumbers(app, opts.pool ?? 3);
  const rig: Rig = {
    app,
    db,
    clock,
    carrier,
    engine,
    tenant,
    pool,
    async close() {
      await app.close();
      await engine.stop();
      mailTransport?.close();
      await db.close();
    },
  };
  rigs.push(rig);
  return rig;
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function sendRaw(r: Rig, body: object) {
  return r.app.inject({ method: "POST", url: `/v2/Properties/${r.tenant.propertySid}/Messages`, headers: { authorization: r.tenant.auth }, payload: body });
}

async function send(r: Rig, body: object): Promise<{ MessageSid: string; From: string; To: string; Text: string }> {
  const res = await sendRaw(r, body);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function record(r: Rig, sid: string): Promise<any> {
  const res = await r.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: r.tenant.auth } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function listByDirection(r: Rig, direction: "Transmit" | "Receive"): Promise<{ Messages: any[]; TotalCount: number }> {
  const res = await r.app.inject({
    method: "GET",
    url: `/v2/Properties/${r.tenant.propertySid}/Messages?Direction=${direction}`,
    headers: { authorization: r.tenant.auth },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function adminGet(r: Rig, url: string): Promise<any> {
  const res = await r.app.inject({ method: "GET", url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** The handset sends an SMS into the service (POST /admin/v1/Simulator/Inbound). */
async function reply(r: Rig, from: string, to: string, text: string): Promise<{ MessageSid: string; InReplyTo: string }> {
  return simulatorInbound(r.app, from, to, text);
}

/** What the simulated network delivered to a handset (GET /admin/v1/Simulator/Handsets/{n}/Messages). */
async function handset(r: Rig, number: string): Promise<{ MessageSid: string; From: string; To: string; Text: string; Received: number }[]> {
  return (await adminGet(r, `/admin/v1/Simulator/Handsets/${number.replace(/^\+/, "")}/Messages`)).Messages;
}

async function emails(r: Rig): Promise<any[]> {
  return (await adminGet(r, "/admin/v1/Emails")).Emails;
}

/**
 * Runs the workers until the queue is quiet: the dispatcher submits every due message and the
 * simulator's delivery reports land, then due webhooks are called and due e-mails sent.
 * Returns how many webhook calls and e-mails were handled.
 */
async function drain(r: Rig): Promise<{ webhooks: number; mails: number }> {
  while ((await r.engine.dispatcher.tick()) > 0) {
    /* submit every due message */
  }
  const em = r.db.orm.em.fork();
  await waitFor("delivery reports", async () => {
    const rows = await em.execute<{ n: number | string }[]>(
      "select count(*) as n from messages where direction = 'Transmit' and status in ('Processing', 'Submitted') and send_at <= ?",
      [r.clock.now()],
    );
    return Number(rows[0].n) === 0;
  });
  const webhooks = await r.engine.webhooks.tick();
  const mailCount = await r.engine.mail.tick();
  return { webhooks, mails: mailCount };
}

/** Sends from a leased sender and delivers it to the recipient's handset; returns the message. */
async function sendLeased(r: Rig, body: Record<string, unknown>) {
  const m = await send(r, { From: "", ...body });
  expect(r.pool).toContain(m.From);
  await drain(r);
  expect((await record(r, m.MessageSid)).Status).toBe("Delivered");
  expect((await handset(r, m.To)).map((h) => h.MessageSid)).toContain(m.MessageSid);
  return m;
}

/** Verifies the Standard Webhooks signature as a receiver would, with "now" at the service's clock. */
function verifySigned(r: Rig, hook: ReceivedHook, content: string): unknown {
  const spy = vi.spyOn(Date, "now").mockReturnValue(r.clock.now().getTime());
  try {
    return new Webhook(r.tenant.webhookSecret).verify(content, {
      "webhook-id": String(hook.headers["webhook-id"]),
      "webhook-timestamp": String(hook.headers["webhook-timestamp"]),
      "webhook-signature": String(hook.headers["webhook-signature"]),
    });
  } finally {
    spy.mockRestore();
  }
}

/**
 * The Response webhook's fields from a POST body or a GET query, after checking its signature.
 * `ownQuery`: the WebhookUri's own query parameters, which a GET keeps in front of the fields.
 */
function responseFields(r: Rig, hook: ReceivedHook, ownQuery = ""): Record<string, unknown> {
  expect(hook.headers["webhook-id"]).toMatch(/^msg_/);
  expect(hook.headers["webhook-timestamp"]).toBe(String(secondsOf(r.clock.now())));
  expect(hook.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
  if (hook.method === "GET") {
    expect(hook.body).toBe("");
    // Webhook.verify() JSON-parses the content once the signature checks out, so a query string
    // cannot go through it: recompute the signature over the received query with the same library.
    const id = String(hook.headers["webhook-id"]);
    const at = new Date(Number(hook.headers["webhook-timestamp"]) * 1000);
    const signer = new Webhook(r.tenant.webhookSecret);
    const signatures = String(hook.headers["webhook-signature"]).split(" ");
    expect(signatures).toContain(signer.sign(id, at, hook.query));
    // A tampered query does not match: the signature covers it.
    expect(signatures).not.toContain(signer.sign(id, at, `${hook.query}&Extra=1`));
    const params = new URLSearchParams(hook.query);
    for (const [k, v] of new URLSearchParams(ownQuery)) {
      expect(params.getAll(k)).toEqual([v]);
      params.delete(k);
    }
    expect(hook.query.startsWith(ownQuery)).toBe(true);
    return Object.fromEntries(params);
  }
  expect(hook.method).toBe("POST");
  expect(hook.headers["content-type"]).toMatch(/^application\/json/);
  const fields = verifySigned(r, hook, hook.body) as Record<string, unknown>;
  expect(fields).toEqual(JSON.parse(hook.body));
  expect(() =>
    new Webhook(`whsec_${Buffer.from("not-the-secret-0123456789").toString("base64")}`).verify(hook.body, hook.headers as Record<string, string>),
  ).toThrow();
  return fields;
}

async function unmatched(r: Rig): Promise<{ sender: string; recipient: string; text: string; reason: string }[]> {
  return r.db.orm.em.fork().execute("select sender, recipient, text, reason from unmatched_inbound order by id");
}

async function receivedCount(r: Rig): Promise<number> {
  const rows = await r.db.orm.em.fork().execute<{ n: number | string }[]>("select count(*) as n from messages where direction = 'Receive'");
  return Number(rows[0].n);
}

// ---------------------------------------------------------------------------------------------

describe("a reply to a leased sender with every forward set", () => {
  // One app for the variants: each uses its own recipient, handsets, e-mail addresses and webhook path.
  let r: Rig;
  beforeAll(async () => {
    r = await createRig();
  });

  for (const variant of [
    {
      name: "POST webhook, forwarded SMS from the responding party, e-mail from ForwardFromEmail",
      method: undefined,
      forwardFromSms: "",
      forwardFromEmail: true,
    },
    {
      name: "GET webhook, forwarded SMS from an E164 ForwardFromSms (the account's own number), e-mail from the no-reply default",
      method: "GET",
      forwardFromSms: "owned",
      forwardFromEmail: false,
    },
    {
      name: "get (any case) webhook to a URI with its own query, forwarded SMS from an alphanumeric ForwardFromSms",
      method: "get",
      forwardFromSms: "Switchbrd",
      forwardFromEmail: true,
      hookQuery: "tag=lunch&who=a%20b",
    },
  ]) {
    it(variant.name, async () => {
      const forwardFromSms = variant.forwardFromSms === "owned" ? r.tenant.ownedNumber : variant.forwardFromSms;
      const recipient = usNumber();
      const forwardTo = ukNumber();
      const toEmail = freshEmail("ops");
      const fromEmail = variant.forwardFromEmail ? freshEmail("desk") : "";
      const hook = hookUri(variant.hookQuery);
      const out = await sendLeased(r, {
        To: recipient,
        Text: "Your table for 4 is booked at 7pm. Reply to change.",
        ForwardToSms: forwardTo,
        ...(forwardFromSms ? { ForwardFromSms: forwardFromSms } : {}),
        ForwardToEmail: toEmail,
        ...(fromEmail ? { ForwardFromEmail: fromEmail } : {}),
        WebhookUri: hook.uri,
        ...(variant.method ? { WebhookMethod: variant.method } : {}),
      });
      expect(hooksAt(hook.path)).toHaveLength(0);

      r.clock.advance(90_000);
      const text = variant.method ? "Make it 8pm, please — 5 of us & a dog?" : "Make it 8pm please";
      const inbound = await reply(r, recipient, out.From, text);
      expect(inbound).toStrictEqual({ MessageSid: SID("MG"), InReplyTo: out.MessageSid });
      const at = secondsOf(r.clock.now());

      // Stored in the tenant's property as a Received message.
      const rec = await record(r, inbound.MessageSid);
      expect(rec).toStrictEqual(
        receivedRecord({
          sid: inbound.MessageSid,
          accountSid: r.tenant.accountSid,
          propertySid: r.tenant.propertySid,
          from: recipient,
          to: out.From,
          text,
          encoding: variant.method ? "UCS2" : "GSM7",
          at,
        }),
      );
      const received = await listByDirection(r, "Receive");
      expect(received.Messages.filter((m) => m.From === recipient)).toStrictEqual([rec]);

      const handled = await drain(r);
      expect(handled).toEqual({ webhooks: 1, mails: 1 });

      // Forwarded SMS: on the ForwardToSms handset, from ForwardFromSms or else the responding party.
      const expectedFrom = forwardFromSms || recipient;
      const fwd = await handset(r, forwardTo);
      expect(fwd).toHaveLength(1);
      expect(fwd[0]).toMatchObject({ From: expectedFrom, To: forwardTo, Text: text });
      const fwdRec = await record(r, fwd[0].MessageSid);
      expect(fwdRec).toMatchObject({
        Direction: "Transmit",
        Status: "Delivered",
        From: expectedFrom,
        To: forwardTo,
        Text: text,
        PropertySid: r.tenant.propertySid,
      });
      // The forward went only there: the responding party's handset holds just the original message.
      expect((await handset(r, recipient)).map((h) => h.MessageSid)).toEqual([out.MessageSid]);

      // Forwarded e-mail: at the SMTP server, from ForwardFromEmail or the no-reply default.
      const got = mailsTo(toEmail);
      expect(got).toHaveLength(1);
      const sender = fromEmail || NO_REPLY_EMAIL;
      expect(got[0].envelopeFrom).toBe(sender);
      expect(got[0].headers.from).toContain(sender);
      expect(got[0].headers.to).toContain(toEmail);
      expect(got[0].headers.subject).toContain(recipient);
      expect(got[0].body).toContain(text);
      const listed = (await emails(r)).filter((e) => e.To === toEmail);
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({ Status: "Sent", From: sender, MessageSid: inbound.MessageSid, AccountSid: r.tenant.accountSid });

      // The signed Response webhook with exactly the documented fields (docs/api.md#replies-to-leased-senders).
      const calls = hooksAt(hook.path);
      expect(calls).toHaveLength(1);
      expect(calls[0].method).toBe(variant.method ? "GET" : "POST");
      const fields = responseFields(r, calls[0], variant.hookQuery);
      expect(Object.keys(fields).sort()).toEqual(RESPONSE_FIELDS);
      const ts = variant.method ? String(at) : at;
      expect(fields).toStrictEqual({
        Type: "Response",
        MessageSid: inbound.MessageSid,
        InReplyTo: out.MessageSid,
        AccountSid: r.tenant.accountSid,
        PropertySid: r.tenant.propertySid,
        From: recipient,
        To: out.From,
        Text: text,
        Timestamp: ts,
        OptOutType: "",
      });
      const deliveries = (await adminGet(r, `/admin/v1/Messages/${inbound.MessageSid}/Webhooks`)).Deliveries;
      expect(deliveries).toHaveLength(1);
      expect(deliveries[0]).toMatchObject({ WebhookId: calls[0].headers["webhook-id"], EventType: "Response", Status: "Delivered", Attempts: 1 });

      // Nothing is sent twice.
      expect(await drain(r)).toEqual({ webhooks: 0, mails: 0 });
      expect(hooksAt(hook.path)).toHaveLength(1);
      expect(mailsTo(toEmail)).toHaveLength(1);
      expect(await handset(r, forwardTo)).toHaveLength(1);
    });
  }
});

describe("each forward works alone", () => {
  // One app for these: each uses its own recipient, so the original and its reply are its own.
  let r: Rig;
  beforeAll(async () => {
    r = await createRig();
  });
  /** The Transmit messages carrying `text`: the forwarded SMS of a reply has the reply's text. */
  const transmitted = async (text: string) => (await listByDirection(r, "Transmit")).Messages.filter((m) => m.Text === text);

  it("only ForwardToSms", async () => {
    const recipient = usNumber();
    const forwardTo = ukNumber();
    const out = await sendLeased(r, { To: recipient, Text: "Ping", ForwardToSms: forwardTo });
    const inbound = await reply(r, recipient, out.From, "Pong");
    expect(inbound.InReplyTo).toBe(out.MessageSid);
    expect(await drain(r)).toEqual({ webhooks: 0, mails: 0 });
    expect(await handset(r, forwardTo)).toMatchObject([{ From: recipient, To: forwardTo, Text: "Pong" }]);
    expect(await transmitted("Pong")).toMatchObject([{ From: recipient, To: forwardTo, Status: "Delivered" }]);
    expect((await emails(r)).filter((e) => e.MessageSid === inbound.MessageSid)).toEqual([]);
  });

  it("only ForwardToEmail", async () => {
    const recipient = usNumber();
    const toEmail = freshEmail("inbox");
    const out = await sendLeased(r, { To: recipient, Text: "Ping", ForwardToEmail: toEmail });
    const inbound = await reply(r, recipient, out.From, "Pong by mail");
    expect(inbound.InReplyTo).toBe(out.MessageSid);
    expect(await drain(r)).toEqual({ webhooks: 0, mails: 1 });
    const got = mailsTo(toEmail);
    expect(got).toHaveLength(1);
    expect(got[0].envelopeFrom).toBe(NO_REPLY_EMAIL);
    expect(got[0].body).toContain("Pong by mail");
    // No SMS was forwarded.
    expect(await transmitted("Pong by mail")).toEqual([]);
  });

  it("only WebhookUri", async () => {
    const recipient = usNumber();
    const hook = hookUri();
    const out = await sendLeased(r, { To: recipient, Text: "Ping", WebhookUri: hook.uri });
    const inbound = await reply(r, recipient, out.From, "Pong by hook");
    expect(await drain(r)).toEqual({ webhooks: 1, mails: 0 });
    const calls = hooksAt(hook.path);
    expect(calls).toHaveLength(1);
    expect(responseFields(r, calls[0])).toMatchObject({ Type: "Response", MessageSid: inbound.MessageSid, InReplyTo: out.MessageSid, Text: "Pong by hook" });
    expect(await transmitted("Pong by hook")).toEqual([]);
    expect((await emails(r)).filter((e) => e.MessageSid === inbound.MessageSid)).toEqual([]);
  });

  it("an alphanumeric From to a US recipient goes out leased, and its lease options apply", async () => {
    const recipient = usNumber();
    const hook = hookUri();
    const out = await send(r, { From: "Acme", To: recipient, Text: "Ping", WebhookUri: hook.uri });
    expect(r.pool).toContain(out.From);
    await drain(r);
    const inbound = await reply(r, recipient, out.From, "Pong via Acme");
    expect(inbound.InReplyTo).toBe(out.MessageSid);
    await drain(r);
    expect(responseFields(r, hooksAt(hook.path)[0])).toMatchObject({ MessageSid: inbound.MessageSid, InReplyTo: out.MessageSid });
  });
});

describe("without an SMTP transport", () => {
  it("keeps the e-mail and lists it at GET /admin/v1/Emails with Status Kept", async () => {
    const r = await createRig({ smtp: false });
    const recipient = usNumber();
    const toEmail = freshEmail("kept");
    const fromEmail = freshEmail("sender");
    const toEmail2 = freshEmail("kept2");
    const a = await sendLeased(r, { To: recipient, Text: "First", ForwardToEmail: toEmail, ForwardFromEmail: fromEmail });
    const b = await sendLeased(r, { To: recipient, Text: "Second", ForwardToEmail: toEmail2 });
    expect(b.From).not.toBe(a.From);
    const inA = await reply(r, recipient, a.From, "Reply to the first");
    r.clock.advance(1000);
    const inB = await reply(r, recipient, b.From, "Reply to the second");
    expect(await drain(r)).toEqual({ webhooks: 0, mails: 2 });
    expect(mailsTo(toEmail)).toHaveLength(0);
    const res = await r.app.inject({ method: "GET", url: "/admin/v1/Emails", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.TotalCount).toBe(2);
    // Newest first.
    expect(body.Emails).toMatchObject([
      { MessageSid: inB.MessageSid, AccountSid: r.tenant.accountSid, From: NO_REPLY_EMAIL, To: toEmail2, Status: "Kept", Sent: 0 },
      { MessageSid: inA.MessageSid, AccountSid: r.tenant.accountSid, From: fromEmail, To: toEmail, Status: "Kept", Sent: 0 },
    ]);
    expect(body.Emails[1].Body).toContain("Reply to the first");
    expect(body.Emails[1].Body).toContain(a.MessageSid);
    expect(body.Emails[0].Body).toContain("Reply to the second");
    expect(body.Emails[1].Subject).toContain(recipient);
    // Kept is final: a later round does not touch them.
    r.clock.advance(3600_000);
    expect(await drain(r)).toEqual({ webhooks: 0, mails: 0 });
    expect((await emails(r)).map((e) => e.Status)).toEqual(["Kept", "Kept"]);
  });
});

describe("the 30-day lease", () => {
  it("forwards a reply on day 29, keeps one on day 31 apart, and the number can be leased again", async () => {
    const r = await createRig({ pool: 1 });
    const recipient = usNumber();
    const forwardTo = ukNumber();
    const hook = hookUri();
    const out = await sendLeased(r, { To: recipient, Text: "Day 0", ForwardToSms: forwardTo, WebhookUri: hook.uri });
    expect(out.From).toBe(r.pool[0]);

    r.clock.set(T0.getTime() + 29 * DAY);
    const day29 = await reply(r, recipient, out.From, "Day 29 reply");
    expect(day29).toStrictEqual({ MessageSid: SID("MG"), InReplyTo: out.MessageSid });
    expect(await drain(r)).toEqual({ webhooks: 1, mails: 0 });
    expect(await handset(r, forwardTo)).toMatchObject([{ Text: "Day 29 reply", From: recipient }]);
    expect(responseFields(r, hooksAt(hook.path)[0])).toMatchObject({
      MessageSid: day29.MessageSid,
      InReplyTo: out.MessageSid,
      Timestamp: secondsOf(r.clock.now()),
    });
    // The single pool number is still leased to this recipient: no second lease yet.
    const busy = await sendRaw(r, { To: recipient, Text: "Too soon" });
    expect(busy.statusCode).toBe(400);
    expect(busy.json().ResponseStatus.ErrorCode).toBe("NoLeasedNumberAvailable");

    r.clock.set(T0.getTime() + 31 * DAY);
    const day31 = await reply(r, recipient, out.From, "Day 31 reply");
    expect(day31).toStrictEqual({ MessageSid: "", InReplyTo: "" });
    expect(await drain(r)).toEqual({ webhooks: 0, mails: 0 });
    expect(await handset(r, forwardTo)).toHaveLength(1);
    expect(hooksAt(hook.path)).toHaveLength(1);
    expect((await listByDirection(r, "Receive")).Messages.map((m) => m.MessageSid)).toEqual([day29.MessageSid]);
    expect(await receivedCount(r)).toBe(1);
    expect(await unmatched(r)).toEqual([{ sender: recipient, recipient: out.From, text: "Day 31 reply", reason: "LeaseEnded" }]);

    // After expiry the same pool number can be leased to the recipient again, and replies go to the new message.
    const hook2 = hookUri();
    const again = await sendLeased(r, { To: recipient, Text: "Day 31", WebhookUri: hook2.uri });
    expect(again.From).toBe(out.From);
    const next = await reply(r, recipient, again.From, "Answer to the new one");
    expect(next.InReplyTo).toBe(again.MessageSid);
    expect(await drain(r)).toEqual({ webhooks: 1, mails: 0 });
    expect(hooksAt(hook.path)).toHaveLength(1);
    expect(responseFields(r, hooksAt(hook2.path)[0])).toMatchObject({ MessageSid: next.MessageSid, InReplyTo: again.MessageSid });
    expect(await handset(r, forwardTo)).toHaveLength(1);
  });

  it("a reply at day 30 - 1 s still routes; at day 30 exactly the lease has ended", async () => {
    const r = await createRig({ pool: 1 });
    const recipient = usNumber();
    const hook = hookUri();
    const out = await sendLeased(r, { To: recipient, Text: "x", WebhookUri: hook.uri });
    r.clock.set(T0.getTime() + 30 * DAY - 1000);
    expect((await reply(r, recipient, out.From, "just in time")).InReplyTo).toBe(out.MessageSid);
    r.clock.set(T0.getTime() + 30 * DAY);
    expect(await reply(r, recipient, out.From, "too late")).toStrictEqual({ MessageSid: "", InReplyTo: "" });
    await drain(r);
    expect(hooksAt(hook.path).map((h) => JSON.parse(h.body).Text)).toEqual(["just in time"]);
  });

  it("with 5 live leases the limit frees a slot once one expires (day 30 + 1 s), not before (day 30 - 1 s)", async () => {
    const r = await createRig({ pool: 6 });
    const recipient = usNumber();
    const first = await send(r, { To: recipient, Text: "lease 1" });
    r.clock.advance(3600_000);
    const others = [];
    for (let i = 2; i <= 5; i++) others.push(await send(r, { To: recipient, Text: `lease ${i}` }));
    const leased = [first, ...others].map((m) => m.From);
    expect(new Set(leased).size).toBe(5);
    expect(leased).toEqual(r.pool.slice(0, 5));
    const full = await sendRaw(r, { To: recipient, Text: "sixth" });
    expect(full.statusCode).toBe(400);
    expect(full.json().ResponseStatus.ErrorCode).toBe("LeaseLimitReached");

    r.clock.set(T0.getTime() + 30 * DAY - 1000);
    const before = await sendRaw(r, { To: recipient, Text: "sixth, day 30 - 1 s" });
    expect(before.statusCode, before.body).toBe(400);
    expect(before.json().ResponseStatus.ErrorCode).toBe("LeaseLimitReached");

    r.clock.set(T0.getTime() + 30 * DAY + 1000);
    const after = await send(r, { To: recipient, Text: "sixth, day 30 + 1 s" });
    // The expired lease's number is free again (and the lowest free one).
    expect(after.From).toBe(first.From);
    // Only that one slot was freed: the other four leases (taken an hour later) still live.
    const again = await sendRaw(r, { To: recipient, Text: "seventh" });
    expect(again.statusCode).toBe(400);
    expect(again.json().ResponseStatus.ErrorCode).toBe("LeaseLimitReached");

    // Replies to the re-leased number go to the new message; to the others, to their own.
    await drain(r);
    expect((await reply(r, recipient, first.From, "to new")).InReplyTo).toBe(after.MessageSid);
    expect((await reply(r, recipient, others[0].From, "to old")).InReplyTo).toBe(others[0].MessageSid);
  });
});

describe("two live leases to one recipient", () => {
  it("route each reply to its own outbound message and its own WebhookUri", async () => {
    const r = await createRig();
    const recipient = usNumber();
    const hookA = hookUri();
    const hookB = hookUri();
    const a = await sendLeased(r, { To: recipient, Text: "Offer A", WebhookUri: hookA.uri });
    const b = await sendLeased(r, { To: recipient, Text: "Offer B", WebhookUri: hookB.uri, WebhookMethod: "GET" });
    expect(a.From).not.toBe(b.From);

    const toB = await reply(r, recipient, b.From, "B please");
    const toA = await reply(r, recipient, a.From, "A please");
    expect(toA.InReplyTo).toBe(a.MessageSid);
    expect(toB.InReplyTo).toBe(b.MessageSid);
    expect(await drain(r)).toEqual({ webhooks: 2, mails: 0 });

    const callsA = hooksAt(hookA.path);
    const callsB = hooksAt(hookB.path);
    expect(callsA).toHaveLength(1);
    expect(callsB).toHaveLength(1);
    expect(callsA[0].method).toBe("POST");
    expect(callsB[0].method).toBe("GET");
    expect(responseFields(r, callsA[0])).toMatchObject({ MessageSid: toA.MessageSid, InReplyTo: a.MessageSid, To: a.From, Text: "A please" });
    expect(responseFields(r, callsB[0])).toMatchObject({ MessageSid: toB.MessageSid, InReplyTo: b.MessageSid, To: b.From, Text: "B please" });
    expect((await record(r, toA.MessageSid)).To).toBe(a.From);
    expect((await record(r, toB.MessageSid)).To).toBe(b.From);
    expect((await listByDirection(r, "Receive")).TotalCount).toBe(2);
  });

  it("route by the tenant that leased the number: another tenant's lease to another recipient does not catch it", async () => {
    const r = await createRig({ pool: 1 });
    const other = await createTenant(r.app);
    const alice = usNumber();
    const bob = usNumber();
    const hookMine = hookUri();
    const hookTheirs = hookUri();
    const mine = await sendLeased(r, { To: alice, Text: "mine", WebhookUri: hookMine.uri });
    const res = await r.app.inject({
      method: "POST",
      url: `/v2/Properties/${other.propertySid}/Messages`,
      headers: { authorization: other.auth },
      payload: { To: bob, Text: "theirs", WebhookUri: hookTheirs.uri },
    });
    expect(res.statusCode, res.body).toBe(200);
    const theirs = res.json();
    // One pool number, leased to two recipients at once.
    expect(theirs.From).toBe(mine.From);
    await drain(r);
    expect((await reply(r, bob, theirs.From, "bob here")).InReplyTo).toBe(theirs.MessageSid);
    expect((await reply(r, alice, mine.From, "alice here")).InReplyTo).toBe(mine.MessageSid);
    await drain(r);
    expect(responseFields(r, hooksAt(hookMine.path)[0])).toMatchObject({ AccountSid: r.tenant.accountSid, From: alice, Text: "alice here" });
    const theirCall = hooksAt(hookTheirs.path)[0];
    expect(JSON.parse(theirCall.body)).toMatchObject({ AccountSid: other.accountSid, PropertySid: other.propertySid, From: bob, Text: "bob here" });
    // Signed with the other account's secret.
    const spy = vi.spyOn(Date, "now").mockReturnValue(r.clock.now().getTime());
    try {
      expect(() => new Webhook(other.webhookSecret).verify(theirCall.body, theirCall.headers as Record<string, string>)).not.toThrow();
      expect(() => new Webhook(r.tenant.webhookSecret).verify(theirCall.body, theirCall.headers as Record<string, string>)).toThrow();
    } finally {
      spy.mockRestore();
    }
  });
});

describe("replies that answer no lease", () => {
  it("a reply from a number that never had a lease is not stored as a message", async () => {
    const r = await createRig();
    const recipient = usNumber();
    const stranger = usNumber();
    const hook = hookUri();
    const forwardTo = ukNumber();
    const toEmail = freshEmail("nobody");
    const out = await sendLeased(r, { To: recipient, Text: "hello", WebhookUri: hook.uri, ForwardToSms: forwardTo, ForwardToEmail: toEmail });

    expect(await reply(r, stranger, out.From, "who is this?")).toStrictEqual({ MessageSid: "", InReplyTo: "" });
    // A pool number never leased to anyone.
    expect(await reply(r, recipient, r.pool[2], "wrong number")).toStrictEqual({ MessageSid: "", InReplyTo: "" });
    expect(await drain(r)).toEqual({ webhooks: 0, mails: 0 });
    expect(hooksAt(hook.path)).toHaveLength(0);
    expect(await handset(r, forwardTo)).toHaveLength(0);
    expect(mailsTo(toEmail)).toHaveLength(0);
    expect((await listByDirection(r, "Receive")).TotalCount).toBe(0);
    expect(await receivedCount(r)).toBe(0);
    expect(await unmatched(r)).toEqual([
      { sender: stranger, recipient: out.From, text: "who is this?", reason: "NoLease" },
      { sender: recipient, recipient: r.pool[2], text: "wrong number", reason: "NoLease" },
    ]);
    // The lease itself still routes its recipient's reply.
    expect((await reply(r, recipient, out.From, "yes")).InReplyTo).toBe(out.MessageSid);
  });

  it("a reply to an E164 or alphanumeric sender (no lease) is not stored, and their lease options were not kept", async () => {
    const r = await createRig();
    const ukRecipient = ukNumber();
    const hook = hookUri();
    const forwardTo = ukNumber();
    const options = { WebhookUri: hook.uri, ForwardToSms: forwardTo, ForwardToEmail: freshEmail("unused") };
    const e164 = await send(r, { From: r.tenant.ownedNumber, To: ukRecipient, Text: "from our number", ...options });
    expect(e164.From).toBe(r.tenant.ownedNumber);
    const alpha = await send(r, { From: "Acme", To: ukRecipient, Text: "from our name", ...options });
    expect(alpha.From).toBe("Acme");
    await drain(r);
    expect((await handset(r, ukRecipient)).map((h) => h.From).sort()).toEqual(["Acme", r.tenant.ownedNumber].sort());

    expect(await reply(r, ukRecipient, r.tenant.ownedNumber, "replying to your number")).toStrictEqual({ MessageSid: "", InReplyTo: "" });
    // A handset cannot address an alphanumeric sender: the simulator refuses a non-E164 To.
    const toAlpha = await r.app.inject({
      method: "POST",
      url: "/admin/v1/Simulator/Inbound",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { From: ukRecipient, To: "Acme", Text: "replying to your name" },
    });
    expect(toAlpha.statusCode).toBe(400);
    expect(toAlpha.json().ResponseStatus.Errors).toMatchObject([{ FieldName: "To", ErrorCode: "InvalidParameter" }]);

    expect(await drain(r)).toEqual({ webhooks: 0, mails: 0 });
    expect(hooksAt(hook.path)).toHaveLength(0);
    expect(await handset(r, forwardTo)).toHaveLength(0);
    expect(await receivedCount(r)).toBe(0);
    expect((await listByDirection(r, "Receive")).TotalCount).toBe(0);
    expect(await unmatched(r)).toEqual([{ sender: ukRecipient, recipient: r.tenant.ownedNumber, text: "replying to your number", reason: "NoLease" }]);
  });

  it("a reply after the message was canceled (lease released) is kept apart", async () => {
    const r = await createRig();
    const recipient = usNumber();
    const hook = hookUri();
    const scheduled = await send(r, { To: recipient, Text: "later", Schedule: secondsOf(T0) + 3600, WebhookUri: hook.uri });
    const cancel = await r.app.inject({ method: "DELETE", url: `/v2/Messages/${scheduled.MessageSid}`, headers: { authorization: r.tenant.auth } });
    expect(cancel.statusCode, cancel.body).toBe(200);
    expect(await reply(r, recipient, scheduled.From, "but I want it")).toStrictEqual({ MessageSid: "", InReplyTo: "" });
    expect(await drain(r)).toEqual({ webhooks: 0, mails: 0 });
    expect(await unmatched(r)).toMatchObject([{ reason: "LeaseEnded" }]);
  });
});

describe("forwarding cannot spoof a sender (issue 12)", () => {
  let r: Rig;
  beforeAll(async () => {
    r = await createRig();
  });

  const leaseBody = (extra: object) => ({ From: "", To: usNumber(), Text: "Reply to this", ForwardToSms: ukNumber(), ...extra });

  it("an E164 ForwardFromSms must be one of the account's own numbers: another account's number is 400 SenderNotOwned naming the field", async () => {
    const other = await createTenant(r.app);
    const res = await sendRaw(r, leaseBody({ ForwardFromSms: other.ownedNumber }));
    expect(res.statusCode, res.body).toBe(400);
    const body = res.json();
    expect(body.ResponseStatus.ErrorCode).toBe("SenderNotOwned");
    expect(body.ResponseStatus.Errors).toEqual([
      { ErrorCode: "SenderNotOwned", FieldName: "ForwardFromSms", Message: expect.stringContaining(other.ownedNumber) },
    ]);
    // The same check in a batch, for that item alone; the account's own number is accepted.
    const batch = await r.app.inject({
      method: "POST",
      url: `/v2/Properties/${r.tenant.propertySid}/BatchMessages`,
      headers: { authorization: r.tenant.auth },
      payload: { Messages: [leaseBody({ ForwardFromSms: other.ownedNumber }), leaseBody({ ForwardFromSms: r.tenant.ownedNumber })] },
    });
    expect(batch.statusCode, batch.body).toBe(200);
    const [refused, accepted] = batch.json().Messages;
    expect(refused.ResponseStatus.ErrorCode).toBe("SenderNotOwned");
    expect(refused.ResponseStatus.Errors[0].FieldName).toBe("ForwardFromSms");
    expect(accepted.MessageSid).toEqual(SID("MG"));
  });

  it("an alphanumeric ForwardFromSms follows the rule of an alphanumeric From", async () => {
    for (const bad of ["12345", "TooLongSender1", "Bad-ID!"]) {
      const res = await sendRaw(r, leaseBody({ ForwardFromSms: bad }));
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().ResponseStatus.Errors).toEqual([expect.objectContaining({ ErrorCode: "InvalidSenderId", FieldName: "ForwardFromSms" })]);
    }
    expect((await sendRaw(r, leaseBody({ ForwardFromSms: "Switchbrd" }))).statusCode).toBe(200);
  });

  it("a ForwardFromEmail outside MAIL_FROM_DOMAINS is 400 InvalidEmail naming the allowed domains; inside, any case, it is accepted", async () => {
    const res = await sendRaw(r, leaseBody({ ForwardToEmail: freshEmail("ops"), ForwardFromEmail: "ceo@bank.example.org" }));
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().ResponseStatus.Errors).toEqual([
      { ErrorCode: "InvalidEmail", FieldName: "ForwardFromEmail", Message: expect.stringContaining("allowed domains: example.com") },
    ]);
    expect((await sendRaw(r, leaseBody({ ForwardToEmail: freshEmail("ops"), ForwardFromEmail: "Desk@Example.COM" }))).statusCode).toBe(200);
    // A subdomain is a domain of its own.
    expect((await sendRaw(r, leaseBody({ ForwardFromEmail: "desk@mail.example.com" }))).statusCode).toBe(400);
  });

  it("by default only the no-reply address's domain is allowed, and `*` allows any", async () => {
    const strict = await createRig();
    const defaults = await buildApp({
      orm: strict.db.orm,
      clock: strict.clock,
      config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: true, noAlphaCountries: new Set(["US", "CA"]), bodyLimit: 1024 * 1024 },
    });
    try {
      const send = (app: FastifyInstance, from: string) =>
        app.inject({
          method: "POST",
          url: `/v2/Properties/${strict.tenant.propertySid}/Messages`,
          headers: { authorization: strict.tenant.auth },
          payload: leaseBody({ ForwardFromEmail: from }),
        });
      const refused = await send(defaults, "desk@example.com");
      expect(refused.statusCode).toBe(400);
      expect(refused.json().ResponseStatus.Errors[0].Message).toContain("allowed domains: switchboard.invalid");
      expect((await send(defaults, "desk@switchboard.invalid")).statusCode).toBe(200);
      const any = await createRig({ mailFromDomains: ["*"] });
      const res = await sendRaw(any, leaseBody({ ForwardFromEmail: "anyone@anywhere.example.net" }));
      expect(res.statusCode, res.body).toBe(200);
    } finally {
      await defaults.close();
    }
  }, 120_000);
});

describe("a forwarded SMS obeys the send rules of its account and property (issue 12)", () => {
  async function admin(r: Rig, url: string, body: object) {
    const res = await r.app.inject({ method: "POST", url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: body });
    expect(res.statusCode, res.body).toBe(200);
  }

  for (const where of ["property", "account"] as const) {
    it(`with SMS disabled on the ${where} after the send, the reply is kept and the forward is not sent: a Failed message with ErrorCode SmsNotEnabled`, async () => {
      const r = await createRig();
      const recipient = usNumber();
      const forwardTo = ukNumber();
      const out = await sendLeased(r, { To: recipient, Text: "Reply to this", ForwardToSms: forwardTo });
      await admin(r, where === "property" ? `/admin/v1/Properties/${r.tenant.propertySid}` : `/admin/v1/Accounts/${r.tenant.accountSid}`, {
        SmsEnabled: false,
      });
      const inbound = await reply(r, recipient, out.From, "Can I change it?");
      expect((await record(r, inbound.MessageSid)).Status).toBe("Received");
      await drain(r);
      expect(await handset(r, forwardTo)).toEqual([]);
      const forwards = (await listByDirection(r, "Transmit")).Messages.filter((m) => m.To === forwardTo);
      expect(forwards).toEqual([
        expect.objectContaining({ Status: "Failed", ErrorCode: "SmsNotEnabled", From: recipient, Text: "Can I change it?", Submitted: 0 }),
      ]);
    });
  }

  it("an alphanumeric ForwardFromSms to a country that does not take alphanumeric IDs goes out from a leased sender, as a send would", async () => {
    const r = await createRig();
    const recipient = usNumber();
    const forwardTo = usNumber();
    const out = await sendLeased(r, { To: recipient, Text: "Reply to this", ForwardToSms: forwardTo, ForwardFromSms: "Switchbrd" });
    await reply(r, recipient, out.From, "Yes please");
    await drain(r);
    const got = await handset(r, forwardTo);
    expect(got).toHaveLength(1);
    expect(r.pool).toContain(got[0].From);
    expect(got[0]).toMatchObject({ To: forwardTo, Text: "Yes please" });
    expect(await record(r, got[0].MessageSid)).toMatchObject({ Status: "Delivered", From: got[0].From });
  });

  it("an E164 ForwardFromSms the account no longer owns when the reply comes is not used: Failed with SenderNotOwned", async () => {
    const r = await createRig();
    const recipient = usNumber();
    const forwardTo = ukNumber();
    const out = await sendLeased(r, { To: recipient, Text: "Reply to this", ForwardToSms: forwardTo, ForwardFromSms: r.tenant.ownedNumber });
    // The operator moves the number to the shared pool meanwhile.
    await r.db.orm.em.fork().execute("update numbers set account_sid = null where number = ?", [r.tenant.ownedNumber]);
    await reply(r, recipient, out.From, "Still there?");
    await drain(r);
    expect(await handset(r, forwardTo)).toEqual([]);
    const forwards = (await listByDirection(r, "Transmit")).Messages.filter((m) => m.To === forwardTo);
    expect(forwards).toEqual([expect.objectContaining({ Status: "Failed", ErrorCode: "SenderNotOwned", From: r.tenant.ownedNumber })]);
  });
});
