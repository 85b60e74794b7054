/**
 * Issue 27 (7): an operator who disables an account or a property stops its queue. Its queued
 * messages fail with SmsNotEnabled when they come due (the check is at dispatch, so re-enabling
 * before then lets them go), and CancelQueued cancels every message of an account not yet handed
 * to a carrier.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Carrier } from "../../src/delivery/carrier.js";
import type { SimulatorCarrier } from "../../src/carriers/simulator.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, sendOk, SUBMISSIONS_AT_ONCE, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const secs = (d: Date) => Math.floor(d.getTime() / 1000);

let seq = 0;
const recipient = () => `+447911${String(700_000 + ++seq)}`;

describe(`a disabled account or property stops its queue (${dbKind()})`, () => {
  let t: TestApp;
  let sim: SimulatorCarrier;

  beforeAll(async () => {
    t = await createTestApp({ now: T0, engine: true });
    sim = t.carrier as SimulatorCarrier;
  });
  afterAll(() => t?.close());

  /** Five sends scheduled 4 s ahead, the first asking for a delivery receipt webhook. */
  async function fiveScheduled(tenant: Tenant): Promise<{ sid: string; to: string }[]> {
    const schedule = secs(t.clock.now()) + 4;
    const sent: { sid: string; to: string }[] = [];
    for (let i = 0; i < 5; i++) {
      const to = recipient();
      const res = await t.app.inject({
        method: "POST",
        url: `/v2/Properties/${tenant.propertySid}/Messages`,
        headers: { authorization: tenant.auth },
        payload: {
          From: tenant.ownedNumber,
          To: to,
          Text: `queued ${i}`,
          Schedule: schedule,
          ...(i === 0 ? { DeliveryReceiptWebhookUri: "https://receipts.example.com/dr" } : {}),
        },
      });
      expect(res.statusCode, res.body).toBe(200);
      sent.push({ sid: res.json().MessageSid, to });
    }
    return sent;
  }

  async function record(tenant: Tenant, sid: string): Promise<Record<string, unknown>> {
    const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }

  /** Lets the due messages go: the clock passes their Schedule and the dispatcher runs until idle. */
  async function dispatchDue(): Promise<void> {
    t.clock.advance(4000);
    while ((await t.engine!.dispatcher.tick()) > 0);
  }

  async function expectFailedNotEnabled(tenant: Tenant, sent: { sid: string; to: string }[]): Promise<void> {
    for (const { sid, to } of sent) {
      expect(await record(tenant, sid)).toMatchObject({ MessageSid: sid, Status: "Failed", ErrorCode: "SmsNotEnabled", Submitted: 0, Delivered: 0 });
      expect(sim.handsetMessages(to)).toEqual([]);
    }
    // The one that asked for a receipt gets it, as for any failure.
    const hooks = await t.db.orm.em
      .fork()
      .execute<{ event_type: string; payload: unknown }[]>("select event_type, payload from webhook_deliveries where message_sid = ?", [sent[0].sid]);
    expect(hooks).toHaveLength(1);
    const payload = typeof hooks[0].payload === "string" ? JSON.parse(hooks[0].payload) : hooks[0].payload;
    expect(payload).toMatchObject({
      Type: "DeliveryReceipt",
      MessageSid: sent[0].sid,
      AccountSid: tenant.accountSid,
      Status: "Failed",
      ErrorCode: "SmsNotEnabled",
    });
  }

  it("disabling the account fails its five scheduled messages with SmsNotEnabled at dispatch; none reaches a handset", async () => {
    const tenant = await createTenant(t.app);
    const sent = await fiveScheduled(tenant);
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { SmsEnabled: false });
    await dispatchDue();
    await expectFailedNotEnabled(tenant, sent);
  });

  it("disabling the property does the same", async () => {
    const tenant = await createTenant(t.app);
    const sent = await fiveScheduled(tenant);
    await admin(t.app, `/admin/v1/Properties/${tenant.propertySid}`, { SmsEnabled: false });
    await dispatchDue();
    await expectFailedNotEnabled(tenant, sent);
  });

  it("re-enabling before the messages are due lets them go out", async () => {
    const tenant = await createTenant(t.app);
    const sent = await fiveScheduled(tenant);
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { SmsEnabled: false });
    await admin(t.app, `/admin/v1/Properties/${tenant.propertySid}`, { SmsEnabled: false });
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { SmsEnabled: true });
    await admin(t.app, `/admin/v1/Properties/${tenant.propertySid}`, { SmsEnabled: true });
    await dispatchDue();
    for (const { sid, to } of sent) {
      await expect.poll(async () => (await record(tenant, sid)).Status).toBe("Delivered");
      expect((await record(tenant, sid)).ErrorCode).toBe("");
      expect(sim.handsetMessages(to).map((m) => m.messageSid)).toEqual([sid]);
    }
  });
});

