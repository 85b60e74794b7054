/**
 * The operator's Simulator Handsets API (GET /admin/v1/Simulator/Handsets/{Number}/Messages; issue
 * 41, defect 12): it shows what any simulator of the process delivered, a `simulator`-kind carrier
 * row's included (one simulated network, carriers/configured-engine.ts, as src/main.ts wires it), and
 * never a text the retention purge has redacted or deleted.
 */
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.js";
import { createConfiguredEngine } from "../../src/carriers/configured-engine.js";
import { loadConfig } from "../../src/config.js";
import type { DeliveryEngine } from "../../src/delivery/engine.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const DAY = 86_400_000;

async function handset(app: FastifyInstance, number: string): Promise<{ MessageSid: string; Text: string }[]> {
  const res = await app.inject({
    method: "GET",
    url: `/admin/v1/Simulator/Handsets/${number.slice(1)}/Messages`,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().Messages ?? [];
}

async function sendTo(app: FastifyInstance, tenant: Tenant, to: string, text: string): Promise<string> {
  const res = await app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: tenant.auth },
    payload: { From: tenant.ownedNumber, To: to, Text: text },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().MessageSid;
}

async function status(app: FastifyInstance, tenant: Tenant, sid: string): Promise<string> {
  return (await app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).json().Status;
}

describe(`the Handsets API and a simulator carrier row (${dbKind()})`, { timeout: 60_000 }, () => {
  let db: TestOrm;
  let app: FastifyInstance;
  let engine: DeliveryEngine;
  let tenant: Tenant;

  beforeAll(async () => {
    db = await createTestOrm();
    // As src/main.ts: the environment's carrier (CARRIER=simulator) and the router over the rows.
    const config = loadConfig({ SIMULATOR_REPORT_DELAY_MS: "0", ADMIN_TOKEN });
    const built = await createConfiguredEngine(config, db.orm, pino({ level: "silent" }));
    engine = built.engine;
    app = await buildApp({
      orm: db.orm,
      carrier: built.carrier,
      router: built.router,
      simulatorNetwork: built.network,
      onQueued: () => engine.nudge(),
      config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: true, noAlphaCountries: new Set(["US", "CA"]), bodyLimit: 1024 * 1024 },
    });
    await app.ready();
    await engine.start();
    tenant = await createTenant(app);
  }, 120_000);

  afterAll(async () => {
    await app?.close();
    await engine?.stop();
    await db?.close();
  });

  it("shows a message a simulator-kind carrier row delivered", async () => {
    const sim = await admin(app, "/admin/v1/Carriers", { Name: "sim-row", Kind: "simulator", Url: "simulator://" });
    const routes = await app.inject({
      method: "PUT",
      url: "/admin/v1/Routes",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { Routes: [{ Carriers: [sim.CarrierSid], Strategy: "Failover" }] },
    });
    expect(routes.statusCode, routes.body).toBe(200);
    const to = "+447700900401";
    const sid = await sendTo(app, tenant, to, "Delivered by the row");
    await expect.poll(() => status(app, tenant, sid), { timeout: 20_000 }).toBe("Delivered");
    const record = (await app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).json();
    expect(record.Carrier).toBe("sim-row");
    expect((await handset(app, to)).map((m) => [m.MessageSid, m.Text])).toEqual([[sid, "Delivered by the row"]]);
  });
});

describe(`the Handsets API after retention (${dbKind()})`, { timeout: 60_000 }, () => {
  let t: TestApp;
  let tenant: Tenant;

  beforeAll(async () => {
    t = await createTestApp({ now: new Date("2026-11-22T12:00:00Z"), engine: { retention: { defaultDays: null, pauseMs: 0 } } });
    tenant = await createTenant(t.app);
  });
  afterAll(() => t?.close());

  it("shows an empty Text once the message's text is redacted, and nothing once the message is purged", async () => {
    const to = "+447700900402";
    const sid = await sendTo(t.app, tenant, to, "Your code is 424242");
    while ((await t.engine!.dispatcher.tick()) > 0);
    await expect.poll(() => status(t.app, tenant, sid), { timeout: 10_000 }).toBe("Delivered");
    expect((await handset(t.app, to)).map((m) => [m.MessageSid, m.Text])).toEqual([[sid, "Your code is 424242"]]);

    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { RedactAfterDays: 1 });
    t.clock.advance(2 * DAY);
    await t.engine!.retention.pass();
    expect((await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).json()).toMatchObject({
      Text: "",
      Redacted: true,
    });
    expect((await handset(t.app, to)).map((m) => [m.MessageSid, m.Text])).toEqual([[sid, ""]]);

    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { RetentionDays: 1 });
    await t.engine!.retention.pass();
    expect((await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).statusCode).toBe(404);
    expect(await handset(t.app, to)).toEqual([]);
  });
});
