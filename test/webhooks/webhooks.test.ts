/**
 * Webhooks (docs/api.md#delivery-receipts-and-webhooks) against a real HTTP receiver on 127.0.0.1: delivery receipt fields and
 * Standard Webhooks signatures for POST and GET, retries with the same webhook-id and the
 * attempt log, a receiver that never answers (timeouts until the 24-hour window closes), when
 * no webhook is queued, the Response webhook of a reply, and the private-address guard both at
 * send time (literal addresses) and at call time (names that resolve to loopback).
 */
import { lookup } from "node:dns/promises";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { SIMULATOR_TEST_NUMBERS } from "../../src/carriers/simulator.js";
import { webhookBackoffMs } from "../../src/webhooks/webhook-worker.js";
import { isPrivateAddress } from "../../src/webhooks/url-guard.js";
import { startReceiver, type Receiver, type Received } from "../support/webhook-receiver.js";
import { ADMIN_TOKEN, addPoolNumbers, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

// Standard Webhooks verification checks the timestamp against the real clock (5 minutes'
// tolerance), so the manual clock starts at the real time.
const T0 = new Date(Math.floor(Date.now() / 1000) * 1000);
const HOUR = 3_600_000;
const DR_FIELDS = ["AccountSid", "ErrorCode", "From", "MessageSid", "PropertySid", "Status", "Timestamp", "To", "Type"];
const RESPONSE_FIELDS = ["AccountSid", "From", "InReplyTo", "MessageSid", "OptOutType", "PropertySid", "Text", "Timestamp", "To", "Type"];

const secs = (d: Date) => Math.floor(d.getTime() / 1000);
let ukSeq = 0;
const ukRecipient = () => `+447700${String(900_000 + ++ukSeq)}`;

async function sendRaw(t: TestApp, tenant: Tenant, body: Record<string, unknown>) {
  return t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: tenant.auth },
    payload: { From: tenant.ownedNumber, To: ukRecipient(), Text: "hello", ...body },
  });
}

