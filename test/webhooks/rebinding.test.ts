/**
 * DNS rebinding (issue 12): a listening app whose webhook worker resolves names through a real
 * DNS server run by the test (UDP on 127.0.0.1, every answer TTL 0). A name that answers a
 * public address first and 127.0.0.1 second must never get a call to the loopback receiver: the
 * host is resolved once per attempt and the connection goes to exactly the address checked.
 * Over HTTPS the connection to the checked address still presents the name (SNI, Host) and the
 * certificate is verified against the name.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getCACertificates, setDefaultCACertificates } from "node:tls";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { dnsServersResolver } from "../../src/webhooks/webhook-client.js";
import { createWebhookWorker, webhookBackoffMs, type WebhookWorker } from "../../src/webhooks/webhook-worker.js";
import { startDnsServer, type TestDnsServer } from "../support/dns-server.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { startReceiver, type Receiver } from "../support/webhook-receiver.js";

// Standard Webhooks verification checks the timestamp against the real clock.
const T0 = new Date(Math.floor(Date.now() / 1000) * 1000);
/** A public address: the guard lets it through; nothing here listens on it. */
const PUBLIC = "1.2.3.4";

/** Sends one message over HTTP with a delivery receipt webhook, and waits until it is Delivered. */
async function sendWithReceipt(t: TestApp, base: string, tenant: Tenant, webhookUri: string): Promise<string> {
  const res = await fetch(`${base}/v2/Properties/${tenant.propertySid}/Messages`, {
    method: "POST",
    headers: { authorization: tenant.auth, "content-type": "application/json" },
    body: JSON.stringify({ From: tenant.ownedNumber, To: "+447700900123", Text: "hello", DeliveryReceiptWebhookUri: webhookUri }),
  });
  const body = (await res.json()) as { MessageSid: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  expect(await t.engine!.dispatcher.tick()).toBe(1);
  await vi.waitFor(
    async () => {
      const r = await fetch(`${base}/v2/Messages/${body.MessageSid}`, { headers: { authorization: tenant.auth } });
      expect(((await r.json()) as { Status: string }).Status).toBe("Delivered");
    },
    { timeout: 5000, interval: 20 },
  );
  return body.MessageSid;
}

async function deliveries(base: string, sid: string): Promise<any[]> {
  const res = await fetch(`${base}/admin/v1/Messages/${sid}/Webhooks`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { Deliveries: any[] }).Deliveries;
}

const aQueries = (dns: TestDnsServer, name: string) => dns.queries.filter((q) => q.name === name && q.type === "A").length;

let dns: TestDnsServer;
let t: TestApp;
let base: string;
let tenant: Tenant;

// One listening app for the file (WEBHOOK_ALLOW_PRIVATE=false) whose webhook worker resolves
// through the test's DNS server.
beforeAll(async () => {
  dns = await startDnsServer(() => []);
  t = await createTestApp({
    now: T0,
    webhookAllowPrivate: false,
    // A short call timeout: the first attempt goes to PUBLIC, which may not answer at all here.
    engine: { webhooks: { resolve: dnsServersResolver([dns.address]), timeoutMs: 2000 } },
  });
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  tenant = await createTenant(t.app);
});
afterAll(async () => {
  await t?.close();
  await dns?.close();
});

describe("webhook DNS rebinding (WEBHOOK_ALLOW_PRIVATE=false)", () => {
  let rx: Receiver;

  beforeAll(async () => {
    rx = await startReceiver();
  });
  afterAll(async () => {
    await rx?.close();
  });

  it("a name answering a public address, then 127.0.0.1 (TTL 0): one lookup per attempt, the loopback receiver never called", { timeout: 30_000 }, async () => {
    const name = "hooks.rebind.test";
    rx.requests.length = 0;
    dns.answer = (_name, n) => (n === 1 ? [PUBLIC] : ["127.0.0.1"]);
    const uri = `http://${name}:${rx.port}/dr`;
    const sid = await sendWithReceipt(t, base, tenant, uri);

    // Attempt 1: the one lookup says PUBLIC, so the call goes to PUBLIC (which does not answer
    // here) and is retried later; it did not go to 127.0.0.1.
    expect(await t.engine!.webhooks.tick()).toBe(1);
    expect(rx.requests).toHaveLength(0);
    expect(aQueries(dns, name)).toBe(1);
    let [d] = await deliveries(base, sid);
    expect(d).toMatchObject({ Url: uri, Status: "Pending", Attempts: 1 });
    expect(d.AttemptLog[0].Error).toMatch(new RegExp(`${PUBLIC.replace(/\./g, "\\.")}|no answer within 2000 ms`));

    // Attempt 2: the one lookup says 127.0.0.1: refused before any connection, for good.
    t.clock.advance(webhookBackoffMs(1));
    expect(await t.engine!.webhooks.tick()).toBe(1);
    expect(aQueries(dns, name)).toBe(2);
    [d] = await deliveries(base, sid);
    expect(d).toMatchObject({ Status: "Failed", Attempts: 2, NextAttempt: 0 });
    expect(d.AttemptLog[1]).toMatchObject({ StatusCode: 0, Error: "the URI resolves to a private, loopback or link-local address (127.0.0.1)" });
    t.clock.advance(86_400_000);
    expect(await t.engine!.webhooks.tick()).toBe(0);
    expect(rx.requests).toHaveLength(0);
  });

  it("a name with a public and a loopback answer at once is refused at the first attempt, without connecting", async () => {
    const name = "mixed.rebind.test";
    rx.requests.length = 0;
    dns.answer = () => [PUBLIC, "127.0.0.1"];
    const sid = await sendWithReceipt(t, base, tenant, `http://${name}:${rx.port}/dr`);
    expect(await t.engine!.webhooks.tick()).toBe(1);
    const [d] = await deliveries(base, sid);
    expect(d).toMatchObject({ Status: "Failed", Attempts: 1 });
    expect(d.AttemptLog[0].Error).toBe("the URI resolves to a private, loopback or link-local address (127.0.0.1)");
    expect(aQueries(dns, name)).toBe(1);
    expect(rx.requests).toHaveLength(0);
  });

  it("a name answering a metadata address (100.100.100.200) is likewise refused", async () => {
    // The test server answers A records only; IPv6 answers are judged by the same rules (url-guard.test.ts).
    const name = "metadata.rebind.test";
    rx.requests.length = 0;
    dns.answer = () => ["100.100.100.200"];
    const sid = await sendWithReceipt(t, base, tenant, `http://${name}:${rx.port}/dr`);
    expect(await t.engine!.webhooks.tick()).toBe(1);
    expect((await deliveries(base, sid))[0]).toMatchObject({ Status: "Failed", Attempts: 1 });
    expect(rx.requests).toHaveLength(0);
  });
});

describe("the checked address keeps the name: Host, SNI and certificate (WEBHOOK_ALLOW_PRIVATE=true)", () => {
  const NAME = "secure.hooks.test";
  let dir: string;
  let https: Receiver;
  let plain: Receiver;
  // A worker as WEBHOOK_ALLOW_PRIVATE=true runs it, on the same database: the receivers are on 127.0.0.1.
  let worker: WebhookWorker;
  const defaultCAs = getCACertificates("default");

  beforeAll(async () => {
    // A self-signed certificate for NAME only, trusted by this test process.
    dir = mkdtempSync(join(tmpdir(), "rebind-tls-"));
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        `/CN=${NAME}`,
        "-addext",
        `subjectAltName=DNS:${NAME}`,
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
      ],
      { stdio: "ignore" },
    );
    const cert = readFileSync(join(dir, "cert.pem"), "utf8");
    setDefaultCACertificates([...defaultCAs, cert]);
    https = await startReceiver({ tls: { key: readFileSync(join(dir, "key.pem"), "utf8"), cert } });
    plain = await startReceiver();
    worker = createWebhookWorker({ orm: t.db.orm, clock: t.clock, allowPrivate: true, resolve: dnsServersResolver([dns.address]) });
    dns.answer = () => ["127.0.0.1"];
    // The rebinding tests moved the clock a day on; signatures are checked against the real time.
    t.clock.set(new Date(Math.floor(Date.now() / 1000) * 1000));
  });
  afterAll(async () => {
    await https?.close();
    await plain?.close();
    setDefaultCACertificates(defaultCAs);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("http: the call reaches the resolved address with the URI's Host", async () => {
    const uri = plain.url("/dr", "plain.hooks.test");
    const sid = await sendWithReceipt(t, base, tenant, uri);
    expect(await worker.tick()).toBe(1);
    expect(plain.requests).toHaveLength(1);
    expect(plain.requests[0].headers.host).toBe(`plain.hooks.test:${plain.port}`);
    expect(new Webhook(tenant.webhookSecret).verify(plain.requests[0].body, plain.requests[0].headers)).toMatchObject({ MessageSid: sid });
    expect((await deliveries(base, sid))[0]).toMatchObject({ Status: "Delivered", Attempts: 1 });
  });

  it("https: SNI and Host are the name, and the certificate is checked against it", async () => {
    const sid = await sendWithReceipt(t, base, tenant, https.url("/dr", NAME));
    expect(await worker.tick()).toBe(1);
    expect(https.requests).toHaveLength(1);
    expect(https.requests[0].servername).toBe(NAME);
    expect(https.requests[0].headers.host).toBe(`${NAME}:${https.port}`);
    expect(new Webhook(tenant.webhookSecret).verify(https.requests[0].body, https.requests[0].headers)).toMatchObject({ MessageSid: sid });
    expect((await deliveries(base, sid))[0]).toMatchObject({ Status: "Delivered", Attempts: 1 });
  });

  it("https: another name on the same address fails the certificate check and is retried; nothing is sent", async () => {
    const before = https.requests.length;
    const sid = await sendWithReceipt(t, base, tenant, https.url("/dr", "other.hooks.test"));
    expect(await worker.tick()).toBe(1);
    const [d] = await deliveries(base, sid);
    expect(d).toMatchObject({ Status: "Pending", Attempts: 1 });
    expect(d.AttemptLog[0].Error).toMatch(/other\.hooks\.test.*altnames/);
    expect(https.requests).toHaveLength(before);
  });
});
