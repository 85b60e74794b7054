/**
 * Issue 33 (the contract's "Retention and redaction"): retention and redaction. With an injected clock, on both databases:
 * messages past retention go with their webhook calls and attempts, e-mails and Idempotency-Keys;
 * a queued or in-flight message stays whatever its age; an account's RetentionDays overrides the
 * deployment's MESSAGE_RETENTION_DAYS; RedactAfterDays empties Text on every wire; two purges at
 * once never take the same rows.
 */
import type { AddressInfo } from "node:net";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { ManualClock } from "../../src/common/clock.js";
import { createRetentionPurge } from "../../src/delivery/retention.js";
import { enqueueWebhook } from "../../src/webhooks/outbox.js";
import { redactExpiredTexts } from "../../src/messaging/message-retention-store.js";
import { startReceiver, type Receiver } from "../support/webhook-receiver.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, addPoolNumbers, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const DAY = 86_400_000;

let seq = 0;
const usNumber = () => `+1415555${String(1000 + ++seq).padStart(4, "0")}`;
const ukNumber = () => `+447911${String(700_000 + ++seq)}`;

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver?.close());

async function rig(defaultDays: number | null): Promise<TestApp> {
  return createTestApp({ now: T0, webhookAllowPrivate: true, engine: { retention: { defaultDays, batch: 2, pauseMs: 0 } } });
}

async function send(t: TestApp, tenant: Tenant, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: tenant.auth, ...headers },
    payload: { From: tenant.ownedNumber, To: ukNumber(), Text: "Your code is 424242", ...body },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { MessageSid: string; From: string; To: string; Text: string };
}

async function getRecord(t: TestApp, tenant: Tenant, sid: string) {
  return t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
}

/** Submits every due message and waits for the simulator's reports, then makes the due webhook calls and e-mails. */
async function drain(t: TestApp): Promise<void> {
  while ((await t.engine!.dispatcher.tick()) > 0);
  const em = t.db.orm.em.fork();
  await expect
    .poll(async () => Number((await em.execute<{ n: string }[]>("select count(*) as n from messages where status in ('Processing', 'Submitted')"))[0].n), {
      timeout: 10_000,
    })
    .toBe(0);
  await t.engine!.webhooks.tick();
  await t.engine!.webhooks.drain();
  await t.engine!.mail.tick();
}

async function count(t: TestApp, sql: string, params: unknown[] = []): Promise<number> {
  const rows = await t.db.orm.em.fork().execute<{ n: string }[]>(sql, params);
  return Number(rows[0].n);
}

async function setAccount(t: TestApp, accountSid: string, body: Record<string, unknown>) {
  return admin(t.app, `/admin/v1/Accounts/${accountSid}`, body);
}

