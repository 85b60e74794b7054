/**
 * Issue 41 (7): adding a carrier without a route no longer fails every later message NoRoute. While
 * the route table is empty the environment's carrier (the default route) takes every message;
 * AddCarrier's answer warns that the first route table replaces that default route; a message no
 * route matches fails NoRoute with the reason and the fix on its record; and a route table naming an
 * AccountSid that does not exist, or holding a route an earlier one shadows completely, is refused
 * with a 400 naming the route.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSimulatorCarrier } from "../../src/carriers/simulator.js";
import { ManualClock } from "../../src/common/clock.js";
import { createCarrierRouter, type CarrierRouter } from "../../src/delivery/carrier-router.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, submissionsWritten, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");

describe(`the default route while the route table is empty (${dbKind()})`, () => {
  let db: TestOrm;
  let t: TestApp;
  let router: CarrierRouter;
  let tenant: Tenant;
  const clock = new ManualClock(T0);

  beforeAll(async () => {
    db = await createTestOrm();
    const fallback = createSimulatorCarrier({ clock, reportDelayMs: 0 });
    router = createCarrierRouter({ orm: db.orm, fallback, build: async () => createSimulatorCarrier({ clock, reportDelayMs: 0 }), pollMs: 60_000 });
    t = await createTestApp({ db, clock, carrier: router, engine: true, config: { sendRateLimit: 0 } });
    tenant = await createTenant(t.app);
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  async function call(method: "GET" | "POST" | "PUT", url: string, payload?: object) {
    const res = await t.app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload });
    const json = res.json();
    return { status: res.statusCode, body: json?.ResponseStatus ?? json };
  }
  async function sendAndDispatch(to: string): Promise<Record<string, unknown>> {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: tenant.ownedNumber, To: to, Text: "after add-carrier" },
    });
    expect(res.statusCode, res.body).toBe(200);
    while ((await t.engine!.dispatcher.tick()) > 0);
    await submissionsWritten(t);
    const rec = await t.app.inject({ method: "GET", url: `/v2/Messages/${res.json().MessageSid}`, headers: { authorization: tenant.auth } });
    return rec.json();
  }

  let sandbox: string;

  it("add-carrier --name sandbox --kind simulator, as the docs say: AddCarrier warns, and 5 of 5 later sends still go out by the default route", async () => {
    const added = await call("POST", "/admin/v1/Carriers", { Name: "sandbox", Kind: "simulator", Url: "simulator://" });
    expect(added.status).toBe(200);
    sandbox = added.body.CarrierSid;
    await router.refresh();
    for (let i = 0; i < 5; i++) {
      const rec = await sendAndDispatch(`+4474001234${String(10 + i)}`);
      expect(rec).toMatchObject({ Status: expect.stringMatching(/^(Submitted|Delivered)$/), ErrorCode: "", Carrier: "default" });
    }
    expect(added.body.Warning).toMatch(
      /^The route table is empty: the environment's carrier \(the default route\) keeps taking every message and sandbox gets none/,
    );
    expect(added.body.Warning).toContain("end the table with a route without Prefix and AccountSid");
    // Every carrier row still gets its link: the operator sees its state before a route names it.
    expect(router.links().map((l) => l.name)).toEqual(["sandbox", "default"]);
  });

  it("a route table replaces the default route; a message no route matches fails NoRoute with the reason and the fix on its record", async () => {
    const put = await call("PUT", "/admin/v1/Routes", { Routes: [{ Prefix: "+61", Carriers: [sandbox], Strategy: "Failover" }] });
    expect(put.status).toBe(200);
    await router.refresh();
    expect((await sendAndDispatch("+61412000301")).Carrier).toBe("sandbox");
    const failed = await sendAndDispatch("+447400123499");
    expect(failed).toMatchObject({ Status: "Failed", ErrorCode: "NoRoute" });
    expect(failed.CarrierError).toBe(
      `No route matches To +447400123499 from account ${tenant.accountSid}: none of the route table's 1 route(s) has a Prefix and AccountSid that match. ` +
        "Add one (PUT /admin/v1/Routes, npx switchboard replace-routes), for instance a last route without Prefix and AccountSid.",
    );
    // Added once a route table is set: no warning.
    const second = await call("POST", "/admin/v1/Carriers", { Name: "sandbox-2", Kind: "simulator", Url: "simulator://" });
    expect(second.status).toBe(200);
    expect(second.body.Warning).toBeUndefined();
  });

  it("an empty table again gives the environment's carrier every message", async () => {
    expect((await call("PUT", "/admin/v1/Routes", { Routes: [] })).status).toBe(200);
    await router.refresh();
    expect((await sendAndDispatch("+447400123498")).Carrier).toBe("default");
  });

  it("refuses a route naming an AccountSid that does not exist, with a 400 naming the field", async () => {
    const before = (await call("GET", "/admin/v1/Routes")).body;
    const r = await call("PUT", "/admin/v1/Routes", {
      Routes: [
        { AccountSid: tenant.accountSid, Carriers: [sandbox], Strategy: "Failover" },
        { AccountSid: "AC000000000000000000000000000001", Carriers: [sandbox], Strategy: "Failover" },
      ],
    });
    expect([r.status, r.body.ErrorCode, r.body.Errors]).toEqual([
      400,
      "InvalidParameter",
      [{ FieldName: "Routes[1].AccountSid", ErrorCode: "InvalidParameter", Message: "Routes[1].AccountSid: no account AC000000000000000000000000000001." }],
    ]);
    expect((await call("GET", "/admin/v1/Routes")).body).toEqual(before);
  });

  it("refuses a route an earlier one shadows completely, naming the route that shadows it", async () => {
    const cases: [object[], string, string][] = [
      [
        [
          { Carriers: [sandbox], Strategy: "Failover" },
          { Prefix: "+61", Carriers: [sandbox], Strategy: "Failover" },
        ],
        "Routes[1]",
        "Routes[1] (Prefix +61, any account) would never be used: Routes[0] (any destination, any account) comes first and matches every message it matches. Remove it, or move it before Routes[0].",
      ],
      [
        [
          { Prefix: "+61", Carriers: [sandbox], Strategy: "Failover" },
          { Prefix: "+614", AccountSid: tenant.accountSid, Carriers: [sandbox], Strategy: "Failover" },
        ],
        "Routes[1]",
        `Routes[1] (Prefix +614, AccountSid ${tenant.accountSid}) would never be used: Routes[0] (Prefix +61, any account) comes first and matches every message it matches. Remove it, or move it before Routes[0].`,
      ],
      [
        [
          { Prefix: "+44", AccountSid: tenant.accountSid, Carriers: [sandbox], Strategy: "Failover" },
          { Prefix: "+61", Carriers: [sandbox], Strategy: "Failover" },
          { Prefix: "+44", AccountSid: tenant.accountSid, Carriers: [sandbox], Strategy: "RoundRobin" },
        ],
        "Routes[2]",
        `Routes[2] (Prefix +44, AccountSid ${tenant.accountSid}) would never be used: Routes[0] (Prefix +44, AccountSid ${tenant.accountSid}) comes first and matches every message it matches. Remove it, or move it before Routes[0].`,
      ],
    ];
    for (const [routes, field, message] of cases) {
      const r = await call("PUT", "/admin/v1/Routes", { Routes: routes });
      expect([r.status, r.body.ErrorCode, r.body.Errors], JSON.stringify(routes)).toEqual([
        400,
        "InvalidParameter",
        [{ FieldName: field, ErrorCode: "InvalidParameter", Message: message }],
      ]);
    }
    // Narrower first, then broader: each is used, so the table is taken.
    const ok = await call("PUT", "/admin/v1/Routes", {
      Routes: [
        { Prefix: "+614", AccountSid: tenant.accountSid, Carriers: [sandbox], Strategy: "Failover" },
        { Prefix: "+61", AccountSid: tenant.accountSid, Carriers: [sandbox], Strategy: "Failover" },
        { Prefix: "+61", Carriers: [sandbox], Strategy: "Failover" },
        { Carriers: [sandbox], Strategy: "Failover" },
      ],
    });
    expect(ok.status).toBe(200);
  });
});