/** A carrier that accepts everything and never reports: a submitted message stays Submitted. */
const silentCarrier: Carrier = {
  name: "silent",
  submit: async (sms) => ({ carrierRef: `ref-${sms.messageSid}` }),
  start: async () => undefined,
  stop: async () => undefined,
};

describe(`CancelQueued (${dbKind()})`, () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ now: T0, engine: SUBMISSIONS_AT_ONCE, carrier: silentCarrier });
  });
  afterAll(() => t?.close());

  const send = (tenant: Tenant, body: Record<string, unknown>) => sendOk(t.app, tenant, { To: recipient(), ...body });

  const status = async (tenant: Tenant, sid: string) =>
    (await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).json();

  it("over REST cancels every message not yet handed to a carrier, counts them, and leaves submitted ones and other accounts alone", async () => {
    const tenant = await createTenant(t.app);
    const other = await createTenant(t.app);
    const later = secs(t.clock.now()) + 3600;
    // Submitted before the call: handed to the carrier, so no longer cancelable.
    const submitted = await send(tenant, {});
    while ((await t.engine!.dispatcher.tick()) > 0);
    expect((await status(tenant, submitted)).Status).toBe("Submitted");
    // Three scheduled, one due now but not yet claimed (Processing).
    const scheduled = [await send(tenant, { Schedule: later }), await send(tenant, { Schedule: later }), await send(tenant, { Schedule: later })];
    const due = await send(tenant, {});
    expect((await status(tenant, due)).Status).toBe("Processing");
    const others = await send(other, { Schedule: later });

    const res = await t.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${tenant.accountSid}/CancelQueued`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: {},
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ AccountSid: tenant.accountSid, Canceled: 4 });
    for (const sid of [...scheduled, due]) expect((await status(tenant, sid)).Status).toBe("Canceled");
    expect((await status(tenant, submitted)).Status).toBe("Submitted");
    expect((await status(other, others)).Status).toBe("Scheduled");

    // Nothing left to cancel, and nothing canceled is sent when its time comes.
    t.clock.advance(3_600_000);
    expect(await t.engine!.dispatcher.tick()).toBe(1); // the other account's
    const again = await t.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${tenant.accountSid}/CancelQueued`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: {},
    });
    expect(again.json()).toEqual({ AccountSid: tenant.accountSid, Canceled: 0 });
  });

  it("over Connect JSON answers the same, and an unknown account is 404 NotFound", async () => {
    const tenant = await createTenant(t.app);
    const scheduled = await send(tenant, { Schedule: secs(t.clock.now()) + 60 });
    const res = await t.app.inject({
      method: "POST",
      url: "/switchboard.admin.v1.AdminService/CancelQueued",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      payload: { AccountSid: tenant.accountSid },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ AccountSid: tenant.accountSid, Canceled: 1 });
    expect((await status(tenant, scheduled)).Status).toBe("Canceled");

    const unknown = `AC${"0".repeat(30)}`;
    const rest = await t.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${unknown}/CancelQueued`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: {},
    });
    expect(rest.statusCode, rest.body).toBe(404);
    expect(rest.json().ResponseStatus).toMatchObject({ ErrorCode: "NotFound" });
    const rpc = await t.app.inject({
      method: "POST",
      url: "/switchboard.admin.v1.AdminService/CancelQueued",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      payload: { AccountSid: unknown },
    });
    expect(rpc.statusCode, rpc.body).toBe(404);
    expect(rpc.json().code).toBe("not_found");
  });

  it("needs the operator token", async () => {
    const tenant = await createTenant(t.app);
    const res = await t.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${tenant.accountSid}/CancelQueued`,
      headers: { authorization: tenant.auth },
      payload: {},
    });
    expect(res.statusCode, res.body).toBe(401);
    expect(res.json().ResponseStatus.ErrorCode).toBe("Unauthorized");
  });
});