async function send(t: TestApp, tenant: Tenant, body: Record<string, unknown>): Promise<any> {
  const res = await sendRaw(t, tenant, body);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function record(t: TestApp, tenant: Tenant, sid: string): Promise<any> {
  const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** The operator's view of a message's webhook calls. */
async function deliveries(t: TestApp, sid: string): Promise<any[]> {
  const res = await t.app.inject({ method: "GET", url: `/admin/v1/Messages/${sid}/Webhooks`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().Deliveries;
}

/** Sends, dispatches, and waits for the simulator's report to make the message final. */
async function sendAndSettle(t: TestApp, tenant: Tenant, body: Record<string, unknown>, final = "Delivered"): Promise<any> {
  const m = await send(t, tenant, body);
  expect(await t.engine!.dispatcher.tick()).toBe(1);
  await vi.waitFor(async () => expect((await record(t, tenant, m.MessageSid)).Status).toBe(final), { timeout: 5000, interval: 10 });
  return m;
}

/** The query string exactly as the receiver got it. */
const rawQuery = (r: Received) => (r.url.includes("?") ? r.url.slice(r.url.indexOf("?") + 1) : "");

describe("delivery receipt webhooks (private targets allowed)", () => {
  let t: TestApp;
  let tenant: Tenant;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await startReceiver();
    t = await createTestApp({ now: T0, webhookAllowPrivate: true, engine: true });
    tenant = await createTenant(t.app);
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  it("POST: a JSON body with exactly the contract fields, signed with the account's WebhookSecret", async () => {
    t.clock.set(T0);
    rx.requests.length = 0;
    rx.answer = () => 200;
    const m = await sendAndSettle(t, tenant, { DeliveryReceiptWebhookUri: rx.url("/dr") });
    expect(await t.engine!.webhooks.tick()).toBe(1);
    expect(rx.requests).toHaveLength(1);
    const req = rx.requests[0];
    expect(req.method).toBe("POST");
    expect(req.url).toBe("/dr");
    expect(req.headers["content-type"]).toMatch(/^application\/json/);
    expect(req.headers["webhook-id"]).toMatch(/^msg_[A-Za-z0-9_-]+$/);
    expect(req.headers["webhook-timestamp"]).toBe(String(secs(T0)));
    expect(req.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);

    const payload = new Webhook(tenant.webhookSecret).verify(req.body, req.headers) as Record<string, unknown>;
    expect(Object.keys(payload).sort()).toEqual(DR_FIELDS);
    expect(payload).toStrictEqual({
      Type: "DeliveryReceipt",
      MessageSid: m.MessageSid,
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: tenant.ownedNumber,
      To: m.To,
      Status: "Delivered",
      ErrorCode: "",
      Timestamp: secs(T0),
    });
    // The signature covers the body and is keyed by this account's secret only.
    expect(() => new Webhook(tenant.webhookSecret).verify(req.body.replace("Delivered", "Failed"), req.headers)).toThrow();
    const other = await createTenant(t.app);
    expect(() => new Webhook(other.webhookSecret).verify(req.body, req.headers)).toThrow();

    const [d] = await deliveries(t, m.MessageSid);
    expect(d).toMatchObject({
      WebhookId: req.headers["webhook-id"],
      EventType: "DeliveryReceipt",
      Url: rx.url("/dr"),
      Method: "POST",
      Status: "Delivered",
      Attempts: 1,
    });
    expect(await t.engine!.webhooks.tick()).toBe(0);
  });

  it("POST for a failed message carries Status Failed and its ErrorCode", async () => {
    t.clock.set(T0);
    rx.requests.length = 0;
    rx.answer = () => 204;
    const m = await sendAndSettle(t, tenant, { To: SIMULATOR_TEST_NUMBERS.unreachable, DeliveryReceiptWebhookUri: rx.url("/dr") }, "Failed");
    expect(await t.engine!.webhooks.tick()).toBe(1);
    const payload = new Webhook(tenant.webhookSecret).verify(rx.requests[0].body, rx.requests[0].headers) as Record<string, unknown>;
    expect(payload).toMatchObject({
      Type: "DeliveryReceipt",
      MessageSid: m.MessageSid,
      To: SIMULATOR_TEST_NUMBERS.unreachable,
      Status: "Failed",
      ErrorCode: "Unreachable",
    });
    expect((await deliveries(t, m.MessageSid))[0]).toMatchObject({ Status: "Delivered", Attempts: 1 });
  });

  it("GET: the same fields as query parameters, the signature over the raw query string", async () => {
    t.clock.set(T0);
    rx.requests.length = 0;
    rx.answer = () => 200;
    const m = await sendAndSettle(t, tenant, { DeliveryReceiptWebhookUri: rx.url("/dr-get"), DeliveryReceiptWebhookMethod: "get" });
    expect(await t.engine!.webhooks.tick()).toBe(1);
    const req = rx.requests[0];
    expect(req.method).toBe("GET");
    expect(req.body).toBe("");
    expect(req.url.startsWith("/dr-get?")).toBe(true);
    const query = Object.fromEntries(new URLSearchParams(rawQuery(req)));
    expect(Object.keys(query).sort()).toEqual(DR_FIELDS);
    expect(query).toStrictEqual({
      Type: "DeliveryReceipt",
      MessageSid: m.MessageSid,
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: tenant.ownedNumber,
      To: m.To,
      Status: "Delivered",
      ErrorCode: "",
      Timestamp: String(secs(T0)),
    });
    const wh = new Webhook(tenant.webhookSecret);
    expect(() => wh.verify(rawQuery(req), req.headers, { jsonParse: false })).not.toThrow();
    expect(() => wh.verify(rawQuery(req).replace("Delivered", "Failed"), req.headers, { jsonParse: false })).toThrow();
    expect((await deliveries(t, m.MessageSid))[0]).toMatchObject({ Method: "GET", Status: "Delivered" });
  });

  it("GET to a URI with its own query: the client's parameters are kept and the whole query string verifies", async () => {
    t.clock.set(T0);
    rx.requests.length = 0;
    rx.answer = () => 200;
    await sendAndSettle(t, tenant, { DeliveryReceiptWebhookUri: rx.url("/dr-get?client=7&tag=a%20b"), DeliveryReceiptWebhookMethod: "GET" });
    expect(await t.engine!.webhooks.tick()).toBe(1);
    const req = rx.requests[0];
    const params = new URLSearchParams(rawQuery(req));
    expect(params.get("client")).toBe("7");
    expect(params.get("tag")).toBe("a b");
    expect(params.get("Type")).toBe("DeliveryReceipt");
    expect(() => new Webhook(tenant.webhookSecret).verify(rawQuery(req), req.headers, { jsonParse: false })).not.toThrow();
  });

  it("retries 500, 500, then 200 with the same webhook-id on the backoff schedule; the attempt log shows all three", async () => {
    t.clock.set(T0);
    rx.requests.length = 0;
    rx.answer = (n) => (n <= 2 ? 500 : 200);
    const m = await sendAndSettle(t, tenant, { DeliveryReceiptWebhookUri: rx.url("/flaky") });
    const wk = t.engine!.webhooks;

    expect(await wk.tick()).toBe(1);
    expect(await wk.tick()).toBe(0);
    let [d] = await deliveries(t, m.MessageSid);
    expect(d).toMatchObject({ Status: "Pending", Attempts: 1, NextAttempt: secs(T0) + webhookBackoffMs(1) / 1000 });

    t.clock.advance(webhookBackoffMs(1) - 1);
    expect(await wk.tick()).toBe(0);
    t.clock.advance(1);
    expect(await wk.tick()).toBe(1);
    t.clock.advance(webhookBackoffMs(2) - 1);
    expect(await wk.tick()).toBe(0);
    t.clock.advance(1);
    expect(await wk.tick()).toBe(1);
    t.clock.advance(7 * 86_400_000);
    expect(await wk.tick()).toBe(0);

    expect(rx.requests).toHaveLength(3);
    const ids = new Set(rx.requests.map((r) => r.headers["webhook-id"]));
    expect(ids.size).toBe(1);
    const wh = new Webhook(tenant.webhookSecret);
    for (const r of rx.requests) expect(wh.verify(r.body, r.headers)).toMatchObject({ MessageSid: m.MessageSid });
    expect(rx.requests.map((r) => Number(r.headers["webhook-timestamp"]))).toEqual([
      secs(T0),
      secs(T0) + webhookBackoffMs(1) / 1000,
      secs(T0) + (webhookBackoffMs(1) + webhookBackoffMs(2)) / 1000,
    ]);

    [d] = await deliveries(t, m.MessageSid);
    expect(d).toMatchObject({ WebhookId: [...ids][0], Status: "Delivered", Attempts: 3, NextAttempt: 0 });
    expect(d.Delivered).toBe(secs(T0) + (webhookBackoffMs(1) + webhookBackoffMs(2)) / 1000);
    expect(d.AttemptLog).toHaveLength(3);
    expect(d.AttemptLog.map((a: any) => a.StatusCode)).toEqual([500, 500, 200]);
    expect(d.AttemptLog.map((a: any) => a.Error)).toEqual(["HTTP 500", "HTTP 500", ""]);
    expect(d.AttemptLog.map((a: any) => a.Attempted)).toEqual(rx.requests.map((r) => Number(r.headers["webhook-timestamp"])));
  });

  it("no webhook when DeliveryReceipt is false, even with a URI; none without a URI", async () => {
    t.clock.set(T0);
    rx.requests.length = 0;
    rx.answer = () => 200;
    const off = await sendAndSettle(t, tenant, { DeliveryReceipt: false, DeliveryReceiptWebhookUri: rx.url("/never") });
    const noUri = await sendAndSettle(t, tenant, { DeliveryReceipt: true });
    const failedNoUri = await sendAndSettle(t, tenant, { To: SIMULATOR_TEST_NUMBERS.unreachable }, "Failed");
    expect((await record(t, tenant, off.MessageSid)).DeliveryReceipt).toBe(false);
    expect(await t.engine!.webhooks.tick()).toBe(0);
    t.clock.advance(HOUR);
    expect(await t.engine!.webhooks.tick()).toBe(0);
    for (const m of [off, noUri, failedNoUri]) expect(await deliveries(t, m.MessageSid)).toEqual([]);
    expect(rx.requests).toHaveLength(0);
  });

  it("a reply to a leased sender calls WebhookUri with the Response fields", async () => {
    t.clock.set(T0);
    rx.requests.length = 0;
    rx.answer = () => 200;
    const [pool] = await addPoolNumbers(t.app, 1, 40);
    const handset = "+14155550177";
    const out = await send(t, tenant, { From: "", To: handset, WebhookUri: rx.url("/reply") });
    expect(out.From).toBe(pool);
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    t.clock.advance(60_000);
    const inbound = await t.app.inject({
      method: "POST",
      url: "/admin/v1/Simulator/Inbound",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { From: handset, To: pool, Text: "yes please" },
    });
    expect(inbound.statusCode, inbound.body).toBe(200);
    const { MessageSid: replySid, InReplyTo } = inbound.json();
    expect(InReplyTo).toBe(out.MessageSid);
    expect(await t.engine!.webhooks.tick()).toBe(1);
    const req = rx.requests.find((r) => r.url === "/reply")!;
    expect(req.method).toBe("POST");
    const payload = new Webhook(tenant.webhookSecret).verify(req.body, req.headers) as Record<string, unknown>;
    expect(Object.keys(payload).sort()).toEqual(RESPONSE_FIELDS);
    expect(payload).toStrictEqual({
      Type: "Response",
      MessageSid: replySid,
      InReplyTo: out.MessageSid,
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: handset,
      To: pool,
      Text: "yes please",
      Timestamp: secs(T0) + 60,
      OptOutType: "",
    });
  });
});

describe("a receiver that accepts and never answers", () => {
  let t: TestApp;
  let tenant: Tenant;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await startReceiver();
    rx.answer = () => "hang";
    t = await createTestApp({ now: T0, webhookAllowPrivate: true, engine: { webhooks: { timeoutMs: 200 } } });
    tenant = await createTenant(t.app);
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  it("times out, retries on the backoff schedule, records each attempt, and gives up after 24 hours", { timeout: 60_000 }, async () => {
    const m = await sendAndSettle(t, tenant, { DeliveryReceiptWebhookUri: rx.url("/hang") });
    const wk = t.engine!.webhooks;
    const created = t.clock.now().getTime();
    const times: number[] = [];
    for (let i = 0; i < 100; i++) {
      const [d] = await deliveries(t, m.MessageSid);
      if (d.Status !== "Pending") break;
      expect(d.Attempts).toBe(times.length);
      if (times.length > 0) {
        const due = d.NextAttempt * 1000;
        expect(due).toBe(times[times.length - 1] + webhookBackoffMs(times.length));
        t.clock.set(due - 1);
        expect(await wk.tick()).toBe(0);
        t.clock.set(due);
      }
      const t0 = performance.now();
      expect(await wk.tick()).toBe(1);
      expect(performance.now() - t0).toBeLessThan(5000);
      times.push(t.clock.now().getTime());
    }
    const [d] = await deliveries(t, m.MessageSid);
    expect(d.Status).toBe("Failed");
    expect(d.Attempts).toBe(times.length);
    expect(d.NextAttempt).toBe(0);
    expect(d.Delivered).toBe(0);
    // The last attempt is the first at or after 24 hours; every earlier one was inside the window.
    expect(times[times.length - 1] - created).toBeGreaterThanOrEqual(24 * HOUR);
    expect(times[times.length - 2] - created).toBeLessThan(24 * HOUR);
    // 5 s doubling to one hour: 5, 10, 20 … 2560 s, then hourly.
    expect(times.slice(1, 5).map((x, i) => x - times[i])).toEqual([5000, 10_000, 20_000, 40_000]);
    expect(times[times.length - 1] - times[times.length - 2]).toBe(HOUR);
    expect(d.AttemptLog).toHaveLength(times.length);
    for (const a of d.AttemptLog) {
      expect(a.StatusCode).toBe(0);
      expect(a.Error).toBe("no answer within 200 ms");
      expect(a.DurationMs).toBeGreaterThanOrEqual(150);
    }
    expect(d.AttemptLog.map((a: any) => a.Attempted * 1000)).toEqual(times);
    await vi.waitFor(() => expect(rx.requests.length).toBe(times.length));
    expect(new Set(rx.requests.map((r) => r.headers["webhook-id"]))).toEqual(new Set([d.WebhookId]));

    // Given up: no further attempts, however long we wait.
    t.clock.advance(30 * 86_400_000);
    expect(await wk.tick()).toBe(0);
    expect((await deliveries(t, m.MessageSid))[0].Attempts).toBe(times.length);
    console.log(`[hanging receiver] ${times.length} attempts over ${((times[times.length - 1] - created) / HOUR).toFixed(2)} h of clock time`);
  });
});

/** A host name other than localhost that resolves only to loopback (from /etc/hosts or the machine's name). */
async function loopbackHostName(): Promise<string> {
  const names = new Set<string>(["localhost.localdomain"]);
  try {
    for (const line of readFileSync("/etc/hosts", "utf8").split("\n")) {
      const [ip, ...hosts] = line.replace(/#.*/, "").trim().split(/\s+/);
      if (ip && (ip.startsWith("127.") || ip === "::1")) for (const h of hosts) names.add(h);
    }
  } catch {
    /* no /etc/hosts */
  }
  names.add(hostname());
  for (const name of names) {
    const lower = name.toLowerCase();
    if (!lower || lower === "localhost" || lower.endsWith(".localhost") || !/[a-z]/.test(lower)) continue;
    const addrs = await lookup(name, { all: true }).catch(() => []);
    if (addrs.length > 0 && addrs.some((a) => a.address.startsWith("127.")) && addrs.every((a) => isPrivateAddress(a.address))) return name;
  }
  throw new Error(`no host name resolving to 127.0.0.1 among ${[...names].join(", ")}`);
}

describe("private address guard (WEBHOOK_ALLOW_PRIVATE=false)", () => {
  let t: TestApp;
  let tenant: Tenant;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await startReceiver();
    t = await createTestApp({ now: T0, webhookAllowPrivate: false, engine: true });
    tenant = await createTenant(t.app);
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  it("refuses literal loopback, private and localhost URIs, and IPv6 forms embedding them (NAT64, 6to4, compatible, mapped), at send time with InvalidWebhookUri", async () => {
    const embedded = [
      `http://[64:ff9b::7f00:1]:${rx.port}/`,
      `http://[2002:7f00:1::]:${rx.port}/`,
      `http://[::7f00:1]:${rx.port}/`,
      "http://[::ffff:a9fe:a9fe]/latest",
    ];
    for (const uri of [
      rx.url("/"),
      `http://localhost:${rx.port}/`,
      "http://10.1.2.3/hook",
      "http://[::1]:8080/",
      "http://169.254.169.254/latest",
      ...embedded,
    ]) {
      const res = await sendRaw(t, tenant, { DeliveryReceiptWebhookUri: uri });
      expect(res.statusCode, `${uri}: ${res.body}`).toBe(400);
      expect(res.json().ResponseStatus.ErrorCode).toBe("InvalidWebhookUri");
      expect(res.json().ResponseStatus.Errors).toEqual([expect.objectContaining({ FieldName: "DeliveryReceiptWebhookUri", ErrorCode: "InvalidWebhookUri" })]);
    }
    expect(rx.requests).toHaveLength(0);
  });

  it("refuses a host name that resolves to loopback when the call is made: Failed, nothing sent", async () => {
    const name = await loopbackHostName();
    const uri = `http://${name}:${rx.port}/dr`;
    const m = await sendAndSettle(t, tenant, { DeliveryReceiptWebhookUri: uri });
    expect(await t.engine!.webhooks.tick()).toBe(1);
    const [d] = await deliveries(t, m.MessageSid);
    expect(d).toMatchObject({ Url: uri, Status: "Failed", Attempts: 1, NextAttempt: 0 });
    expect(d.AttemptLog).toHaveLength(1);
    expect(d.AttemptLog[0].StatusCode).toBe(0);
    expect(d.AttemptLog[0].Error).toMatch(/private/);
    t.clock.advance(2 * HOUR);
    expect(await t.engine!.webhooks.tick()).toBe(0);
    expect(rx.requests).toHaveLength(0);
  });
});