describe(`retention (${dbKind()})`, () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it(
    "deletes messages past RetentionDays with their webhook calls, attempts, e-mails and keys; keeps queued and in-flight ones",
    { timeout: 60_000 },
    async () => {
      t = await rig(null);
      const tenant = await createTenant(t.app);
      const pool = await addPoolNumbers(t.app, 2, 40);
      expect(await setAccount(t, tenant.accountSid, { RetentionDays: 30 })).toMatchObject({ AccountSid: tenant.accountSid, RetentionDays: 30 });

      // A leased send with a receipt webhook, a reply forwarded by e-mail and webhook, and an Idempotency-Key.
      const handset = usNumber();
      const out = await send(
        t,
        tenant,
        { From: "", To: handset, DeliveryReceiptWebhookUri: receiver.url("/dr"), ForwardToEmail: "desk@example.com", WebhookUri: receiver.url("/reply") },
        { "idempotency-key": "order-1" },
      );
      expect(pool).toContain(out.From);
      await drain(t);
      const inbound = await admin(t.app, "/admin/v1/Simulator/Inbound", { From: handset, To: out.From, Text: "Yes please" });
      await drain(t);
      const old = [out.MessageSid, inbound.MessageSid];
      const bySids = `message_sid = any(array['${old.join("','")}'])`;
      expect(await count(t, `select count(*) as n from webhook_deliveries where ${bySids} and status = 'Delivered'`)).toBe(2);
      expect(await count(t, `select count(*) as n from webhook_attempts where delivery_id in (select id from webhook_deliveries where ${bySids})`)).toBe(2);
      expect(await count(t, `select count(*) as n from emails where ${bySids}`)).toBe(1);
      expect(await count(t, `select count(*) as n from idempotency_keys where ${bySids}`)).toBe(1);
      const leases = await count(t, "select count(*) as n from leases");
      expect(leases).toBe(1);

      // Queued (never dispatched) and in flight (Submitted, no report yet), both as old.
      const queued = await send(t, tenant, {});
      const inFlight = await send(t, tenant, {});
      await t.db.orm.em.fork().execute("update messages set status = 'Submitted', submitted_at = created_at where sid = ?", [inFlight.MessageSid]);

      // Day 29: nothing is due.
      t.clock.advance(29 * DAY);
      expect(await t.engine!.retention.pass()).toStrictEqual({ purged: 0, redacted: 0, webhooks: 0, emails: 0, keys: 0 });

      // Day 31: the two settled messages go with everything hanging off them.
      t.clock.advance(2 * DAY);
      expect(await t.engine!.retention.pass()).toStrictEqual({ purged: 2, redacted: 0, webhooks: 2, emails: 1, keys: 1 });
      for (const sid of old) expect((await getRecord(t, tenant, sid)).statusCode).toBe(404);
      expect(await count(t, `select count(*) as n from messages where sid = any(array['${old.join("','")}'])`)).toBe(0);
      expect(await count(t, `select count(*) as n from webhook_deliveries where ${bySids}`)).toBe(0);
      expect(await count(t, "select count(*) as n from webhook_attempts")).toBe(0);
      expect(await count(t, "select count(*) as n from emails")).toBe(0);
      expect(await count(t, "select count(*) as n from idempotency_keys")).toBe(0);
      // Leases keep their own lifetime.
      expect(await count(t, "select count(*) as n from leases")).toBe(leases);
      // The queued and in-flight messages stay, whatever their age.
      expect((await getRecord(t, tenant, queued.MessageSid)).json()).toMatchObject({ Status: "Processing", Text: "Your code is 424242" });
      expect((await getRecord(t, tenant, inFlight.MessageSid)).json()).toMatchObject({ Status: "Submitted" });
      expect(t.engine!.retention.totals()).toMatchObject({ purged: 2, redacted: 0 });

      // Once settled (the queued one sent, the in-flight one's report come), they go at the next pass; a second pass finds nothing.
      await t.db.orm.em.fork().execute("update messages set status = 'Delivered', delivered_at = ? where sid = ?", [t.clock.now(), inFlight.MessageSid]);
      await drain(t);
      expect(await t.engine!.retention.pass()).toMatchObject({ purged: 2 });
      expect(await t.engine!.retention.pass()).toMatchObject({ purged: 0 });
      expect(await count(t, "select count(*) as n from messages")).toBe(0);

      // The purge's metrics.
      const metrics = await t.app.inject({ method: "GET", url: "/metrics" });
      expect(metrics.body).toMatch(/^switchboard_oldest_message_age_seconds 0$/m);
    },
  );

  it("keeps a delivered message whose receipt webhook is still being retried, until the call is settled", { timeout: 60_000 }, async () => {
    const tenant = await createTenant(t.app);
    await setAccount(t, tenant.accountSid, { RetentionDays: 1, RedactAfterDays: 1 });
    receiver.answer = (_n, req) => (req.url.startsWith("/down") ? 503 : 200);
    const m = await send(t, tenant, { DeliveryReceiptWebhookUri: receiver.url("/down") });
    await drain(t);
    expect(await count(t, "select count(*) as n from webhook_deliveries where message_sid = ? and status = 'Pending'", [m.MessageSid])).toBe(1);
    t.clock.advance(2 * DAY);
    expect(await t.engine!.retention.pass()).toMatchObject({ purged: 0, redacted: 0 });
    expect((await getRecord(t, tenant, m.MessageSid)).json()).toMatchObject({ Status: "Delivered", Text: "Your code is 424242", Redacted: false });
    await t.db.orm.em.fork().execute("update webhook_deliveries set status = 'Failed' where message_sid = ?", [m.MessageSid]);
    expect(await t.engine!.retention.pass()).toMatchObject({ purged: 1, webhooks: 1 });
    expect((await getRecord(t, tenant, m.MessageSid)).statusCode).toBe(404);
  });
});

