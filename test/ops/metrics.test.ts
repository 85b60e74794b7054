/**
 * GET /metrics (Prometheus text format): HTTP requests of every kind counted by route template,
 * method, status and protocol; messages by status equal to the database; dispatcher lag, webhook
 * and mail backlogs; process metrics; the optional METRICS_TOKEN. Each app has its own registry.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { buildApp } from "../../src/app.js";
import { enqueueEmail } from "../../src/mail/mail-outbox.js";
import { createTestOrm } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

/** The samples of a metrics text: `name{labels}` → value (labels as written). */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

async function scrape(t: TestApp): Promise<Map<string, number>> {
  const res = await t.app.inject({ method: "GET", url: "/metrics" });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8");
  return samples(res.body);
}

const requests = (method: string, route: string, status: number, protocol: string) =>
  `switchboard_http_requests_total{method="${method}",route="${route}",status="${status}",protocol="${protocol}"}`;

let recipientSeq = 0;
const recipient = () => `+447911${String(++recipientSeq).padStart(6, "0")}`;

describe("HTTP request metrics", () => {
  let t: TestApp;
  let tenant: Tenant;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.app);
  });
  afterAll(() => t.close());

  it("counts REST and Connect calls by route template, method, status and protocol; never a raw Sid", async () => {
    const sent = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: "Acme", To: recipient(), Text: "counted" },
    });
    expect(sent.statusCode, sent.body).toBe(200);
    const sid = sent.json().MessageSid as string;
    for (let i = 0; i < 2; i++) {
      const got = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
      expect(got.statusCode).toBe(200);
    }
    const missing = await t.app.inject({ method: "GET", url: `/v2/Messages/MG${"0".repeat(30)}`, headers: { authorization: tenant.auth } });
    expect(missing.statusCode).toBe(404);
    const anonymous = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}` });
    expect(anonymous.statusCode).toBe(401);
    const rpc = await t.app.inject({
      method: "POST",
      url: "/switchboard.v2.MessagingService/GetMessage",
      headers: { authorization: tenant.auth, "content-type": "application/json" },
      payload: { MessageSid: sid },
    });
    expect(rpc.statusCode, rpc.body).toBe(200);
    const rpcDenied = await t.app.inject({
      method: "POST",
      url: "/switchboard.v2.MessagingService/GetMessage",
      headers: { "content-type": "application/json" },
      payload: { MessageSid: sid },
    });
    expect(rpcDenied.statusCode).toBe(401);
    const unknownPath = await t.app.inject({ method: "GET", url: `/nothing/here/${sid}` });
    expect(unknownPath.statusCode).toBe(404);

    const res = await t.app.inject({ method: "GET", url: "/metrics" });
    const m = samples(res.body);
    expect(m.get(requests("POST", "/v2/Properties/:property_sid/Messages", 200, "rest"))).toBe(1);
    expect(m.get(requests("GET", "/v2/Messages/:message_sid", 200, "rest"))).toBe(2);
    expect(m.get(requests("GET", "/v2/Messages/:message_sid", 404, "rest"))).toBe(1);
    expect(m.get(requests("GET", "/v2/Messages/:message_sid", 401, "rest"))).toBe(1);
    expect(m.get(requests("POST", "/switchboard.v2.MessagingService/GetMessage", 200, "connect"))).toBe(1);
    expect(m.get(requests("POST", "/switchboard.v2.MessagingService/GetMessage", 401, "connect"))).toBe(1);
    expect(m.get(requests("POST", "/admin/v1/Accounts", 200, "rest"))).toBe(1);
    expect(m.get(requests("GET", "unmatched", 404, "http"))).toBe(1);
    // Duration histogram with the same labels.
    expect(m.get(`switchboard_http_request_duration_seconds_count{method="GET",route="/v2/Messages/:message_sid",status="200",protocol="rest"}`)).toBe(2);
    expect(
      m.get(`switchboard_http_request_duration_seconds_bucket{le="+Inf",method="GET",route="/v2/Messages/:message_sid",status="200",protocol="rest"}`),
    ).toBe(2);
    expect(m.get(`switchboard_http_request_duration_seconds_sum{method="GET",route="/v2/Messages/:message_sid",status="200",protocol="rest"}`)).toBeGreaterThan(
      0,
    );
    // Labels carry templates only: no Sid from any URL above.
    expect(res.body).not.toContain(sid);
    expect(res.body).not.toContain(tenant.propertySid);
    // Process and runtime metrics.
    expect(m.get("process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(m.get("nodejs_heap_size_total_bytes")).toBeGreaterThan(0);
    expect(m.get("process_start_time_seconds")).toBeGreaterThan(0);
  });

  it("counts a scrape on the next scrape; two apps in one process keep separate registries", async () => {
    const before = await scrape(t);
    const after = await scrape(t);
    expect(after.get(requests("GET", "/metrics", 200, "http"))).toBe((before.get(requests("GET", "/metrics", 200, "http")) ?? 0) + 1);

    const other = await createTestApp();
    try {
      const fresh = await scrape(other);
      expect(fresh.get(requests("GET", "/v2/Messages/:message_sid", 200, "rest"))).toBeUndefined();
      expect(fresh.get(requests("POST", "/admin/v1/Accounts", 200, "rest"))).toBeUndefined();
    } finally {
      await other.close();
    }
  });
});

describe("queue metrics read from the database at scrape time", () => {
  let t: TestApp;
  let tenant: Tenant;
  beforeAll(async () => {
    t = await createTestApp({ engine: true, webhookAllowPrivate: true });
    tenant = await createTenant(t.app);
  });
  afterAll(() => t.close());

  const send = async (body: object) => {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: "Acme", To: recipient(), ...body },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().MessageSid as string;
  };
  const nowSeconds = () => Math.floor(t.clock.now().getTime() / 1000);
  const statusCounts = async () => {
    const rows = await t.db.orm.em.fork().execute<{ status: string; n: number }[]>("select status, count(*)::int as n from messages group by status");
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  };

  it("messages by status equal the database; the dispatcher lag is the age of the oldest due, unclaimed message", async () => {
    let m = await scrape(t);
    expect(m.get("switchboard_dispatcher_lag_seconds")).toBe(0);
    for (const s of ["Scheduled", "Processing", "Submitted", "Delivered", "Failed", "Canceled", "Received"]) {
      expect(m.get(`switchboard_messages{status="${s}"}`)).toBe(0);
    }

    await send({ Text: "one" });
    await send({ Text: "two" });
    const later = await send({ Text: "in an hour", Schedule: nowSeconds() + 3600 });
    const canceled = await send({ Text: "canceled", Schedule: nowSeconds() + 7200 });
    const cancel = await t.app.inject({ method: "DELETE", url: `/v2/Messages/${canceled}`, headers: { authorization: tenant.auth } });
    expect(cancel.statusCode, cancel.body).toBe(200);

    t.clock.advance(42_000);
    m = await scrape(t);
    expect(m.get('switchboard_messages{status="Processing"}')).toBe(2);
    expect(m.get('switchboard_messages{status="Scheduled"}')).toBe(1);
    expect(m.get('switchboard_messages{status="Canceled"}')).toBe(1);
    expect(m.get('switchboard_messages{status="Submitted"}')).toBe(0);
    // Two messages have been due for 42 s and nobody has claimed them.
    expect(m.get("switchboard_dispatcher_lag_seconds")).toBeCloseTo(42, 3);

    // The dispatcher claims and submits them: no lag any more; the scheduled one is not due yet.
    expect(await t.engine!.dispatcher.tick()).toBe(2);
    // The simulator reports after a 0 ms timer: polled until both reports are stored (a report
    // landing between the scrape and the count below would make them differ).
    await vi.waitFor(async () => expect((await statusCounts()).Delivered).toBe(2), { timeout: 10_000, interval: 20 });
    m = await scrape(t);
    expect(m.get("switchboard_dispatcher_lag_seconds")).toBe(0);
    const db = await statusCounts();
    for (const s of ["Scheduled", "Processing", "Submitted", "Delivered", "Failed", "Canceled", "Received"]) {
      expect(m.get(`switchboard_messages{status="${s}"}`), s).toBe(db[s] ?? 0);
    }
    expect((db.Submitted ?? 0) + (db.Delivered ?? 0)).toBe(2);

    // Its second comes and goes: due for 5 s, waiting.
    t.clock.advance(3600_000 - 42_000 + 5_000);
    m = await scrape(t);
    expect(m.get("switchboard_dispatcher_lag_seconds")).toBeCloseTo(5, 3);
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    m = await scrape(t);
    expect(m.get("switchboard_dispatcher_lag_seconds")).toBe(0);
    expect(later).toMatch(/^MG/);
  });

  it("webhook backlog counts pending webhook calls; mail backlog pending e-mails", async () => {
    let m = await scrape(t);
    const webhooksBefore = m.get("switchboard_webhook_backlog")!;
    expect(m.get("switchboard_mail_backlog")).toBe(0);

    // A delivery receipt webhook is queued when the report arrives; nobody runs the webhook worker.
    const sid = await send({ Text: "with a receipt", DeliveryReceiptWebhookUri: "http://127.0.0.1:9/receipts" });
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    // The simulator's report arrives asynchronously (a timer, then the report's transaction):
    // polled until the webhook is queued, however loaded the machine.
    await vi.waitFor(async () => expect((await scrape(t)).get("switchboard_webhook_backlog")).toBe(webhooksBefore + 1), { timeout: 10_000, interval: 20 });

    await t.db.orm.em.fork().transactional((em) =>
      enqueueEmail(em, {
        accountSid: tenant.accountSid,
        messageSid: sid,
        from: "a@example.com",
        to: "b@example.com",
        subject: "s",
        body: "b",
        now: t.clock.now(),
      }),
    );
    m = await scrape(t);
    expect(m.get("switchboard_mail_backlog")).toBe(1);
    // The mail worker keeps it (no SMTP server configured): no longer pending.
    await t.engine!.mail.tick();
    m = await scrape(t);
    expect(m.get("switchboard_mail_backlog")).toBe(0);
    expect(m.get("switchboard_database_up")).toBe(1);
  });
});

describe("METRICS_TOKEN", () => {
  it("when set, /metrics wants it as a bearer token: 401 (with WWW-Authenticate) without it or with another", async () => {
    const db = await createTestOrm();
    const app = await buildApp({
      orm: db.orm,
      config: {
        adminToken: ADMIN_TOKEN,
        webhookAllowPrivate: false,
        noAlphaCountries: new Set(["US"]),
        bodyLimit: 1 << 20,
        metricsToken: "scrape-token-0123456789",
      },
    });
    try {
      const none = await app.inject({ method: "GET", url: "/metrics" });
      expect(none.statusCode).toBe(401);
      expect(none.headers["www-authenticate"]).toBe('Bearer realm="switchboard-metrics"');
      expect(none.json()).toEqual({
        ResponseStatus: { ErrorCode: "Unauthorized", Message: "GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>`.", Errors: [] },
      });
      const admin = await app.inject({ method: "GET", url: "/metrics", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(admin.statusCode).toBe(401);
      const ok = await app.inject({ method: "GET", url: "/metrics", headers: { authorization: "Bearer scrape-token-0123456789" } });
      expect(ok.statusCode).toBe(200);
      expect(ok.body).toContain("switchboard_http_requests_total");
    } finally {
      await app.close();
      await db.close();
    }
  });
});

