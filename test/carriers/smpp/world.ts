import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { MikroORM } from "@mikro-orm/sql";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { buildApp } from "../../../src/app.js";
import { type Clock, systemClock } from "../../../src/common/clock.js";
import { createSmppCarrier, type SmppCarrier, type SmppCarrierOptions } from "../../../src/carriers/smpp/smpp-carrier.js";
import { createDeliveryEngine, type DeliveryEngine } from "../../../src/delivery/engine.js";
import { ADMIN_TOKEN, addPoolNumbers, createTenant, type Tenant } from "../../support/harness.js";
import { type TestSmsc } from "./smsc.js";

/** The bind settings of the tests (SMPP_URL's credentials, window, rate, timers). */
export const SMPP_DEFAULTS = {
  systemId: "switchboard",
  password: "secret",
  systemType: "sbtest",
  window: 10,
  tps: 50,
  enquireLinkMs: 30_000,
  moReassemblyMs: 300_000,
};

/** Polls `probe` every 50 ms until it gives a value (not undefined/false), or throws after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false && v !== null) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Hex of a GSM-7 text of basic letters and digits (they share ASCII's codes), unpacked as SMPP carries it. */
export function gsmHex(text: string): string {
  return Buffer.from(text, "latin1").toString("hex");
}

/** Switchboard with CARRIER=smpp bound to a test SMSC: the app, its delivery engine, a tenant, pool numbers and a webhook receiver. */
export interface SmppWorld {
  carrier: SmppCarrier;
  engine: DeliveryEngine;
  app: FastifyInstance;
  tenant: Tenant;
  pool: string[];
  /** Base URL of the webhook receiver, and what it received (JSON bodies). */
  hookBase: string;
  hooks: { path: string; body: any }[];
  /** Sends through the REST API; returns the MessageSid. */
  send(payload: Record<string, unknown>): Promise<string>;
  /** The message record from the REST API. */
  record(sid: string): Promise<any>;
  /** Stops the engine (and the carrier), the app and the webhook receiver. */
  close(): Promise<void>;
}

/** Starts the world on `orm` against `smsc`; `carrier` overrides the test defaults; `clock` (default the real one) is every part's. */
export async function startSmppWorld(orm: MikroORM, smsc: TestSmsc, carrier: Partial<SmppCarrierOptions> = {}, clock: Clock = systemClock): Promise<SmppWorld> {
  const hooks: SmppWorld["hooks"] = [];
  const hookServer = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      hooks.push({ path: req.url ?? "", body: body ? JSON.parse(body) : {} });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => hookServer.listen(0, "127.0.0.1", r));
  const log = process.env.SMPP_TEST_LOG ? pino({ level: "info" }) : undefined;
  const smpp = createSmppCarrier({
    ...SMPP_DEFAULTS,
    host: "127.0.0.1",
    port: smsc.port,
    tls: false,
    clock,
    reconnectMinMs: 200,
    reconnectMaxMs: 1000,
    log,
    ...carrier,
  });
  const engine = createDeliveryEngine({ orm, clock, carrier: smpp, webhookAllowPrivate: true, pollMs: 50, log });
  const app = await buildApp({
    orm,
    clock,
    carrier: smpp,
    onQueued: () => engine.nudge(),
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: true, noAlphaCountries: new Set(["US", "CA"]), bodyLimit: 1024 * 1024 },
  });
  await app.ready();
  await engine.start();
  const tenant = await createTenant(app);
  const pool = await addPoolNumbers(app, 2, 40);
  return {
    carrier: smpp,
    engine,
    app,
    tenant,
    pool,
    hookBase: `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}`,
    hooks,
    async send(payload) {
      const res = await app.inject({ method: "POST", url: `/v2/Properties/${tenant.propertySid}/Messages`, headers: { authorization: tenant.auth }, payload });
      if (res.statusCode !== 200) throw new Error(`send: ${res.statusCode} ${res.body}`);
      return res.json().MessageSid as string;
    },
    async record(sid) {
      return (await app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).json();
    },
    async close() {
      await engine.stop();
      await app.close();
      await new Promise((r) => hookServer.close(r));
    },
  };
}
