/**
 * CARRIER=kannel against a real Kannel 1.4.5: bearerbox + smsbox + fakesmsc as child processes
 * (test/support/kannel.ts), the service on a real port for Kannel's callbacks, the delivery
 * engine's loops running, and a real webhook receiver that checks every Standard Webhooks
 * signature. Needs Debian's `kannel` and `kannel-extras` (.ci/run installs them): without
 * them these tests fail, they are not skipped.
 *
 * The second part drives the carrier's callback routes and sendsms error handling directly,
 * for what fakesmsc cannot produce (failed and rejected reports, a refusing or silent gateway).
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fastify, type FastifyInstance } from "fastify";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CarrierEvents, DeliveryReport, InboundSms } from "../../src/delivery/carrier.js";
import { CarrierError } from "../../src/delivery/carrier.js";
import { createKannelCarrier, kannelDlrUrl, type KannelCarrier } from "../../src/carriers/kannel.js";
import { createCarrier } from "../../src/carriers/index.js";
import { systemClock } from "../../src/common/clock.js";
import { loadConfig } from "../../src/config.js";
import { addPoolNumbers, createTenant, type Tenant } from "../support/harness.js";
import { freePort, type KannelStack, type RunningKannel, startKannelStack } from "../support/kannel.js";
import { without } from "../support/system-packages.js";

/** A secret with characters that need URL-encoding and that look like Kannel escape codes (%C, %d). */
const SECRET = "kannel/secret %C3 %d+é-0123456789abcdef";