describe(`retention settings (${dbKind()})`, () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it("an account's RetentionDays overrides MESSAGE_RETENTION_DAYS, shorter or longer; 0 clears it", { timeout: 60_000 }, async () => {
    t = await rig(10);
    const [byDefault, longer, shorter, cleared] = [await createTenant(t.app), await createTenant(t.app), await createTenant(t.app), await createTenant(t.app)];
    await setAccount(t, longer.accountSid, { RetentionDays: 30 });
    await setAccount(t, shorter.accountSid, { RetentionDays: 5 });
    await setAccount(t, cleared.accountSid, { RetentionDays: 3 });
    expect(await setAccount(t, cleared.accountSid, { RetentionDays: 0 })).not.toHaveProperty("RetentionDays");
    const sids = new Map<Tenant, string>();
    for (const tenant of [byDefault, longer, shorter, cleared]) sids.set(tenant, (await send(t, tenant, {})).MessageSid);
    await drain(t);
    const alive = async (tenant: Tenant) => (await getRecord(t, tenant, sids.get(tenant)!)).statusCode === 200;

    t.clock.advance(6 * DAY);
    expect(await t.engine!.retention.pass()).toMatchObject({ purged: 1 });
    expect([await alive(byDefault), await alive(longer), await alive(shorter), await alive(cleared)]).toEqual([true, true, false, true]);
    t.clock.advance(5 * DAY);
    expect(await t.engine!.retention.pass()).toMatchObject({ purged: 2 });
    expect([await alive(byDefault), await alive(longer), await alive(cleared)]).toEqual([false, true, false]);
    t.clock.advance(20 * DAY);
    expect(await t.engine!.retention.pass()).toMatchObject({ purged: 1 });
    expect(await alive(longer)).toBe(false);
  });

  it("an account's webhook calls of no message (BalanceLow) go after its RetentionDays once settled; a Pending one stays", { timeout: 60_000 }, async () => {
    t = await rig(null);
    const [kept, purged] = [await createTenant(t.app), await createTenant(t.app)];
    await setAccount(t, purged.accountSid, { RetentionDays: 5 });
    const call = (accountSid: string) =>
      t.db.orm.em.fork().transactional((tx) =>
        enqueueWebhook(tx, {
          accountSid,
          messageSid: null,
          eventType: "BalanceLow",
          url: "https://example.com/low",
          method: "POST",
          payload: { Type: "BalanceLow" },
          now: t.clock.now(),
        }),
      );
    const settled = await call(purged.accountSid);
    const pending = await call(purged.accountSid);
    const other = await call(kept.accountSid);
    await t.db.orm.em.fork().execute("update webhook_deliveries set status = 'Delivered' where id in (?, ?)", [settled, other]);
    const ids = async () =>
      (await t.db.orm.em.fork().execute<{ id: string }[]>("select id from webhook_deliveries where message_sid is null order by id")).map((r) => r.id).sort();
    t.clock.advance(4 * DAY);
    await t.engine!.retention.pass();
    expect(await ids()).toEqual([settled, pending, other].sort());
    t.clock.advance(2 * DAY);
    expect(await t.engine!.retention.pass()).toMatchObject({ webhooks: 1 });
    // The account without RetentionDays (and no MESSAGE_RETENTION_DAYS) keeps its call; the Pending one stays.
    expect(await ids()).toEqual([pending, other].sort());
  });

  it("GET shows the settings; bad values get 400 naming the field", async () => {
    const tenant = await createTenant(t.app);
    const set = await setAccount(t, tenant.accountSid, { RetentionDays: 90, RedactAfterDays: 7 });
    const res = await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${tenant.accountSid}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(res.statusCode).toBe(200);
    // GET also shows today's use of the daily quota (none set).
    expect(res.json()).toStrictEqual({ ...set, RetentionDays: 90, RedactAfterDays: 7, SegmentsToday: 0 });
    for (const [field, value] of [
      ["RetentionDays", -1],
      ["RetentionDays", 36501],
      ["RedactAfterDays", -5],
      ["RetentionDays", "soon"],
      ["RedactAfterDays", 1.5],
    ] as const) {
      const bad = await t.app.inject({
        method: "POST",
        url: `/admin/v1/Accounts/${tenant.accountSid}`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        payload: { [field]: value },
      });
      expect(bad.statusCode, `${field}=${value}: ${bad.body}`).toBe(400);
      expect(JSON.stringify(bad.json())).toContain(field);
    }
    // Unchanged by the refused updates.
    expect(
      (await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${tenant.accountSid}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json(),
    ).toMatchObject({
      RetentionDays: 90,
      RedactAfterDays: 7,
    });
  });
});

