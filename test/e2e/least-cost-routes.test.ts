/**
 * LeastCost end to end (issue 43, docs/billing.md#carrier-costs-and-least-cost-routing): two SMSCs
 * scripted on Perl's Net::SMPP (test/carriers/smpp/smsc.pl, two processes on two ports) configured
 * through the operator API with CostCards of different rates, the dispatcher's carrier router on
 * the real clock. Traffic goes to the cheaper; killed, the dearer takes over; back, the cheaper
 * takes it again. The record's Carrier and the operator's Cost (the timeline) say which.
 */
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.js";
import { systemClock } from "../../src/common/clock.js";
import { loadConfig } from "../../src/config.js";
import { createCarrierFromRow } from "../../src/carriers/index.js";
import { createSimulatorCarrier } from "../../src/carriers/simulator.js";
import { createCarrierRouter, type CarrierRouter } from "../../src/delivery/carrier-router.js";
import { createDeliveryEngine, type DeliveryEngine } from "../../src/delivery/engine.js";
import { ADMIN_TOKEN, createTenant, type Tenant } from "../support/harness.js";
import { createTestOrm, type TestOrm } from "../support/db.js";
import { acceptedSubmits, startSmsc, type TestSmsc } from "../carriers/smpp/smsc.js";
import { waitFor } from "../carriers/smpp/world.js";

const CONFIG = loadConfig({ SIMULATOR_REPORT_DELAY_MS: "20" });

