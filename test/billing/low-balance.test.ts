/**
 * Low balance (docs/billing.md#low-balance): an account's LowBalanceThreshold and
 * LowBalanceWebhookUri on UpdateAccount (presence semantics, every refusal a 400 naming its field),
 * GetBalance on /v2 (exact JSON, another account's Sid a 404), and the BalanceLow webhook against
 * a real HTTP receiver: one signed call when a charge takes the balance below the threshold, none
 * for the charges after it, another only after a top-up, refund or adjustment has brought the
 * balance back to the threshold; a crossing survives a worker's crash and two workers queue it
 * once.
 */
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockLowBalanceCrossings, lowBalanceStateOf } from "../../src/billing/balance-store.js";
import { createLowBalanceJob } from "../../src/billing/low-balance.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { startReceiver, type Receiver } from "../support/webhook-receiver.js";

const BEARER = `Bearer ${ADMIN_TOKEN}`;
// Standard Webhooks verification checks the timestamp against the real clock: the manual clock starts at the real time.
const T0 = new Date(Math.floor(Date.now() / 1000) * 1000);
const secs = (d: Date) => Math.floor(d.getTime() / 1000);
const AU = "+61412345678";

function refused(field: string, message: string, code = "InvalidParameter") {
  return { ResponseStatus: { ErrorCode: code, Message: message, Errors: [{ FieldName: field, ErrorCode: code, Message: message }] } };
}