interface WebhookCall {
  method: string;
  path: string;
  /** The raw query string (what a GET call signs). */
  query: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver on 127.0.0.1 that records every call and answers 204. */
async function startReceiver(): Promise<{ url: string; calls: WebhookCall[]; server: Server }> {
  const calls: WebhookCall[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = req.url ?? "/";
      const q = url.indexOf("?");
      calls.push({
        method: req.method ?? "",
        path: q < 0 ? url : url.slice(0, q),
        query: q < 0 ? "" : url.slice(q + 1),
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls, server };
}

/** Verifies a call's Standard Webhooks signature with the tenant's secret; returns the fields. */
function verified(call: WebhookCall, secret: string): Record<string, unknown> {
  const headers = {
    "webhook-id": String(call.headers["webhook-id"]),
    "webhook-timestamp": String(call.headers["webhook-timestamp"]),
    "webhook-signature": String(call.headers["webhook-signature"]),
  };
  const wh = new Webhook(secret);
  if (call.method === "GET") {
    // Throws on a bad signature; the signed content is the query string, not JSON.
    wh.verify(call.query, headers, { jsonParse: false });
    const fields: Record<string, unknown> = Object.fromEntries(new URLSearchParams(call.query));
    fields.Timestamp = Number(fields.Timestamp);
    return fields;
  }
  return wh.verify(call.body, headers) as Record<string, unknown>;
}

/** What Kannel's urltrans_fill_escape_codes does to a pattern: `%%` → `%`, known codes filled, others kept. */
function fillKannelEscapes(pattern: string, codes: Record<string, string>): string {
  return pattern.replace(/%(.)/g, (m, c: string) => (c === "%" ? "%" : (codes[c] ?? m)));
}

let kannel: RunningKannel | undefined;

/** Polls until `probe` returns a value; fails with Kannel's logs when it never does. */
async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${kannel ? await kannel.diagnostics() : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(without("kannel"))("CARRIER=kannel end to end: bearerbox + smsbox + fakesmsc", () => {
  let stack: KannelStack;
  let app: FastifyInstance;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let tenant: Tenant;
  let pool: string[];
  let base: string;

  beforeAll(async () => {
    [stack, receiver] = await Promise.all([startKannelStack({ secret: SECRET }), startReceiver()]);
    ({ app, base, kannel } = stack);
    tenant = await createTenant(app);
    pool = await addPoolNumbers(app, 1, 40);
  });

  afterAll(async () => {
    await stack?.stop();
    kannel = undefined;
    await new Promise((r) => (receiver ? receiver.server.close(r) : r(undefined)));
  });

  async function send(body: object): Promise<any> {
    const res = await app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: body,
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }
  async function record(sid: string): Promise<any> {
    const res = await app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }
  const delivered = (sid: string) =>
    waitFor(`${sid} to be Delivered`, async () => {
      const r = await record(sid);
      return r.Status === "Delivered" ? r : undefined;
    });

  it("sends through Kannel to fakesmsc, takes the delivery report and signs a POST DeliveryReceipt webhook", async () => {
    const to = "+447700900123";
    const text = `Hello from Switchboard via Kannel: 100% + "quotes" & more ${Date.now()}`;
    const msg = await send({ From: "Acme", To: to, Text: text, DeliveryReceiptWebhookUri: `${receiver.url}/receipts` });

    const onHandset = await waitFor("fakesmsc to receive the SMS", () => kannel!.fakesmsc.messages().find((m) => m.text === text));
    expect(onHandset).toMatchObject({ from: "Acme", to, text });
    expect(onHandset.line).toBe(`Acme ${to} text ${text}`);

    const rec = await delivered(msg.MessageSid);
    expect(rec).toMatchObject({ Direction: "Transmit", Status: "Delivered", ErrorCode: "", Encoding: "GSM7" });
    expect(rec.Submitted).toBeGreaterThan(0);
    expect(rec.Delivered).toBeGreaterThanOrEqual(rec.Submitted);

    const call = await waitFor("the DeliveryReceipt webhook", () => receiver.calls.find((c) => c.path === "/receipts" && c.body.includes(msg.MessageSid)));
    expect(call.method).toBe("POST");
    expect(call.headers["content-type"]).toBe("application/json");
    expect(verified(call, tenant.webhookSecret)).toEqual({
      Type: "DeliveryReceipt",
      MessageSid: msg.MessageSid,
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: "Acme",
      To: to,
      Status: "Delivered",
      ErrorCode: "",
      Timestamp: rec.Delivered,
    });
    // The signature covers the body: a changed byte does not verify.
    expect(() => verified({ ...call, body: call.body.replace("Delivered", "Failed") }, tenant.webhookSecret)).toThrow();
    // Kannel's two reports (8 submitted, 1 delivered) made exactly one receipt.
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.calls.filter((c) => c.body.includes(msg.MessageSid))).toHaveLength(1);
  });

  it("sends a UCS-2 text (coding=2) and signs a GET DeliveryReceipt webhook with the fields in the query", async () => {
    const to = "+447700900124";
    const text = "Привет из Switchboard ✓ 😀";
    const msg = await send({
      From: tenant.ownedNumber,
      To: to,
      Text: text,
      DeliveryReceiptWebhookUri: `${receiver.url}/receipts-get`,
      DeliveryReceiptWebhookMethod: "GET",
    });

    const onHandset = await waitFor("fakesmsc to receive the UCS-2 SMS", () => kannel!.fakesmsc.messages().find((m) => m.to === to));
    expect(onHandset.line).toMatch(/ ucs-2 /);
    expect(onHandset).toMatchObject({ from: tenant.ownedNumber, text });

    const rec = await delivered(msg.MessageSid);
    expect(rec.Encoding).toBe("UCS2");

    const call = await waitFor("the GET DeliveryReceipt webhook", () =>
      receiver.calls.find((c) => c.path === "/receipts-get" && c.query.includes(msg.MessageSid)),
    );
    expect(call.method).toBe("GET");
    expect(call.body).toBe("");
    expect(verified(call, tenant.webhookSecret)).toEqual({
      Type: "DeliveryReceipt",
      MessageSid: msg.MessageSid,
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: tenant.ownedNumber,
      To: to,
      Status: "Delivered",
      ErrorCode: "",
      Timestamp: rec.Delivered,
    });
    expect(() => verified({ ...call, query: call.query.replace("Delivered", "Failed") }, tenant.webhookSecret)).toThrow();
  });

  it("takes a mobile-originated reply from fakesmsc to a leased pool number as a Received message", async () => {
    const handset = "+14155550123";
    // A US recipient with no From: a leased sender from the pool, with a Response webhook.
    const out = await send({ To: handset, Text: "Reply to this number", WebhookUri: `${receiver.url}/responses` });
    expect(out.From).toBe(pool[0]);
    await delivered(out.MessageSid);
    // fakesmsc logs what it receives only between reads of its stdin (up to 1 s late): wait for it.
    await waitFor("fakesmsc to receive the outbound SMS", () => kannel!.fakesmsc.messages().find((m) => m.to === handset));
    const sentToFakesmsc = kannel!.fakesmsc.received().length;

    const reply = 'Yes  see you at 5 + bring snacks & "drinks" 100%';
    const unicodeReply = "Да, спасибо 👍";
    await kannel!.fakesmsc.sendMo(handset, pool[0]!, reply);
    await kannel!.fakesmsc.sendMo(handset, pool[0]!, unicodeReply);

    const received = await waitFor("both replies to be stored", async () => {
      const res = await app.inject({
        method: "GET",
        url: `/v2/Properties/${tenant.propertySid}/Messages?Direction=Receive`,
        headers: { authorization: tenant.auth },
      });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      return body.TotalCount >= 2 ? (body.Messages as any[]) : undefined;
    });
    const byText = new Map(received.map((m) => [m.Text, m]));
    for (const [text, encoding] of [
      [reply, "GSM7"],
      [unicodeReply, "UCS2"],
    ] as const) {
      expect(byText.get(text), `stored texts: ${JSON.stringify([...byText.keys()])}`).toMatchObject({
        Direction: "Receive",
        Status: "Received",
        From: handset,
        To: pool[0],
        Text: text,
        Encoding: encoding,
        AccountSid: tenant.accountSid,
        PropertySid: tenant.propertySid,
      });
      expect(byText.get(text).Received).toBeGreaterThan(0);
    }

    // The lease's Response webhook, signed, names the outbound message it answered.
    const call = await waitFor("the Response webhook", () => receiver.calls.find((c) => c.path === "/responses" && c.body.includes("bring snacks")));
    expect(verified(call, tenant.webhookSecret)).toMatchObject({
      Type: "Response",
      MessageSid: byText.get(reply).MessageSid,
      InReplyTo: out.MessageSid,
      From: handset,
      To: pool[0],
      Text: reply,
    });
    // The empty answer sent no reply SMS back to the handset (omit-empty).
    await new Promise((r) => setTimeout(r, 500));
    expect(kannel!.fakesmsc.received().slice(sentToFakesmsc)).toEqual([]);
  });

  it("refuses callbacks without the shared secret (403) on the real port", async () => {
    const dlr = await fetch(`${base}/carriers/kannel/dlr?secret=wrong&sid=MG${"0".repeat(30)}&status=1`);
    expect(dlr.status).toBe(403);
    const none = await fetch(`${base}/carriers/kannel/inbound?from=%2B1&to=%2B2&text=x`);
    expect(none.status).toBe(403);
  });
});

describe("Kannel carrier: callback routes and sendsms answers", () => {
  const reports: DeliveryReport[] = [];
  const inbound: InboundSms[] = [];
  const events: CarrierEvents = {
    async deliveryReport(r) {
      reports.push(r);
    },
    async inbound(sms) {
      inbound.push(sms);
      return { messageSid: "MG1", inReplyTo: "MG0" };
    },
  };
  let gateway: Server;
  let gatewayUrl: string;
  let lastRequest = "";
  let answer: { status: number; body: string; hang?: boolean } = { status: 202, body: "0: Accepted for delivery" };
  let app: FastifyInstance;
  let carrier: KannelCarrier;

  const make = (overrides: Partial<Parameters<typeof createKannelCarrier>[0]> = {}) =>
    createKannelCarrier({
      sendsmsUrl: `${gatewayUrl}/cgi-bin/sendsms`,
      username: "switchboard",
      password: "p&ss word",
      callbackBaseUrl: "http://service.example:8080/",
      callbackSecret: SECRET,
      clock: systemClock,
      fetchTimeoutMs: 300,
      ...overrides,
    });
  const sms = (text = "hello") => ({ messageSid: "MGABC", from: "+12025550100", to: "+14155550123", text, deliveryReceipt: true });

  beforeAll(async () => {
    gateway = createServer((req, res) => {
      lastRequest = req.url ?? "";
      if (answer.hang) return; // never answers
      res.writeHead(answer.status, { "content-type": "text/html" }).end(answer.body);
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
    gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
    carrier = make();
    await carrier.start(events);
    app = fastify();
    await app.register(carrier.routes);
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    gateway?.closeAllConnections();
    await new Promise((r) => gateway.close(r));
  });

  const dlr = (q: string) => app.inject({ method: "GET", url: `/carriers/kannel/dlr?${q}` });
  const secretParam = `secret=${encodeURIComponent(SECRET)}`;

  it("maps Kannel report types: 1 Delivered, 2 Failed CarrierFailed, 16 Failed CarrierRejected, 4 and 8 Submitted (the carrier holds it)", async () => {
    reports.length = 0;
    for (const [status, sid] of [
      [8, "MG8"],
      [4, "MG4"],
      [1, "MG1"],
      [2, "MG2"],
      [16, "MG16"],
    ] as const) {
      const res = await dlr(`${secretParam}&sid=${sid}&status=${status}&answer=ACK%2F`);
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe("");
    }
    expect(reports.map(({ messageSid, status, errorCode }) => ({ messageSid, status, errorCode }))).toEqual([
      { messageSid: "MG8", status: "Submitted", errorCode: "" },
      { messageSid: "MG4", status: "Submitted", errorCode: "" },
      { messageSid: "MG1", status: "Delivered", errorCode: "" },
      { messageSid: "MG2", status: "Failed", errorCode: "CarrierFailed" },
      { messageSid: "MG16", status: "Failed", errorCode: "CarrierRejected" },
    ]);
    expect(reports.every((r) => r.at instanceof Date)).toBe(true);
    // Kannel's reference is the MessageSid (it travels in the dlr-url).
    expect(reports.filter((r) => r.status === "Submitted").map((r) => r.carrierRef)).toEqual(["MG8", "MG4"]);
  });

  it("answers 403 to a missing or wrong secret and 400 to a report without sid or status", async () => {
    reports.length = 0;
    expect((await dlr("sid=MG1&status=1")).statusCode).toBe(403);
    expect((await dlr(`secret=${encodeURIComponent(SECRET.slice(0, -1))}&sid=MG1&status=1`)).statusCode).toBe(403);
    expect((await dlr(`secret=&sid=MG1&status=1`)).statusCode).toBe(403);
    expect((await app.inject({ method: "GET", url: "/carriers/kannel/inbound?secret=nope&from=1&to=2&text=x" })).statusCode).toBe(403);
    expect((await dlr(`${secretParam}&status=1`)).statusCode).toBe(400);
    expect((await dlr(`${secretParam}&sid=MG1&status=%d`)).statusCode).toBe(400);
    expect(reports).toEqual([]);
  });

  it("decodes inbound text as Kannel's %b sends it (raw bytes, UTF-16BE for UCS-2) and normalizes numbers", async () => {
    inbound.length = 0;
    const ucs2 = [...Buffer.from("Да 👍", "utf16le").swap16()].map((b) => `%${b.toString(16).padStart(2, "0").toUpperCase()}`).join("");
    const calls = [
      `from=%2B14155550123&to=%2B12025550140&text=Hi++there+%2B+%26+100%25&charset=UTF-8&coding=0`,
      `from=0014155550123&to=12025550140&text=${ucs2}&charset=UTF-16BE&coding=2`,
      `from=14155550123&to=12025550140&text=caf%E9&charset=ISO-8859-1&coding=0`,
    ];
    for (const q of calls) {
      const res = await app.inject({ method: "GET", url: `/carriers/kannel/inbound?${secretParam}&${q}` });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.body).toBe(""); // no reply SMS
    }
    expect(inbound.map(({ from, to, text }) => ({ from, to, text }))).toEqual([
      { from: "+14155550123", to: "+12025550140", text: "Hi  there + & 100%" },
      { from: "+14155550123", to: "+12025550140", text: "Да 👍" },
      { from: "+14155550123", to: "+12025550140", text: "café" },
    ]);
  });

  it("submits with credentials, charset, coding=2 only for UCS-2, dlr-mask=31 and the encoded dlr-url", async () => {
    answer = { status: 202, body: "0: Accepted for delivery" };
    await expect(carrier.submit(sms("plain GSM text"))).resolves.toEqual({ carrierRef: "MGABC" });
    let q = new URL(lastRequest, gatewayUrl).searchParams;
    expect(Object.fromEntries(q)).toEqual({
      username: "switchboard",
      password: "p&ss word",
      from: "+12025550100",
      to: "+14155550123",
      text: "plain GSM text",
      charset: "UTF-8",
      "dlr-mask": "31",
      "dlr-url": kannelDlrUrl({ callbackBaseUrl: "http://service.example:8080", callbackSecret: SECRET }, "MGABC"),
    });
    // Kannel turns %% into % and fills %d/%A: the secret comes back intact.
    const filled = fillKannelEscapes(q.get("dlr-url")!, { d: "1", A: "" });
    expect(filled.startsWith("http://service.example:8080/carriers/kannel/dlr?")).toBe(true);
    expect(Object.fromEntries(new URL(filled).searchParams)).toEqual({ secret: SECRET, sid: "MGABC", status: "1", answer: "" });

    await carrier.submit(sms("Привет"));
    q = new URL(lastRequest, gatewayUrl).searchParams;
    expect(q.get("coding")).toBe("2");
    expect(q.get("text")).toBe("Привет");

    answer = { status: 200, body: "Sent." };
    await expect(carrier.submit(sms())).resolves.toEqual({ carrierRef: "MGABC" });
  });

  it("is what CARRIER=kannel builds from the KANNEL_* environment", async () => {
    const config = loadConfig({
      CARRIER: "kannel",
      PORT: "9999",
      KANNEL_SENDSMS_URL: `${gatewayUrl}/cgi-bin/sendsms`,
      KANNEL_USERNAME: "envuser",
      KANNEL_PASSWORD: "envpass",
      KANNEL_CALLBACK_URL: "https://switchboard.example",
      KANNEL_CALLBACK_SECRET: "envsecret-0123456789abcdef-0123456789",
    });
    const fromEnv = await createCarrier(config, systemClock);
    expect(fromEnv.name).toBe("kannel");
    expect(typeof fromEnv.routes).toBe("function");
    answer = { status: 202, body: "0: Accepted for delivery" };
    await fromEnv.submit(sms());
    const q = new URL(lastRequest, gatewayUrl).searchParams;
    expect(q.get("username")).toBe("envuser");
    expect(q.get("password")).toBe("envpass");
    expect(q.get("dlr-url")).toBe("https://switchboard.example/carriers/kannel/dlr?secret=envsecret-0123456789abcdef-0123456789&sid=MGABC&status=%d&answer=%A");
  });

  it("turns 4xx into a permanent CarrierRejected and 5xx, refusal and timeouts into a temporary CarrierUnavailable", async () => {
    const failure = async (c: KannelCarrier = carrier) => {
      const err = await c.submit(sms()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(CarrierError);
      const { errorCode, permanent } = err as CarrierError;
      return { errorCode, permanent };
    };
    answer = { status: 403, body: "Authorization failed for sendsms" };
    expect(await failure()).toEqual({ errorCode: "CarrierRejected", permanent: true });
    answer = { status: 400, body: "Receiver number not valid" };
    expect(await failure()).toEqual({ errorCode: "CarrierRejected", permanent: true });
    answer = { status: 503, body: "Queue full" };
    expect(await failure()).toEqual({ errorCode: "CarrierUnavailable", permanent: false });
    answer = { status: 500, body: "Internal error" };
    expect(await failure()).toEqual({ errorCode: "CarrierUnavailable", permanent: false });
    answer = { status: 202, body: "", hang: true };
    expect(await failure()).toEqual({ errorCode: "CarrierUnavailable", permanent: false });
    const closed = make({ sendsmsUrl: `http://127.0.0.1:${await freePort()}/cgi-bin/sendsms` });
    expect(await failure(closed)).toEqual({ errorCode: "CarrierUnavailable", permanent: false });
    answer = { status: 202, body: "0: Accepted for delivery" };
  });
});
