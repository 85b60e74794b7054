/**
 * The operator's traffic views (src/admin/operator-views.ts) over REST, against a real webhook
 * receiver: the message search and its filters, a message's timeline with its webhook attempts,
 * the retry of a Failed webhook call (and the loser's answer), the per-minute figures with the
 * queue and the webhook backlog, and an account's opt-out list. Exact JSON, on the manual clock.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { startReceiver, type Receiver } from "../support/webhook-receiver.js";

// Standard Webhooks signs with the clock's time; the receiver does not verify, so any start will do.
const T0 = new Date("2026-11-22T12:00:30Z");
const secs = (d: Date) => Math.floor(d.getTime() / 1000);

let t: TestApp;
let tenant: Tenant;
let other: Tenant;
let rx: Receiver;

async function get(url: string): Promise<{ status: number; body: any }> {
  const res = await t.app.inject({ method: "GET", url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return { status: res.statusCode, body: res.json() };
}

async function post(url: string, payload: object = {}): Promise<{ status: number; body: any }> {
  const res = await t.app.inject({ method: "POST", url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload });
  return { status: res.statusCode, body: res.json() };
}

async function send(who: Tenant, body: Record<string, unknown>): Promise<any> {
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Properties/${who.propertySid}/Messages`,
    headers: { authorization: who.auth },
    payload: { From: who.ownedNumber, Text: "hello", ...body },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function record(who: Tenant, sid: string): Promise<any> {
  const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: who.auth } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const fieldError = (FieldName: string, Message: string) => ({
  ResponseStatus: { ErrorCode: "InvalidParameter", Message, Errors: [{ FieldName, ErrorCode: "InvalidParameter", Message }] },
});

describe(`operator views (${dbKind()})`, () => {
  let delivered: any;

  beforeAll(async () => {
    rx = await startReceiver();
    // A call that fails once is given up at once (no 24 hours of retries), so Retry has a Failed call.
    t = await createTestApp({ now: T0, webhookAllowPrivate: true, engine: { webhooks: { retryForMs: 0 } } });
    tenant = await createTenant(t.app);
    other = await createTenant(t.app);
    rx.answer = () => 500;
    delivered = await send(tenant, { To: "+447700900101", DeliveryReceiptWebhookUri: rx.url("/dr") });
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    await vi.waitFor(async () => expect((await record(tenant, delivered.MessageSid)).Status).toBe("Delivered"), { timeout: 5000, interval: 10 });
    expect(await t.engine!.webhooks.tick()).toBe(1);
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  describe("GET /admin/v1/Messages (SearchMessages)", () => {
    it("finds a message by To, as its account reads it", async () => {
      const res = await get(`/admin/v1/Messages?To=${encodeURIComponent("+447700900101")}`);
      expect(res.status).toBe(200);
      expect(res.body).toStrictEqual({ Messages: [await record(tenant, delivered.MessageSid)], TotalCount: 1 });
    });

    it("combines its filters and pages newest first", async () => {
      t.clock.set(new Date(T0.getTime() + 1000));
      const later = await send(other, { To: "+447700900102" });
      const all = await get("/admin/v1/Messages");
      expect(all.body.TotalCount).toBe(2);
      expect(all.body.Messages.map((m: any) => m.MessageSid)).toStrictEqual([later.MessageSid, delivered.MessageSid]);
      const paged = await get("/admin/v1/Messages?Results_Count=1&Results_Skip=1");
      expect(paged.body.Messages.map((m: any) => m.MessageSid)).toStrictEqual([delivered.MessageSid]);
      expect(paged.body.TotalCount).toBe(2);
      const sids = async (q: string) => (await get(`/admin/v1/Messages?${q}`)).body.Messages.map((m: any) => m.MessageSid);
      expect(await sids(`AccountSid=${other.accountSid}`)).toStrictEqual([later.MessageSid]);
      expect(await sids(`PropertySid=${tenant.propertySid}`)).toStrictEqual([delivered.MessageSid]);
      expect(await sids(`Status=Processing`)).toStrictEqual([later.MessageSid]);
      expect(await sids(`Status=Delivered&AccountSid=${other.accountSid}`)).toStrictEqual([]);
      // [CreatedFrom, CreatedTo): the boundaries are exact seconds.
      expect(await sids(`CreatedFrom=${secs(T0) + 1}`)).toStrictEqual([later.MessageSid]);
      expect(await sids(`CreatedTo=${secs(T0) + 1}`)).toStrictEqual([delivered.MessageSid]);
      expect(await sids(`CreatedFrom=${secs(T0)}&CreatedTo=${secs(T0) + 2}`)).toStrictEqual([later.MessageSid, delivered.MessageSid]);
    });

    it("names the field of a bad filter", async () => {
      expect(await get("/admin/v1/Messages?To=12345")).toStrictEqual({
        status: 400,
        body: fieldError("To", 'To "12345" is not an E164 number such as +14155550123.'),
      });
      expect(await get("/admin/v1/Messages?Status=Sent")).toStrictEqual({
        status: 400,
        body: fieldError("Status", 'Status "Sent" is not one of Scheduled, Processing, Submitted, Delivered, Failed, Canceled, Received.'),
      });
      expect((await get("/admin/v1/Messages?AccountSid=AC1")).body.ResponseStatus.Errors[0].FieldName).toBe("AccountSid");
      expect((await get("/admin/v1/Messages?CreatedFrom=253402300800")).body.ResponseStatus.Errors[0].FieldName).toBe("CreatedFrom");
      expect((await get("/admin/v1/Messages?Results_Count=1001")).body.ResponseStatus.Errors[0].FieldName).toBe("Results_Count");
    });
  });

  describe("GET /admin/v1/Messages/{MessageSid}/Timeline", () => {
    it("shows the record, each step in order and every webhook attempt", async () => {
      const res = await get(`/admin/v1/Messages/${delivered.MessageSid}/Timeline`);
      expect(res.status).toBe(200);
      const rec = await record(tenant, delivered.MessageSid);
      expect(res.body.Message).toStrictEqual(rec);
      expect(res.body.Events.map((e: any) => e.Kind)).toStrictEqual(["Accepted", "Submitted", "Delivered", "WebhookAttempt"]);
      expect(res.body.Events[0]).toStrictEqual({ At: secs(T0), Kind: "Accepted", Detail: `From ${tenant.ownedNumber} to +447700900101, 1 segment(s)` });
      expect(res.body.Events[1]).toMatchObject({ At: secs(T0), Kind: "Submitted" });
      // The test app has no route table: the deployment's carrier took it, under no name.
      expect(rec.Carrier).toBe("");
      expect(res.body.Events[1].Detail).toMatch(/^To the carrier, reference [0-9a-f-]{36}$/);
      expect(res.body.Events[2]).toStrictEqual({ At: secs(T0), Kind: "Delivered", Detail: "Delivery receipt: delivered" });
      expect(res.body.Events[3].Detail).toMatch(new RegExp(`^DeliveryReceipt POST ${rx.url("/dr").replace(/[.?]/g, "\\$&")}: HTTP 500 in \\d+ ms \\(.+\\)$`));
      expect(res.body.Webhooks).toHaveLength(1);
      expect(res.body.Webhooks[0]).toMatchObject({ EventType: "DeliveryReceipt", Status: "Failed", Attempts: 1, NextAttempt: 0, Delivered: 0 });
      expect(res.body.Webhooks[0].AttemptLog).toHaveLength(1);
      expect(res.body.Webhooks[0].AttemptLog[0].StatusCode).toBe(500);
      expect(res.body.ReplyChain).toStrictEqual([]);
      expect(res.body.LeaseSid).toBe("");
      expect(res.body.DispatchAttempts).toBe(1);
    });

    it("is 404 for a message that does not exist", async () => {
      const sid = `MG${"0".repeat(30)}`;
      expect(await get(`/admin/v1/Messages/${sid}/Timeline`)).toStrictEqual({
        status: 404,
        body: { ResponseStatus: { ErrorCode: "NotFound", Message: `Message ${sid} was not found.`, Errors: [] } },
      });
    });
  });

  describe("POST /admin/v1/Webhooks/{WebhookId}/Retry", () => {
    it("queues a Failed call again, due now; a second retry gets WebhookNotFailed; it is delivered on the next round", async () => {
      const [call] = (await get(`/admin/v1/Messages/${delivered.MessageSid}/Timeline`)).body.Webhooks;
      const now = new Date(T0.getTime() + 60_000);
      t.clock.set(now);
      const first = await post(`/admin/v1/Webhooks/${call.WebhookId}/Retry`);
      expect(first.status).toBe(200);
      expect(first.body).toStrictEqual({ ...call, Status: "Pending", NextAttempt: secs(now) });
      const second = await post(`/admin/v1/Webhooks/${call.WebhookId}/Retry`);
      expect(second).toStrictEqual({
        status: 409,
        body: {
          ResponseStatus: {
            ErrorCode: "WebhookNotFailed",
            Message: `Webhook call ${call.WebhookId} is Pending; only a Failed call can be retried.`,
            Errors: [],
          },
        },
      });
      rx.answer = () => 200;
      expect(await t.engine!.webhooks.tick()).toBe(1);
      const after = (await get(`/admin/v1/Messages/${delivered.MessageSid}/Webhooks`)).body.Deliveries[0];
      expect(after).toMatchObject({ Status: "Delivered", Attempts: 2, Delivered: secs(now) });
      expect(after.AttemptLog.map((a: any) => a.StatusCode)).toStrictEqual([500, 200]);
      expect((await post(`/admin/v1/Webhooks/${call.WebhookId}/Retry`)).body.ResponseStatus.Message).toBe(
        `Webhook call ${call.WebhookId} is Delivered; only a Failed call can be retried.`,
      );
    });

    it("is 404 for a call that does not exist", async () => {
      expect(await post("/admin/v1/Webhooks/msg_nope/Retry")).toStrictEqual({
        status: 404,
        body: { ResponseStatus: { ErrorCode: "NotFound", Message: "Webhook call msg_nope was not found.", Errors: [] } },
      });
    });
  });

  describe("GET /admin/v1/Stats", () => {
    it("counts per minute over the last hour, with the queue and the webhook backlog", async () => {
      // Now 12:01:00: the minute of 12:00 holds the delivered send and the other tenant's queued one.
      t.clock.set(new Date("2026-11-22T12:01:00Z"));
      const res = await get("/admin/v1/Stats");
      expect(res.status).toBe(200);
      const b = res.body;
      expect(b.Now).toBe(secs(new Date("2026-11-22T12:01:00Z")));
      expect(b.Minutes).toHaveLength(60);
      expect(b.Minutes[0].Minute).toBe(secs(new Date("2026-11-22T11:02:00Z")));
      expect(b.Minutes[59]).toStrictEqual({ Minute: secs(new Date("2026-11-22T12:01:00Z")), Accepted: 0, Submitted: 0, Delivered: 0, Failed: 0 });
      expect(b.Minutes[58]).toStrictEqual({ Minute: secs(new Date("2026-11-22T12:00:00Z")), Accepted: 2, Submitted: 1, Delivered: 1, Failed: 0 });
      expect(b.Minutes.slice(0, 58).every((m: any) => m.Accepted + m.Submitted + m.Delivered + m.Failed === 0)).toBe(true);
      // The other tenant's message has been due since 12:00:31.
      expect({ ...b, Minutes: undefined }).toStrictEqual({
        Now: b.Now,
        Minutes: undefined,
        QueueDepth: 1,
        DispatcherLagSeconds: 29,
        ScheduledLater: 0,
        WebhookBacklog: 0,
        WebhooksDue: 0,
        WebhookLagSeconds: 0,
      });
    });

    it("counts a message scheduled for later apart from the queue", async () => {
      await send(other, { To: "+447700900103", Schedule: secs(new Date("2026-11-22T13:00:00Z")) });
      const b = (await get("/admin/v1/Stats")).body;
      expect([b.QueueDepth, b.ScheduledLater]).toStrictEqual([1, 1]);
    });
  });

  describe("GET /admin/v1/Accounts/{AccountSid}/OptOuts", () => {
    it("lists the account's opt-outs, and 404 for an unknown account", async () => {
      const add = await t.app.inject({
        method: "POST",
        url: `/v2/Accounts/${tenant.accountSid}/OptOuts`,
        headers: { authorization: tenant.auth },
        payload: { Number: "+61412345678" },
      });
      expect(add.statusCode, add.body).toBe(200);
      expect(await get(`/admin/v1/Accounts/${tenant.accountSid}/OptOuts`)).toStrictEqual({
        status: 200,
        body: { OptOuts: [{ Number: "+61412345678", Source: "Api", Created: secs(t.clock.now()) }], TotalCount: 1 },
      });
      expect((await get(`/admin/v1/Accounts/${other.accountSid}/OptOuts`)).body).toStrictEqual({ OptOuts: [], TotalCount: 0 });
      const sid = `AC${"0".repeat(30)}`;
      expect((await get(`/admin/v1/Accounts/${sid}/OptOuts`)).status).toBe(404);
    });
  });
});