describe(`redaction (${dbKind()})`, () => {
  let t: TestApp;
  let sessions: Http2SessionManager;
  afterAll(async () => {
    sessions?.abort();
    await t?.close();
  });

  it("empties Text after RedactAfterDays on REST, Connect, gRPC and the FoneDynamics shape; the rest of the record stays", { timeout: 60_000 }, async () => {
    t = await rig(null);
    const tenant = await createTenant(t.app);
    await setAccount(t, tenant.accountSid, { RedactAfterDays: 7 });
    const pool = await addPoolNumbers(t.app, 1, 60);
    const handset = usNumber();
    const out = await send(t, tenant, { From: "", To: handset, ForwardToEmail: "desk@example.com", WebhookUri: receiver.url("/reply2") });
    expect(pool).toContain(out.From);
    await drain(t);
    const inbound = await admin(t.app, "/admin/v1/Simulator/Inbound", { From: handset, To: out.From, Text: "Call me at 5" });
    await drain(t);
    const before = (await getRecord(t, tenant, out.MessageSid)).json();
    expect(before).toMatchObject({ Text: "Your code is 424242", Redacted: false, Status: "Delivered" });

    t.clock.advance(6 * DAY);
    expect(await t.engine!.retention.pass()).toMatchObject({ purged: 0, redacted: 0 });
    t.clock.advance(2 * DAY);
    expect(await t.engine!.retention.pass()).toMatchObject({ purged: 0, redacted: 2 });
    expect(await t.engine!.retention.pass()).toMatchObject({ redacted: 0 });

    // REST: get and list.
    const after = (await getRecord(t, tenant, out.MessageSid)).json();
    expect(after).toStrictEqual({ ...before, Text: "", Redacted: true });
    const list = await t.app.inject({ method: "GET", url: `/v2/Properties/${tenant.propertySid}/Messages`, headers: { authorization: tenant.auth } });
    expect(list.json().Messages.map((m: { Text: string; Redacted: boolean }) => [m.Text, m.Redacted])).toEqual([
      ["", true],
      ["", true],
    ]);
    // The reply's copies: its forwarding e-mail and its Response webhook.
    const emails = await t.app.inject({ method: "GET", url: "/admin/v1/Emails", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(emails.json().Emails.map((e: { MessageSid: string; Body: string }) => [e.MessageSid, e.Body])).toEqual([[inbound.MessageSid, ""]]);
    const payloads = await t.db.orm.em
      .fork()
      .execute<{ payload: unknown }[]>("select payload from webhook_deliveries where message_sid = ?", [inbound.MessageSid]);
    const payload = payloads[0].payload;
    expect((typeof payload === "string" ? JSON.parse(payload) : payload) as Record<string, unknown>).toMatchObject({ Type: "Response", Text: "" });

    // Connect (JSON, through the app) and gRPC (h2c on a listening port).
    const connect = await t.app.inject({
      method: "POST",
      url: "/switchboard.v2.MessagingService/GetMessage",
      headers: { authorization: tenant.auth, "content-type": "application/json" },
      payload: { MessageSid: out.MessageSid },
    });
    expect(connect.statusCode, connect.body).toBe(200);
    expect(connect.json()).toMatchObject({ MessageSid: out.MessageSid, Text: "", Redacted: true });
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    const baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    sessions = new Http2SessionManager(baseUrl);
    const headers = { authorization: tenant.auth };
    const grpc = createClient(MessagingService, createGrpcTransport({ baseUrl, sessionManager: sessions }));
    expect(await grpc.getMessage({ messageSid: out.MessageSid }, { headers })).toMatchObject({
      messageSid: out.MessageSid,
      text: "",
      redacted: true,
      status: "Delivered",
    });
    const connectBinary = createClient(MessagingService, createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }));
    expect(await connectBinary.getMessage({ messageSid: inbound.MessageSid }, { headers })).toMatchObject({ text: "", redacted: true, direction: "Receive" });

    // The Fone Dynamics shape.
    await setAccount(t, tenant.accountSid, { RestCompatibility: "FoneDynamics" });
    const compat = (await getRecord(t, tenant, out.MessageSid)).json();
    // Without SmartEncoded, Price and PriceUnit, fields the Fone Dynamics shape does not have (docs/fone-dynamics.md).
    const { SmartEncoded: _notInCompat, Price: _noPrice, PriceUnit: _noUnit, ...compatBefore } = before;
    expect(compat).toStrictEqual({ Message: { ...compatBefore, Text: "", Redacted: true, Scheduled: before.Schedule } });
  });

  it("an idempotent replay of a redacted message answers with the redacted record", async () => {
    const tenant = await createTenant(t.app);
    const to = ukNumber();
    const first = await send(t, tenant, { To: to }, { "idempotency-key": "replay-1" });
    await drain(t);
    const redacted = await redactExpiredTexts(t.db.orm.em.fork(), tenant.propertySid, new Date(t.clock.now().getTime() + 1), 10);
    expect(redacted).toEqual([first.MessageSid]);
    const replay = await send(t, tenant, { To: to }, { "idempotency-key": "replay-1" });
    expect(replay).toStrictEqual({ ...first, Text: "" });
  });
});

