/**
 * Issue 33: message texts are customers' content (codes, names, appointments): at LOG_LEVEL=info no
 * log line carries one. Sends (REST single and batch, Connect, a refused one, a leased one with
 * every forward), delivery, receipt webhooks, an inbound reply forwarded by SMS, e-mail and webhook,
 * a webhook that fails, and a retention pass, all through the service's own logger; every line
 * it writes is captured and searched for each text.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.js";
import { createSimulatorCarrier } from "../../src/carriers/simulator.js";
import { ManualClock } from "../../src/common/clock.js";
import { createLogger } from "../../src/common/logger.js";
import { createDeliveryEngine } from "../../src/delivery/engine.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, addPoolNumbers, admin, createTenant } from "../support/harness.js";
import { startReceiver, type Receiver } from "../support/webhook-receiver.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const words = (label: string) => `${label} ${randomBytes(9).toString("base64url")}`;

describe(`no message text in the log at info (${dbKind()})`, () => {
  let db: TestOrm;
  let receiver: Receiver;
  const lines: string[] = [];
  beforeAll(async () => {
    db = await createTestOrm();
    receiver = await startReceiver();
    // The second call of /fail answers 500: a failed attempt is logged too.
    receiver.answer = (_n, req) => (req.url.startsWith("/fail") ? 500 : 200);
  });
  afterAll(async () => {
    await receiver?.close();
    await db?.close();
  });

  it("sends, receives and forwards without writing a text", { timeout: 60_000 }, async () => {
    const log = createLogger(
      { logLevel: "info", adminToken: ADMIN_TOKEN, databaseUrl: "memory://", smtpUrl: undefined, metricsToken: undefined },
      {
        destination: { write: (s: string) => void lines.push(s) },
      },
    );
    const clock = new ManualClock(T0);
    const carrier = createSimulatorCarrier({ clock, reportDelayMs: 0 });
    const engine = createDeliveryEngine({ orm: db.orm, clock, carrier, webhookAllowPrivate: true, log, retention: { defaultDays: 1, pauseMs: 0 } });
    const app = await buildApp({
      orm: db.orm,
      clock,
      carrier,
      logger: log,
      onQueued: () => engine.nudge(),
      config: {
        adminToken: ADMIN_TOKEN,
        webhookAllowPrivate: true,
        noAlphaCountries: new Set(["US", "CA"]),
        bodyLimit: 1 << 20,
        mailFromDomains: ["example.com"],
      },
    });
    await app.ready();
    await engine.start({ loops: false });
    const texts: string[] = [];
    try {
      const tenant = await createTenant(app);
      const pool = await addPoolNumbers(app, 1, 70);
      const post = (url: string, payload: object, headers: Record<string, string> = {}) =>
        app.inject({ method: "POST", url, headers: { authorization: tenant.auth, ...headers }, payload });
      const text = (label: string) => {
        const t = words(label);
        texts.push(t);
        return t;
      };

      const single = await post(`/v2/Properties/${tenant.propertySid}/Messages`, {
        From: tenant.ownedNumber,
        To: "+447700900111",
        Text: text("single"),
        DeliveryReceiptWebhookUri: receiver.url("/dr"),
      });
      expect(single.statusCode, single.body).toBe(200);
      const batch = await post(`/v2/Properties/${tenant.propertySid}/BatchMessages`, {
        Messages: [
          { From: tenant.ownedNumber, To: "+447700900112", Text: text("batch ok") },
          { From: tenant.ownedNumber, To: "not a number", Text: text("batch refused") },
        ],
      });
      expect(batch.statusCode, batch.body).toBe(200);
      const connect = await post(
        "/switchboard.v2.MessagingService/SendMessage",
        {
          PropertySid: tenant.propertySid,
          From: tenant.ownedNumber,
          To: "+447700900113",
          Text: text("connect"),
          DeliveryReceiptWebhookUri: receiver.url("/fail"),
        },
        { "content-type": "application/json" },
      );
      expect(connect.statusCode, connect.body).toBe(200);
      const refused = await post(`/v2/Properties/${tenant.propertySid}/Messages`, { From: "not-ours", To: "+447700900114", Text: text("refused") });
      expect(refused.statusCode).toBe(400);
      const handset = "+14155550199";
      const leased = await post(`/v2/Properties/${tenant.propertySid}/Messages`, {
        From: "",
        To: handset,
        Text: text("leased"),
        ForwardToSms: "+447700900115",
        ForwardToEmail: "desk@example.com",
        WebhookUri: receiver.url("/reply"),
      });
      expect(leased.statusCode, leased.body).toBe(200);
      expect(pool).toContain(leased.json().From);

      const drain = async () => {
        while ((await engine.dispatcher.tick()) > 0);
        await new Promise((r) => setTimeout(r, 50));
        await engine.webhooks.tick();
        await engine.webhooks.drain();
        await engine.mail.tick();
      };
      await drain();
      const inbound = await admin(app, "/admin/v1/Simulator/Inbound", { From: handset, To: leased.json().From, Text: text("reply") });
      expect(inbound.InReplyTo).toBe(leased.json().MessageSid);
      await drain();
      await drain();
      expect(receiver.requests.map((r) => r.url.split("?")[0]).sort()).toEqual(expect.arrayContaining(["/dr", "/fail", "/reply"]));

      clock.advance(2 * 86_400_000);
      expect((await engine.retention.pass()).purged).toBeGreaterThan(0);
    } finally {
      await app.close();
      await engine.stop();
    }
    // The log saw the traffic (requests, the pass) but no text.
    expect(lines.some((l) => l.includes('"request completed"'))).toBe(true);
    expect(lines.some((l) => l.includes("retention pass done"))).toBe(true);
    expect(texts).toHaveLength(7);
    // Each text's random part, alone: found whole or in pieces of a JSON string, it would show.
    for (const t of texts) expect(lines.filter((l) => l.includes(t.split(" ").at(-1)!))).toEqual([]);
  });
});
