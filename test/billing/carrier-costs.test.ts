/**
 * Carrier costs (docs/billing.md#carrier-costs-and-least-cost-routing) through the operator API and
 * the dispatcher: a carrier's CostCard (an existing rate card; "" clears it; a 400 naming CostCard
 * otherwise, nothing changed), the message's Cost recorded at hand-over (segments times the
 * carrier's rate for the destination then, longest prefix, EffectiveFrom) and shown on the
 * operator's timeline only, and LeastCost choosing the cheapest carrier per message. The router
 * over simulator carriers, the dispatcher ticked by hand on a manual clock.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSimulatorCarrier } from "../../src/carriers/simulator.js";
import { ManualClock } from "../../src/common/clock.js";
import { createCarrierRouter, type CarrierRouter } from "../../src/delivery/carrier-router.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, submissionsWritten, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const HOUR = 3600;

describe(`carrier costs (${dbKind()})`, () => {
  let db: TestOrm;
  let t: TestApp;
  let router: CarrierRouter;
  let tenant: Tenant;
  const clock = new ManualClock(T0);
  const t0 = Math.floor(T0.getTime() / 1000);
  /** The carriers' links as the router opened them, by name: a link opened again is built again. */
  const builds: string[] = [];

  beforeAll(async () => {
    db = await createTestOrm();
    const fallback = createSimulatorCarrier({ clock, reportDelayMs: 0 });
    router = createCarrierRouter({
      orm: db.orm,
      clock,
      fallback,
      build: async (row) => {
        builds.push(row.name);
        return createSimulatorCarrier({ clock, reportDelayMs: 0 });
      },
      pollMs: 60_000,
    });
    t = await createTestApp({ db, clock, carrier: router, engine: true, config: { sendRateLimit: 0 } });
    tenant = await createTenant(t.app);
    // cost-a: +61 at 0.02, +614 at 0.015 until t0 + 1 h, then 0.01; cost-b: +61 at 0.018; cost-c: +44 only.
    await ok("PUT", "/admin/v1/RateCards/cost-a", {
      Rates: [
        { Prefix: "+61", PricePerSegment: "0.02" },
        { Prefix: "+614", PricePerSegment: "0.015" },
        { Prefix: "+614", PricePerSegment: "0.01", EffectiveFrom: t0 + HOUR },
      ],
    });
    await ok("PUT", "/admin/v1/RateCards/cost-b", { Rates: [{ Prefix: "+61", PricePerSegment: "0.018" }] });
    await ok("PUT", "/admin/v1/RateCards/cost-c", { Rates: [{ Prefix: "+44", PricePerSegment: "0.001" }] });
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  async function call(method: "GET" | "POST" | "PUT", url: string, payload?: object) {
    const res = await t.app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload });
    return { status: res.statusCode, body: res.json() };
  }
  async function ok(method: "GET" | "POST" | "PUT", url: string, payload?: object): Promise<any> {
    const r = await call(method, url, payload);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body;
  }
  /** The 400 of one CostCard problem. */
  const refused = (message: string, code = "InvalidParameter") => ({
    ResponseStatus: { ErrorCode: code, Message: message, Errors: [{ FieldName: "CostCard", ErrorCode: code, Message: message }] },
  });

  /** Sends one SMS, dispatches it, and returns its /v2 record and the operator's timeline. */
  async function sendAndDispatch(to: string, text = "costed"): Promise<{ record: any; timeline: any }> {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: tenant.ownedNumber, To: to, Text: text },
    });
    expect(res.statusCode, res.body).toBe(200);
    const sid = res.json().MessageSid;
    while ((await t.engine!.dispatcher.tick()) > 0);
    await submissionsWritten(t);
    const record = (await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).json();
    return { record, timeline: await ok("GET", `/admin/v1/Messages/${sid}/Timeline`) };
  }
  async function routes(table: object[]): Promise<void> {
    await ok("PUT", "/admin/v1/Routes", { Routes: table });
    await router.refresh();
  }

  let A: string;
  let B: string;
  let C: string;

  describe("a carrier's CostCard", () => {
    it('AddCarrier takes an existing card and answers with it; without one, CostCard is ""', async () => {
      const a = await ok("POST", "/admin/v1/Carriers", { Name: "A", Kind: "simulator", Url: "simulator://", CostCard: "cost-a" });
      expect(a).toEqual({
        CarrierSid: a.CarrierSid,
        Name: "A",
        Kind: "simulator",
        Url: "simulator://",
        Tps: 0,
        Window: 10,
        Link: "-",
        CostCard: "cost-a",
        Warning: expect.stringMatching(/^The route table is empty/),
      });
      A = a.CarrierSid;
      B = (await ok("POST", "/admin/v1/Carriers", { Name: "B", Kind: "simulator", Url: "simulator://", CostCard: "cost-b" })).CarrierSid;
      const c = await ok("POST", "/admin/v1/Carriers", { Name: "C", Kind: "simulator", Url: "simulator://" });
      expect(c.CostCard).toBe("");
      C = c.CarrierSid;
      const listed = (await ok("GET", "/admin/v1/Carriers")).Carriers;
      expect(listed.map((x: any) => [x.Name, x.CostCard])).toEqual([
        ["A", "cost-a"],
        ["B", "cost-b"],
        ["C", ""],
      ]);
      const stored = await db.orm.em.fork().execute(`select name, cost_card from carriers order by name`);
      expect(stored).toEqual([
        { name: "A", cost_card: "cost-a" },
        { name: "B", cost_card: "cost-b" },
        { name: "C", cost_card: null },
      ]);
    });

    it("refuses a CostCard no card has, or a name of the wrong shape, with a 400 naming CostCard; nothing is added or changed", async () => {
      const before = await ok("GET", "/admin/v1/Carriers");
      const cases: [string, object][] = [
        ["wholesale", refused('CostCard "wholesale" is not a rate card.')],
        ["bad name", refused(`CostCard must be 1 to 64 letters, digits, '.', '_' or '-'; got "bad name".`)],
      ];
      for (const [card, answer] of cases) {
        const add = await call("POST", "/admin/v1/Carriers", { Name: "D", Kind: "simulator", Url: "simulator://", CostCard: card });
        expect([add.status, add.body]).toEqual([400, answer]);
        const update = await call("POST", `/admin/v1/Carriers/${A}`, { CostCard: card, Window: 20 });
        expect([update.status, update.body]).toEqual([400, answer]);
      }
      // With another bad field, both are named.
      const both = await call("POST", "/admin/v1/Carriers", { Name: "D", Kind: "simulator", Url: "simulator://", CostCard: "nope", Window: 0 });
      expect([both.status, both.body.ResponseStatus.Errors.map((e: any) => e.FieldName)]).toEqual([400, ["Window", "CostCard"]]);
      expect(await ok("GET", "/admin/v1/Carriers")).toEqual(before);
    });

    it('UpdateCarrier: an absent CostCard stays, a new one replaces it, "" clears it', async () => {
      expect((await ok("POST", `/admin/v1/Carriers/${C}`, { Window: 12 })).CostCard).toBe("");
      expect((await ok("POST", `/admin/v1/Carriers/${C}`, { CostCard: "cost-c" })).CostCard).toBe("cost-c");
      expect((await ok("POST", `/admin/v1/Carriers/${C}`, { Tps: 5 })).CostCard).toBe("cost-c");
      const cleared = await ok("POST", `/admin/v1/Carriers/${C}`, { CostCard: "" });
      expect(cleared).toMatchObject({ CostCard: "", Window: 12, Tps: 5 });
      expect(await db.orm.em.fork().execute(`select cost_card from carriers where sid = '${C}'`)).toEqual([{ cost_card: null }]);
    });
  });

  describe("the message's Cost", () => {
    it("is segments times the carrier's rate for the destination at hand-over, longest prefix; on the timeline, never on /v2", async () => {
      await routes([{ Carriers: [A], Strategy: "Failover" }]);
      const one = await sendAndDispatch("+61412000001");
      expect(one.record).toMatchObject({ Carrier: "A", Status: expect.stringMatching(/^(Submitted|Delivered)$/) });
      expect(one.timeline.Cost).toBe("0.015");
      // /v2 never shows it: not as a field, not anywhere in the record.
      expect(Object.keys(one.record)).not.toContain("Cost");
      expect(JSON.stringify(one.record)).not.toMatch(/"Cost"/);
      expect(one.timeline.Message).not.toHaveProperty("Cost");
      const list = (await t.app.inject({ method: "GET", url: `/v2/Messages`, headers: { authorization: tenant.auth } })).body;
      expect(list).not.toMatch(/"Cost"/);
      // +612 has no longer prefix than +61 on cost-a; two segments (161 GSM-7 characters).
      const two = await sendAndDispatch("+61212000002", "x".repeat(161));
      expect([two.record.NumSegments, two.timeline.Cost]).toEqual([2, "0.04"]);
      const stored = await db.orm.em.fork().execute(`select cost::text as cost from messages where sid = '${two.record.MessageSid}'`);
      expect(stored).toEqual([{ cost: "40000" }]);
    });

    it("takes the rate in effect at hand-over: a future EffectiveFrom counts from its second", async () => {
      clock.set(new Date(T0.getTime() + HOUR * 1000 - 1));
      expect((await sendAndDispatch("+61412000003")).timeline.Cost).toBe("0.015");
      clock.set(new Date(T0.getTime() + HOUR * 1000));
      expect((await sendAndDispatch("+61412000004")).timeline.Cost).toBe("0.01");
    });

    it('is "" when the carrier has no CostCard, or its card no rate for the destination', async () => {
      await routes([
        { Prefix: "+44", Carriers: [A], Strategy: "Failover" },
        { Carriers: [C], Strategy: "Failover" },
      ]);
      const noCard = await sendAndDispatch("+61412000005");
      expect([noCard.record.Carrier, noCard.timeline.Cost]).toEqual(["C", ""]);
      const noRate = await sendAndDispatch("+447700900005");
      expect([noRate.record.Carrier, noRate.timeline.Cost]).toEqual(["A", ""]);
      expect(await db.orm.em.fork().execute(`select cost from messages where sid = '${noRate.record.MessageSid}'`)).toEqual([{ cost: null }]);
    });

    it('is "" on a message not yet handed to a carrier', async () => {
      const res = await t.app.inject({
        method: "POST",
        url: `/v2/Properties/${tenant.propertySid}/Messages`,
        headers: { authorization: tenant.auth },
        payload: { From: tenant.ownedNumber, To: "+61412000006", Text: "later", Schedule: Math.floor(clock.now().getTime() / 1000) + 600 },
      });
      expect(res.statusCode, res.body).toBe(200);
      const timeline = await ok("GET", `/admin/v1/Messages/${res.json().MessageSid}/Timeline`);
      expect([timeline.Message.Carrier, timeline.Cost]).toEqual(["", ""]);
    });
  });

  describe("LeastCost", () => {
    it("sends each message to the cheapest carrier for its destination; a carrier without a cost comes last", async () => {
      // C (no CostCard) is first in the route: LeastCost puts it after every carrier with a cost.
      await routes([{ Carriers: [C, B, A], Strategy: "LeastCost" }]);
      // +614: A 0.01 (since t0 + 1 h), B 0.018. +612: A 0.02, B 0.018.
      const mobile = await sendAndDispatch("+61412000007");
      expect([mobile.record.Carrier, mobile.timeline.Cost]).toEqual(["A", "0.01"]);
      const fixed = await sendAndDispatch("+61212000008");
      expect([fixed.record.Carrier, fixed.timeline.Cost]).toEqual(["B", "0.018"]);
      // Neither A nor B has a rate for +44: the route's order, C first.
      const elsewhere = await sendAndDispatch("+447700900009");
      expect([elsewhere.record.Carrier, elsewhere.timeline.Cost]).toEqual(["C", ""]);
    });

    it("a CostCard changed on a carrier counts from the next dispatch, without reopening its link", async () => {
      const opened = [...builds];
      await ok("POST", `/admin/v1/Carriers/${B}`, { CostCard: "cost-a" });
      await ok("POST", `/admin/v1/Carriers/${A}`, { CostCard: "cost-b" });
      await router.refresh();
      expect(builds).toEqual(opened);
      const r = await sendAndDispatch("+61212000010");
      // +612: B now 0.02 (cost-a), A 0.018 (cost-b).
      expect([r.record.Carrier, r.timeline.Cost]).toEqual(["A", "0.018"]);
    });

    it("a rate card replaced counts from the next dispatch, with no signal", async () => {
      await ok("PUT", "/admin/v1/RateCards/cost-a", { Rates: [{ Prefix: "+61", PricePerSegment: "0.005" }] });
      const r = await sendAndDispatch("+61212000011");
      expect([r.record.Carrier, r.timeline.Cost]).toEqual(["B", "0.005"]);
    });
  });
});