describe("LeastCost against two Net::SMPP SMSCs of different cost", { timeout: 120_000 }, () => {
  let cheapSmsc: TestSmsc;
  let dearSmsc: TestSmsc;
  let db: TestOrm;
  let app: FastifyInstance;
  let engine: DeliveryEngine;
  let router: CarrierRouter;
  let tenant: Tenant;
  let seq = 0;

  const dest = () => `+336${String(10_000_000 + ++seq)}`;
  const at = (smsc: TestSmsc, to: string) => acceptedSubmits(smsc.events).filter((e) => e.f.destination_addr === to.slice(1));

  async function ok(method: "GET" | "POST" | "PUT", url: string, payload?: object): Promise<any> {
    const res = await app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload });
    if (res.statusCode !== 200) throw new Error(`${method} ${url} → ${res.statusCode} ${res.body}`);
    return res.json();
  }
  async function send(to: string, text: string): Promise<string> {
    const res = await app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: tenant.ownedNumber, To: to, Text: text },
    });
    if (res.statusCode !== 200) throw new Error(`send: ${res.statusCode} ${res.body}`);
    return res.json().MessageSid as string;
  }
  /** Waits (one query a poll) until none of the messages is queued. */
  async function outOfQueue(sids: string[]): Promise<void> {
    await waitFor(
      `${sids.length} messages out of the queue`,
      async () => {
        const rows = await db.orm.em
          .fork()
          .execute<{ n: number }[]>(
            `select count(*)::int as n from messages where sid in (${sids.map((x) => `'${x}'`).join(", ")}) and status in ('Submitted', 'Delivered', 'Failed')`,
          );
        return Number(rows[0].n) === sids.length;
      },
      60_000,
    );
  }
  /** Each message's /v2 record and the operator's timeline Cost, read one after the other (the read gate). */
  async function details(sids: string[]): Promise<{ record: any; cost: string }[]> {
    const out: { record: any; cost: string }[] = [];
    for (const sid of sids) {
      const record = (await app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).json();
      out.push({ record, cost: (await ok("GET", `/admin/v1/Messages/${sid}/Timeline`)).Cost });
    }
    return out;
  }
  /** Sends `count` messages one after the other, waits until they left the queue, and reads them. */
  async function sendMany(count: number, text: string): Promise<{ to: string; record: any; cost: string }[]> {
    const tos = Array.from({ length: count }, dest);
    const sids: string[] = [];
    for (const to of tos) sids.push(await send(to, text));
    await outOfQueue(sids);
    return (await details(sids)).map((d, i) => ({ to: tos[i], ...d }));
  }

  beforeAll(async () => {
    [cheapSmsc, dearSmsc] = await Promise.all([startSmsc(), startSmsc()]);
    db = await createTestOrm();
    const fallback = createSimulatorCarrier({ clock: systemClock, reportDelayMs: 20 });
    router = createCarrierRouter({
      orm: db.orm,
      fallback,
      build: (row) => createCarrierFromRow(row, CONFIG, systemClock, { env: {}, smpp: { reconnectMinMs: 200, reconnectMaxMs: 500, submitDeadlineMs: 20_000 } }),
    });
    engine = createDeliveryEngine({ orm: db.orm, clock: systemClock, carrier: router, webhookAllowPrivate: true, pollMs: 50 });
    app = await buildApp({
      orm: db.orm,
      clock: systemClock,
      carrier: fallback,
      router,
      onQueued: () => engine.nudge(),
      config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: true, noAlphaCountries: new Set(["US", "CA"]), bodyLimit: 1024 * 1024 },
    });
    await app.ready();
    await engine.start();
    tenant = await createTenant(app);
  }, 180_000);

  afterAll(async () => {
    await app?.close();
    await engine?.stop();
    await Promise.all([cheapSmsc?.stop(), dearSmsc?.stop()]);
    await db?.close();
  });

  it("configures two carriers with CostCards and one LeastCost route naming the dearer first", async () => {
    await ok("PUT", "/admin/v1/RateCards/cheap-cost", { Rates: [{ Prefix: "+33", PricePerSegment: "0.012" }] });
    await ok("PUT", "/admin/v1/RateCards/dear-cost", { Rates: [{ Prefix: "+33", PricePerSegment: "0.031" }] });
    const url = (smsc: TestSmsc) => `smpp://switchboard:secret@127.0.0.1:${smsc.port}`;
    const dear = await ok("POST", "/admin/v1/Carriers", { Name: "dear", Kind: "smpp", Url: url(dearSmsc), CostCard: "dear-cost" });
    const cheap = await ok("POST", "/admin/v1/Carriers", { Name: "cheap", Kind: "smpp", Url: url(cheapSmsc), CostCard: "cheap-cost" });
    expect([dear.CostCard, cheap.CostCard]).toEqual(["dear-cost", "cheap-cost"]);
    // The route's order is dear, cheap: LeastCost goes by cost, not by order.
    const table = { Routes: [{ Carriers: [dear.CarrierSid, cheap.CarrierSid], Strategy: "LeastCost" }] };
    expect(await ok("PUT", "/admin/v1/Routes", table)).toEqual(table);
    await waitFor("both binds", () => router.links().filter((l) => l.link === "Bound").length === 2);
  });

  it("traffic goes to the cheaper; its Carrier and Cost say so", async () => {
    const sent = await sendMany(20, "Least cost");
    expect(sent.map((m) => [m.record.Carrier, m.cost])).toEqual(sent.map(() => ["cheap", "0.012"]));
    expect(sent.map((m) => [at(cheapSmsc, m.to).length, at(dearSmsc, m.to).length])).toEqual(sent.map(() => [1, 0]));
    expect(sent.every((m) => !("Cost" in m.record))).toBe(true);
  });

  it("the cheaper killed: the dearer takes over, each message once; back, the cheaper takes the traffic again", async () => {
    await cheapSmsc.kill();
    await waitFor("the cheap link down", () => router.links().find((l) => l.name === "cheap")?.link !== "Bound", 10_000);
    const sent = await sendMany(20, "Cheap is down");
    expect(sent.map((m) => [m.record.Carrier, m.record.Status === "Failed", m.cost])).toEqual(sent.map(() => ["dear", false, "0.031"]));
    expect(sent.map((m) => [at(cheapSmsc, m.to).length, at(dearSmsc, m.to).length])).toEqual(sent.map(() => [0, 1]));

    await cheapSmsc.restart();
    await waitFor("cheap bound again", () => router.links().find((l) => l.name === "cheap")?.link === "Bound", 20_000);
    const back = await sendMany(5, "Cheap is back");
    expect(back.map((m) => [m.record.Carrier, m.cost])).toEqual(back.map(() => ["cheap", "0.012"]));
    expect(back.map((m) => [at(cheapSmsc, m.to).length, at(dearSmsc, m.to).length])).toEqual(back.map(() => [1, 0]));
  });

  it("killed mid-run: every message goes out exactly once, on the cheaper before and the dearer after", async () => {
    const tos: string[] = [];
    const sids: string[] = [];
    for (let i = 0; i < 60; i++) {
      if (i === 20) {
        await outOfQueue(sids);
        await cheapSmsc.kill();
      }
      const to = dest();
      tos.push(to);
      sids.push(await send(to, `Mid-run ${i}`));
      await new Promise((r) => setTimeout(r, 20));
    }
    await outOfQueue(sids);
    const done = await details(sids);
    expect(tos.map((to) => at(cheapSmsc, to).length + at(dearSmsc, to).length)).toEqual(tos.map(() => 1));
    // Which carrier took each is what its record and Cost say.
    done.forEach((d, i) => {
      const onCheap = at(cheapSmsc, tos[i]).length === 1;
      expect([d.record.Carrier, d.cost]).toEqual(onCheap ? ["cheap", "0.012"] : ["dear", "0.031"]);
    });
    expect(done.slice(0, 20).every((d) => d.record.Carrier === "cheap")).toBe(true);
    expect(done.slice(20).every((d) => d.record.Carrier === "dear")).toBe(true);
    await cheapSmsc.restart();
  });
});