describe("per-carrier metrics", () => {
  it("with a router, one series per configured carrier: link state, in flight, queued, submitted, failed; removed carriers drop out", async () => {
    const db = await createTestOrm();
    let links = [
      { name: "A", link: "Bound" as const, inFlight: 3, queued: 1, submitted: 120, failed: 2 },
      { name: "sim", link: "" as const, inFlight: 0, queued: 0, submitted: 7, failed: 0 },
    ];
    const app = await buildApp({
      orm: db.orm,
      router: { links: () => links, refresh: async () => undefined },
      config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: false, noAlphaCountries: new Set(["US"]), bodyLimit: 1 << 20 },
    });
    const read = async () => samples((await app.inject({ method: "GET", url: "/metrics" })).body);
    const carrierSeries = (m: Map<string, number>) => [...m].filter(([k]) => k.startsWith("switchboard_carrier_")).sort(([x], [y]) => x.localeCompare(y));
    try {
      expect(carrierSeries(await read())).toEqual([
        ['switchboard_carrier_failed{carrier="A"}', 2],
        ['switchboard_carrier_failed{carrier="sim"}', 0],
        ['switchboard_carrier_in_flight{carrier="A"}', 3],
        ['switchboard_carrier_in_flight{carrier="sim"}', 0],
        ['switchboard_carrier_link{carrier="A",state="Bound"}', 1],
        ['switchboard_carrier_link{carrier="A",state="Connecting"}', 0],
        ['switchboard_carrier_link{carrier="A",state="Down"}', 0],
        ['switchboard_carrier_queued{carrier="A"}', 1],
        ['switchboard_carrier_queued{carrier="sim"}', 0],
        ['switchboard_carrier_submitted{carrier="A"}', 120],
        ['switchboard_carrier_submitted{carrier="sim"}', 7],
      ]);
      links = [{ name: "sim", link: "", inFlight: 0, queued: 0, submitted: 9, failed: 1 }];
      expect(carrierSeries(await read())).toEqual([
        ['switchboard_carrier_failed{carrier="sim"}', 1],
        ['switchboard_carrier_in_flight{carrier="sim"}', 0],
        ['switchboard_carrier_queued{carrier="sim"}', 0],
        ['switchboard_carrier_submitted{carrier="sim"}', 9],
      ]);
    } finally {
      await app.close();
      await db.close();
    }
  });
});