// The first request of a file warms the app up: slow on PGlite under a loaded machine.
describe(`low-balance settings and GetBalance (${dbKind()})`, { timeout: 90_000 }, () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  const call = (method: "GET" | "POST", url: string, body?: object, authorization = BEARER) =>
    t.app.inject({ method, url, headers: { authorization }, ...(body === undefined ? {} : { payload: body }) });

  it('UpdateAccount sets LowBalanceThreshold and LowBalanceWebhookUri; omitted stays, "" clears; GetAccount and ListAccounts show them', async () => {
    const acc = await admin(t.app, "/admin/v1/Accounts", { Name: "Low" });
    const url = `/admin/v1/Accounts/${acc.AccountSid}`;
    const fresh = (await call("GET", url)).json();
    expect(fresh.LowBalanceWebhookUri).toBe("");
    expect(fresh).not.toHaveProperty("LowBalanceThreshold");

    const set = await call("POST", url, { LowBalanceThreshold: "5.5", LowBalanceWebhookUri: " https://hooks.example.com/low " });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ LowBalanceThreshold: "5.50", LowBalanceWebhookUri: "https://hooks.example.com/low" });
    expect((await call("GET", url)).json()).toStrictEqual({ ...set.json(), SegmentsToday: 0 });
    const listed = (await call("GET", "/admin/v1/Accounts?Results_Count=1000")).json().Accounts.find((a: any) => a.AccountSid === acc.AccountSid);
    expect(listed).toMatchObject({ LowBalanceThreshold: "5.50", LowBalanceWebhookUri: "https://hooks.example.com/low" });

    // Omitted: unchanged. A negative threshold is allowed (a credit account's warning).
    expect((await call("POST", url, { Name: "Renamed" })).json()).toMatchObject({ LowBalanceThreshold: "5.50" });
    expect((await call("POST", url, { LowBalanceThreshold: "-10" })).json()).toMatchObject({ LowBalanceThreshold: "-10.00" });
    const cleared = (await call("POST", url, { LowBalanceThreshold: "", LowBalanceWebhookUri: "" })).json();
    expect(cleared.LowBalanceWebhookUri).toBe("");
    expect(cleared).not.toHaveProperty("LowBalanceThreshold");
  });

  it("UpdateAccount refuses a bad threshold or URI with a 400 naming the field, all at once, and changes nothing", async () => {
    const acc = await admin(t.app, "/admin/v1/Accounts", { Name: "Kept" });
    const url = `/admin/v1/Accounts/${acc.AccountSid}`;
    await call("POST", url, { LowBalanceThreshold: "1", LowBalanceWebhookUri: "https://hooks.example.com/a" });
    const before = (await call("GET", url)).json();
    const cases: [object, string, string, string?][] = [
      [{ LowBalanceThreshold: "abc" }, "LowBalanceThreshold", `LowBalanceThreshold must be a decimal string such as "12.50" or "-0.0525"; got "abc".`],
      [{ LowBalanceThreshold: "1.1234567" }, "LowBalanceThreshold", 'LowBalanceThreshold has more than 6 decimal places; got "1.1234567".'],
      [{ LowBalanceThreshold: "+5" }, "LowBalanceThreshold", `LowBalanceThreshold takes no sign but a leading '-'; got "+5".`],
      [{ LowBalanceThreshold: " 5" }, "LowBalanceThreshold", 'LowBalanceThreshold must not contain spaces; got " 5".'],
      [
        { LowBalanceWebhookUri: "ftp://example.com/x" },
        "LowBalanceWebhookUri",
        "LowBalanceWebhookUri must be an absolute http or https URI.",
        "InvalidWebhookUri",
      ],
      [
        { LowBalanceWebhookUri: "hooks.example.com" },
        "LowBalanceWebhookUri",
        "LowBalanceWebhookUri must be an absolute http or https URI.",
        "InvalidWebhookUri",
      ],
      [
        { LowBalanceWebhookUri: "http://127.0.0.1:8080/low" },
        "LowBalanceWebhookUri",
        "LowBalanceWebhookUri points at a private, loopback or link-local address, which is not allowed.",
        "InvalidWebhookUri",
      ],
    ];
    for (const [body, field, message, code] of cases) {
      const res = await call("POST", url, { Name: "Changed", ...body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json()).toStrictEqual(refused(field, message, code));
    }
    const both = await call("POST", url, { LowBalanceThreshold: "x", LowBalanceWebhookUri: "mailto:a@b.c", CreditLimit: "-1" });
    expect(both.statusCode).toBe(400);
    expect(both.json().ResponseStatus.Errors.map((e: { FieldName: string }) => e.FieldName)).toStrictEqual([
      "CreditLimit",
      "LowBalanceThreshold",
      "LowBalanceWebhookUri",
    ]);
    expect((await call("GET", url)).json()).toStrictEqual(before);
  });

  it("GET /v2/Accounts/{AccountSid}/Balance: the balance, BillingMode, CreditLimit (absent when none) and PriceUnit, exactly", async () => {
    const tn = await createTenant(t.app);
    const url = `/v2/Accounts/${tn.accountSid}/Balance`;
    const fresh = await call("GET", url, undefined, tn.auth);
    expect(fresh.statusCode, fresh.body).toBe(200);
    expect(fresh.json()).toStrictEqual({ AccountSid: tn.accountSid, Balance: "0.00", BillingMode: "Postpaid", PriceUnit: "AUD" });

    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { BillingMode: "Prepaid", CreditLimit: "5" });
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}/BalanceEntries`, { Type: "TopUp", Amount: "12.5" });
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}/BalanceEntries`, { Type: "Adjustment", Amount: "-20.000001" });
    expect((await call("GET", url, undefined, tn.auth)).json()).toStrictEqual({
      AccountSid: tn.accountSid,
      Balance: "-7.500001",
      BillingMode: "Prepaid",
      CreditLimit: "5.00",
      PriceUnit: "AUD",
    });
  });

  it("GetBalance: another account's Sid, an unknown one or a malformed one is 404 NotFound; the operator's token is 401", async () => {
    const a = await createTenant(t.app);
    const b = await createTenant(t.app);
    for (const sid of [b.accountSid, `AC${"0".repeat(30)}`, "nope"]) {
      const res = await call("GET", `/v2/Accounts/${sid}/Balance`, undefined, a.auth);
      expect(res.statusCode, sid).toBe(404);
      expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${sid} was not found.`, Errors: [] } });
    }
    expect((await call("GET", `/v2/Accounts/${a.accountSid}/Balance`)).statusCode).toBe(401);
  });
});

describe(`the BalanceLow webhook (${dbKind()})`, { timeout: 90_000 }, () => {
  let t: TestApp;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await startReceiver();
    t = await createTestApp({ now: T0, webhookAllowPrivate: true, engine: true });
    const put = await t.app.inject({
      method: "PUT",
      url: "/admin/v1/RateCards/retail",
      headers: { authorization: BEARER },
      payload: { Rates: [{ Prefix: "+61", PricePerSegment: "1.00" }] },
    });
    expect(put.statusCode, put.body).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  /** A Postpaid tenant on "retail" with `topUp`, a threshold and the receiver's URI at `path`. */
  async function tenant(topUp: string, threshold: string, path: string): Promise<Tenant> {
    const tn = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { RateCard: "retail", LowBalanceThreshold: threshold, LowBalanceWebhookUri: rx.url(path) });
    await entry(tn, "TopUp", topUp);
    return tn;
  }
  const entry = (tn: Tenant, type: "TopUp" | "Adjustment", amount: string) =>
    admin(t.app, `/admin/v1/Accounts/${tn.accountSid}/BalanceEntries`, { Type: type, Amount: amount });

  async function send(tn: Tenant, extra: Record<string, unknown> = {}): Promise<string> {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tn.propertySid}/Messages`,
      headers: { authorization: tn.auth },
      payload: { From: tn.ownedNumber, To: AU, Text: "hi", ...extra },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().MessageSid;
  }

  /** Runs the job and the webhook sender once; the requests the receiver got at `path`. */
  async function deliver(path: string) {
    await t.engine!.lowBalance.tick();
    await t.engine!.webhooks.tick();
    return rx.requests.filter((r) => r.url === path);
  }

  it("a charge below the threshold: one POST with exactly these fields, signed with the account's WebhookSecret; the charges after it: none", async () => {
    const tn = await tenant("10.00", "5.00", "/low-1");
    for (let i = 0; i < 5; i++) await send(tn);
    // 5.00 is not below 5.00.
    expect(await deliver("/low-1")).toHaveLength(0);
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Above");
    await send(tn);
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Pending");
    const got = await deliver("/low-1");
    expect(got).toHaveLength(1);
    const req = got[0];
    expect(req.method).toBe("POST");
    expect(req.headers["content-type"]).toMatch(/^application\/json/);
    expect(req.headers["webhook-id"]).toMatch(/^msg_[A-Za-z0-9_-]+$/);
    const payload = new Webhook(tn.webhookSecret).verify(req.body, req.headers);
    expect(payload).toStrictEqual({
      Type: "BalanceLow",
      AccountSid: tn.accountSid,
      Balance: "4.00",
      LowBalanceThreshold: "5.00",
      PriceUnit: "AUD",
      Timestamp: secs(T0),
    });
    expect(JSON.parse(req.body)).toStrictEqual(payload);
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Sent");

    // Further charges below the threshold, and a top-up that does not reach it: nothing more.
    await send(tn);
    await entry(tn, "TopUp", "1.99");
    await send(tn);
    expect(await t.engine!.lowBalance.tick()).toBe(0);
    expect(await deliver("/low-1")).toHaveLength(1);
  });

  it("a top-up to the threshold arms it again: the next charge below sends a second one; a batch's crossing is one call with the balance after the batch", async () => {
    const tn = await tenant("6.00", "5.00", "/low-2");
    await send(tn);
    await send(tn);
    expect(await deliver("/low-2")).toHaveLength(1);
    // 4.00 + 1.00 = 5.00: back at the threshold (not above it) is enough.
    await entry(tn, "TopUp", "1.00");
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Above");
    expect(await deliver("/low-2")).toHaveLength(1);
    const batch = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tn.propertySid}/BatchMessages`,
      headers: { authorization: tn.auth },
      payload: { Messages: [1, 2, 3].map((n) => ({ From: tn.ownedNumber, To: AU, Text: `b${n}` })) },
    });
    expect(batch.statusCode, batch.body).toBe(200);
    const got = await deliver("/low-2");
    expect(got).toHaveLength(2);
    expect(JSON.parse(got[1].body)).toMatchObject({ Balance: "2.00", LowBalanceThreshold: "5.00" });
    expect(got[1].headers["webhook-id"]).not.toBe(got[0].headers["webhook-id"]);
  });

  it("a refund or a positive adjustment that brings the balance back arms it again; a negative adjustment sends nothing", async () => {
    const tn = await tenant("5.50", "5.00", "/low-3");
    // Scheduled: canceled below, which refunds its 1.00.
    const scheduled = await send(tn, { Schedule: secs(T0) + 3600 });
    expect(await deliver("/low-3")).toHaveLength(1);
    const cancel = await t.app.inject({ method: "DELETE", url: `/v2/Messages/${scheduled}`, headers: { authorization: tn.auth } });
    expect(cancel.statusCode, cancel.body).toBe(200);
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Above");
    await send(tn);
    expect(await deliver("/low-3")).toHaveLength(2);
    await entry(tn, "Adjustment", "0.50");
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Above");
    // An adjustment is the operator's: it takes the balance below without a webhook; the next charge sends it.
    await entry(tn, "Adjustment", "-3.00");
    expect(await deliver("/low-3")).toHaveLength(2);
    await send(tn);
    const got = await deliver("/low-3");
    expect(got).toHaveLength(3);
    expect(JSON.parse(got[2].body)).toMatchObject({ Balance: "1.00" });
  });

  it("a crossing the balance recovers from before the worker runs is still sent, and arms it again at once", async () => {
    const tn = await tenant("5.00", "5.00", "/low-4");
    await send(tn);
    await entry(tn, "TopUp", "10.00");
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Pending");
    const got = await deliver("/low-4");
    expect(got).toHaveLength(1);
    expect(JSON.parse(got[0].body)).toMatchObject({ Balance: "4.00" });
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Above");
  });

  it("new settings arm it again: a threshold set above a balance sends at the next charge; no URI, no webhook", async () => {
    const tn = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { RateCard: "retail", LowBalanceThreshold: "100" });
    await entry(tn, "TopUp", "3.00");
    await send(tn);
    // A threshold without a URI records nothing.
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Above");
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { LowBalanceWebhookUri: rx.url("/low-5") });
    await send(tn);
    expect(await deliver("/low-5")).toHaveLength(1);
    await send(tn);
    expect(await deliver("/low-5")).toHaveLength(1);
    // The same values again change nothing; a new threshold arms it.
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { LowBalanceThreshold: "100.00", LowBalanceWebhookUri: rx.url("/low-5") });
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Sent");
    await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { LowBalanceThreshold: "50" });
    expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Above");
    await t.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${tn.accountSid}/BalanceEntries`,
      headers: { authorization: BEARER },
      payload: { Type: "TopUp", Amount: "0.50" },
    });
    await send(tn);
    const got = await deliver("/low-5");
    expect(got).toHaveLength(2);
    expect(JSON.parse(got[1].body)).toMatchObject({ Balance: "-0.50", LowBalanceThreshold: "50.00" });
  });

  it("a worker that crashes before its commit loses nothing; two workers at once queue each crossing once", async () => {
    const tenants = await Promise.all([1, 2, 3].map((n) => tenant("1.00", "0.50", `/low-6-${n}`)));
    for (const tn of tenants) await send(tn);
    // A crash: the crossings were taken, then the transaction never committed.
    await expect(
      t.db.orm.em.fork().transactional(async (tx) => {
        expect(await lockLowBalanceCrossings(tx, 50)).toHaveLength(3);
        throw new Error("crash");
      }),
    ).rejects.toThrow("crash");
    for (const tn of tenants) expect(await lowBalanceStateOf(t.db.orm.em.fork(), tn.accountSid)).toBe("Pending");
    const jobs = [1, 2].map(() => createLowBalanceJob({ orm: t.db.orm, clock: t.clock, currency: "AUD" }));
    const settled = await Promise.all(jobs.map((j) => j.tick()));
    expect(settled.reduce((x, y) => x + y, 0)).toBe(3);
    await t.engine!.webhooks.tick();
    for (const [i, tn] of tenants.entries()) {
      const got = rx.requests.filter((r) => r.url === `/low-6-${i + 1}`);
      expect(got).toHaveLength(1);
      expect(new Webhook(tn.webhookSecret).verify(got[0].body, got[0].headers)).toMatchObject({ AccountSid: tn.accountSid, Balance: "0.00" });
    }
  });
});
