/**
 * Issue 41 (9): destination permissions apply again when a queued message is dispatched, as its
 * account's SMS flag does: a scheduled message to a country the account may no longer send to (its
 * AllowedCountries narrowed since), or to a prefix the deployment blocks since (BLOCKED_PREFIXES
 * of the dispatching process), fails with DestinationNotAllowed instead of going out, and its
 * lease is released (it never reached a carrier).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimulatorCarrier } from "../../src/carriers/simulator.js";
import { dbKind } from "../support/db.js";
import { addPoolNumbers, admin, createTenant, createTestApp, SUBMISSIONS_AT_ONCE, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const secs = (d: Date) => Math.floor(d.getTime() / 1000);

describe(`destination permissions are checked again at dispatch (${dbKind()})`, () => {
  let t: TestApp;
  let sim: SimulatorCarrier;
  let a: Tenant;

  beforeAll(async () => {
    t = await createTestApp({
      now: T0,
      // The dispatching process blocks +23480 (a BLOCKED_PREFIXES set after the sends were accepted).
      engine: { ...SUBMISSIONS_AT_ONCE, destinations: { defaultAllowedCountries: [], blockedPrefixes: ["+23480"], allowPremium: true } },
      config: { sendRateLimit: 0 },
    });
    sim = t.carrier as SimulatorCarrier;
    a = await createTenant(t.app);
    await addPoolNumbers(t.app, 2, 60);
  }, 120_000);
  afterAll(() => t?.close());

  async function send(payload: Record<string, unknown>): Promise<string> {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/Messages`,
      headers: { authorization: a.auth },
      payload: { Text: "scheduled", Schedule: secs(t.clock.now()) + 8, ...payload },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().MessageSid;
  }

  async function record(sid: string): Promise<Record<string, unknown>> {
    const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: a.auth } });
    return res.json();
  }

  it("a message to NG scheduled 8 s ahead, the account restricted to GB meanwhile: Failed DestinationNotAllowed, nothing sent, its lease released", async () => {
    await admin(t.app, `/admin/v1/Accounts/${a.accountSid}`, { AllowedCountries: ["GB", "NG"] });
    const toNg = "+2348031234567";
    const toGb = "+447400123456";
    const ng = await send({ From: a.ownedNumber, To: toNg });
    const leased = await send({ From: "", To: "+2348031234568" });
    const gb = await send({ From: a.ownedNumber, To: toGb });
    await admin(t.app, `/admin/v1/Accounts/${a.accountSid}`, { AllowedCountries: ["GB"] });
    t.clock.advance(8000);
    while ((await t.engine!.dispatcher.tick()) > 0);
    expect(await record(ng)).toMatchObject({ Status: "Failed", ErrorCode: "DestinationNotAllowed", Submitted: 0 });
    expect(await record(leased)).toMatchObject({ Status: "Failed", ErrorCode: "DestinationNotAllowed", Submitted: 0 });
    expect(sim.handsetMessages(toNg)).toEqual([]);
    expect((await record(gb)).Status).toMatch(/^(Submitted|Delivered)$/);
    const leases = await t.db.orm.em.fork().execute<{ released: boolean }[]>("select released from leases where message_sid = ?", [leased]);
    expect(leases).toEqual([{ released: true }]);
  });

  it("a prefix the dispatching process blocks fails there too, with the reason on the record", async () => {
    await admin(t.app, `/admin/v1/Accounts/${a.accountSid}`, { AllowedCountries: [] });
    const to = "+2348051234567";
    const sid = await send({ From: a.ownedNumber, To: to });
    t.clock.advance(8000);
    while ((await t.engine!.dispatcher.tick()) > 0);
    expect(await record(sid)).toMatchObject({ Status: "Failed", ErrorCode: "DestinationNotAllowed" });
    const row = await t.db.orm.em.fork().execute<{ carrier_error: string }[]>("select carrier_error from messages where sid = ?", [sid]);
    expect(row[0].carrier_error).toMatch(/blocked prefix \+23480/);
    expect(sim.handsetMessages(to)).toEqual([]);
  });
});