describe(`two purges at once (${dbKind()})`, () => {
  let db: TestOrm;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestOrm();
  });
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  it("never take the same rows: the deletes add up to the expired messages exactly", { timeout: 60_000 }, async () => {
    t = await createTestApp({ db, now: T0 });
    const tenants = [await createTenant(t.app), await createTenant(t.app)];
    const N = 600;
    for (const tenant of tenants) {
      // Expired and settled, created 40 days ago; plus queued ones as old that must stay.
      await db.orm.em.fork().execute(
        `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at, created_at)
         select 'MG' || lpad(md5(? || g::text), 30, '0'), ?, ?, 'Transmit', case when g % 10 = 0 then 'Scheduled' else 'Delivered' end,
                '+447700900001', '+447700900002', 'old text', 'GSM7', 1, ?, ?
           from generate_series(1, ?) g`,
        [tenant.propertySid, tenant.accountSid, tenant.propertySid, new Date(T0.getTime() + DAY), new Date(T0.getTime() - 40 * DAY), N],
      );
    }
    const clock = new ManualClock(T0);
    const purges = [0, 1].map(() => createRetentionPurge({ orm: db.orm, clock, defaultDays: 30, batch: 25, pauseMs: 0 }));
    const results = await Promise.all(purges.map((p) => p.pass()));
    const expected = tenants.length * N * 0.9;
    expect(results[0].purged + results[1].purged).toBe(expected);
    if (dbKind() === "postgres") expect(results.every((r) => r.purged > 0)).toBe(true);
    expect(await count(t, "select count(*) as n from messages")).toBe(tenants.length * N * 0.1);
    expect(await count(t, "select count(*) as n from messages where status <> 'Scheduled'")).toBe(0);
  });
});
