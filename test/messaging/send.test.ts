/**
 * Send SMS through REST (`POST /v2/Properties/{PropertySid}/Messages`), each rule at its exact
 * boundary: Schedule, senders, recipients, Text, SMS enablement, webhook and lease options,
 * leased senders (limits, concurrency, expiry), Idempotency-Key, and tenancy/authentication.
 */
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addPoolNumbers, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const MESSAGE_KEYS = ["AccountSid", "From", "MessageSid", "PropertySid", "Text", "To"];
const SID = (prefix: string) => expect.stringMatching(new RegExp(`^${prefix}[A-Z0-9]{30}$`));
const DAY = 86_400_000;
const T0 = new Date("2026-11-22T12:00:00Z");

let recipientSeq = 0;
/** A fresh UK mobile recipient (alphanumeric senders allowed), unique in this file. */
function ukRecipient(): string {
  return `+447911${String(++recipientSeq).padStart(6, "0")}`;
}
/** A fresh US recipient (no alphanumeric senders: leased instead), unique in this file. */
function usRecipient(): string {
  return `+1415555${String(1000 + ++recipientSeq).padStart(4, "0")}`;
}

function nowSeconds(t: TestApp): number {
  return Math.floor(t.clock.now().getTime() / 1000);
}

function send(t: TestApp, tenant: Tenant, body: object, headers: Record<string, string> = {}, propertySid = tenant.propertySid) {
  return t.app.inject({
    method: "POST",
    url: `/v2/Properties/${propertySid}/Messages`,
    headers: { authorization: tenant.auth, ...headers },
    payload: body,
  });
}

async function record(t: TestApp, tenant: Tenant, sid: string): Promise<any> {
  const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
  expect(res.statusCode).toBe(200);
  return res.json();
}

async function list(t: TestApp, tenant: Tenant): Promise<any> {
  const res = await t.app.inject({ method: "GET", url: `/v2/Properties/${tenant.propertySid}/Messages`, headers: { authorization: tenant.auth } });
  expect(res.statusCode).toBe(200);
  return res.json();
}

/** A 200 with exactly the six Message fields, equal to `expected` (MessageSid checked for shape). */
function expectMessage(res: LightMyRequestResponse, tenant: Tenant, expected: { From: string | RegExp; To: string; Text: string }): any {
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  const body = res.json();
  expect(Object.keys(body).sort()).toEqual(MESSAGE_KEYS);
  expect(body).toStrictEqual({
    MessageSid: SID("MG"),
    AccountSid: tenant.accountSid,
    PropertySid: tenant.propertySid,
    From: typeof expected.From === "string" ? expected.From : expect.stringMatching(expected.From),
    To: expected.To,
    Text: expected.Text,
  });
  return body;
}

/**
 * An error answer with exactly the documented body: status, top-level ErrorCode, and the
 * (FieldName, ErrorCode) pairs of Errors (in any order; [] for a non-field error).
 */
function expectError(res: LightMyRequestResponse, status: number, errorCode: string, fields: [string, string][] = []): any {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  const body = res.json();
  expect(Object.keys(body)).toEqual(["ResponseStatus"]);
  const rs = body.ResponseStatus;
  expect(Object.keys(rs).sort()).toEqual(["ErrorCode", "Errors", "Message"]);
  expect(rs.ErrorCode).toBe(errorCode);
  expect(typeof rs.Message).toBe("string");
  expect(rs.Message.length).toBeGreaterThan(0);
  const got = (rs.Errors as any[]).map((e) => {
    expect(Object.keys(e).sort()).toEqual(["ErrorCode", "FieldName", "Message"]);
    expect(e.Message.length).toBeGreaterThan(0);
    return [e.FieldName, e.ErrorCode];
  });
  const sortPairs = (l: [string, string][]) => [...l].sort((a, b) => (a[0] + a[1]).localeCompare(b[0] + b[1]));
  expect(sortPairs(got as [string, string][])).toEqual(sortPairs(fields));
  return rs;
}

// ---------------------------------------------------------------------------------------------
// One app for the stateless rules; every test gets its own tenant and recipients.

let t: TestApp;
let pool: string[];
const POOL_RE = /^\+1202555\d{4}$/;

beforeAll(async () => {
  t = await createTestApp({ now: T0 });
  pool = await addPoolNumbers(t.app, 10);
});
afterAll(async () => {
  await t?.close();
});

describe("Schedule", () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
  });

  it("exactly now + 14 days (1209600 s) is accepted and scheduled for that time", async () => {
    t.clock.set(T0);
    const schedule = nowSeconds(t) + 1_209_600;
    const to = ukRecipient();
    const res = await send(t, tenant, { From: "Acme", To: to, Text: "later", Schedule: schedule });
    const msg = expectMessage(res, tenant, { From: "Acme", To: to, Text: "later" });
    const rec = await record(t, tenant, msg.MessageSid);
    expect(rec.Status).toBe("Scheduled");
    expect(rec.Schedule).toBe(schedule);
    expect(rec.Created).toBe(nowSeconds(t));
    expect(rec.Submitted).toBe(0);
  });

  it("now + 1209601 s is refused with InvalidSchedule naming Schedule", async () => {
    t.clock.set(T0);
    const res = await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x", Schedule: nowSeconds(t) + 1_209_601 });
    expectError(res, 400, "InvalidSchedule", [["Schedule", "InvalidSchedule"]]);
  });

  it("the boundaries hold with a clock that is not on a whole second", async () => {
    t.clock.set(T0.getTime() + 999);
    const now = Math.floor(t.clock.now().getTime() / 1000);
    expect((await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x", Schedule: now + 1_209_600 })).statusCode).toBe(200);
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x", Schedule: now + 1_209_601 }), 400, "InvalidSchedule", [
      ["Schedule", "InvalidSchedule"],
    ]);
    expect((await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x", Schedule: now - 3599 })).statusCode).toBe(200);
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x", Schedule: now - 3600 }), 400, "ScheduleInPast", [
      ["Schedule", "ScheduleInPast"],
    ]);
    t.clock.set(T0);
  });

  it("now - 3599 s is accepted and sent at once (Processing, not Scheduled)", async () => {
    t.clock.set(T0);
    const schedule = nowSeconds(t) - 3599;
    const to = ukRecipient();
    const msg = expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: "late", Schedule: schedule }), tenant, {
      From: "Acme",
      To: to,
      Text: "late",
    });
    const rec = await record(t, tenant, msg.MessageSid);
    expect(rec.Status).toBe("Processing");
    expect(rec.Schedule).toBe(schedule);
  });

  it("now - 3600 s is refused with ScheduleInPast naming Schedule", async () => {
    t.clock.set(T0);
    const res = await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x", Schedule: nowSeconds(t) - 3600 });
    expectError(res, 400, "ScheduleInPast", [["Schedule", "ScheduleInPast"]]);
  });

  it("Schedule exactly now is sent at once", async () => {
    t.clock.set(T0);
    const msg = (await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "now", Schedule: nowSeconds(t) })).json();
    const rec = await record(t, tenant, msg.MessageSid);
    expect(rec.Status).toBe("Processing");
    expect(rec.Schedule).toBe(nowSeconds(t));
  });

  it("Schedule omitted is sent at once with Schedule 0 on the record", async () => {
    t.clock.set(T0);
    const to = ukRecipient();
    const msg = expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: "now" }), tenant, { From: "Acme", To: to, Text: "now" });
    const rec = await record(t, tenant, msg.MessageSid);
    expect(rec.Status).toBe("Processing");
    expect(rec.Schedule).toBe(0);
  });

  it("Schedule as a JSON string of digits is accepted", async () => {
    t.clock.set(T0);
    const schedule = nowSeconds(t) + 3600;
    const to = ukRecipient();
    const msg = expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: "s", Schedule: String(schedule) }), tenant, {
      From: "Acme",
      To: to,
      Text: "s",
    });
    const rec = await record(t, tenant, msg.MessageSid);
    expect(rec.Status).toBe("Scheduled");
    expect(rec.Schedule).toBe(schedule);
  });

  it.each([[1.5], ["abc"], [true], [{}], [""]])("Schedule %j is 400 InvalidParameter naming Schedule", async (schedule) => {
    t.clock.set(T0);
    const res = await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x", Schedule: schedule });
    expectError(res, 400, "InvalidParameter", [["Schedule", "InvalidParameter"]]);
  });

  it("Schedule null counts as omitted", async () => {
    const msg = (await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x", Schedule: null })).json();
    expect((await record(t, tenant, msg.MessageSid)).Status).toBe("Processing");
  });
});

describe("From (sender ID)", () => {
  let tenant: Tenant;
  let other: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
    other = await createTenant(t.app);
  });

  it.each([["+447700900123"], ["+4915112345678"]])("an alphanumeric ID of exactly 11 characters to %s is accepted and echoed", async (to) => {
    const res = await send(t, tenant, { From: "AcmeShop123", To: to, Text: "hi" });
    const msg = expectMessage(res, tenant, { From: "AcmeShop123", To: to, Text: "hi" });
    expect((await record(t, tenant, msg.MessageSid)).From).toBe("AcmeShop123");
  });

  it("a 1-character alphanumeric ID is accepted", async () => {
    const to = ukRecipient();
    expectMessage(await send(t, tenant, { From: "A", To: to, Text: "hi" }), tenant, { From: "A", To: to, Text: "hi" });
  });

  it("an alphanumeric ID with spaces is accepted", async () => {
    const to = ukRecipient();
    expectMessage(await send(t, tenant, { From: "My Shop", To: to, Text: "hi" }), tenant, { From: "My Shop", To: to, Text: "hi" });
  });

  it.each([
    ["12 characters", "AcmeShop1234"],
    ["all digits", "12345"],
    ["a symbol", "Acme!"],
    ["a non-ASCII letter", "Café"],
  ])("an alphanumeric ID with %s is InvalidSenderId", async (_what, from) => {
    expectError(await send(t, tenant, { From: from, To: ukRecipient(), Text: "hi" }), 400, "InvalidSenderId", [["From", "InvalidSenderId"]]);
  });

  it("an E164 From the account owns is accepted and echoed", async () => {
    const to = ukRecipient();
    const msg = expectMessage(await send(t, tenant, { From: tenant.ownedNumber, To: to, Text: "hi" }), tenant, {
      From: tenant.ownedNumber,
      To: to,
      Text: "hi",
    });
    expect((await record(t, tenant, msg.MessageSid)).From).toBe(tenant.ownedNumber);
  });

  it("an E164 From nobody owns is SenderNotOwned", async () => {
    expectError(await send(t, tenant, { From: "+447700900999", To: ukRecipient(), Text: "hi" }), 400, "SenderNotOwned", [["From", "SenderNotOwned"]]);
  });

  it("an E164 From owned by another account is SenderNotOwned", async () => {
    expectError(await send(t, tenant, { From: other.ownedNumber, To: ukRecipient(), Text: "hi" }), 400, "SenderNotOwned", [["From", "SenderNotOwned"]]);
  });

  it("a shared pool number as From is SenderNotOwned (the pool is only for leases)", async () => {
    expectError(await send(t, tenant, { From: pool[0], To: ukRecipient(), Text: "hi" }), 400, "SenderNotOwned", [["From", "SenderNotOwned"]]);
  });

  it("a malformed E164 From is InvalidSenderId", async () => {
    expectError(await send(t, tenant, { From: "+12", To: ukRecipient(), Text: "hi" }), 400, "InvalidSenderId", [["From", "InvalidSenderId"]]);
  });

  it.each([
    ["blank", { From: "" }],
    ["whitespace", { From: "   " }],
    ["omitted", {}],
  ])("%s From sends from a leased pool number", async (_what, from) => {
    const to = ukRecipient();
    const msg = expectMessage(await send(t, tenant, { ...from, To: to, Text: "hi" }), tenant, { From: POOL_RE, To: to, Text: "hi" });
    expect(pool).toContain(msg.From);
    expect((await record(t, tenant, msg.MessageSid)).From).toBe(msg.From);
  });

  it.each([
    ["US", "+14155550123"],
    ["Canada", "+16135550123"],
  ])("an alphanumeric From to a %s number goes out from a leased pool number", async (_c, to) => {
    const msg = expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: "hi" }), tenant, { From: POOL_RE, To: to, Text: "hi" });
    expect(pool).toContain(msg.From);
    expect((await record(t, tenant, msg.MessageSid)).From).toBe(msg.From);
  });

  it("an E164 From to a US number stays the E164 sender", async () => {
    const to = usRecipient();
    expectMessage(await send(t, tenant, { From: tenant.ownedNumber, To: to, Text: "hi" }), tenant, { From: tenant.ownedNumber, To: to, Text: "hi" });
  });

  it("From of the wrong JSON type is InvalidParameter naming From", async () => {
    expectError(await send(t, tenant, { From: 12345, To: ukRecipient(), Text: "hi" }), 400, "InvalidParameter", [["From", "InvalidParameter"]]);
  });
});

describe("To and Text", () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
  });

  it("To missing is MissingParameter", async () => {
    expectError(await send(t, tenant, { From: "Acme", Text: "hi" }), 400, "MissingParameter", [["To", "MissingParameter"]]);
  });

  it("To blank is MissingParameter", async () => {
    expectError(await send(t, tenant, { From: "Acme", To: "  ", Text: "hi" }), 400, "MissingParameter", [["To", "MissingParameter"]]);
  });

  it.each([["12345"], ["+1"], ["+999123456789"], ["447700900123"], ["+44 7700 900123"]])("To %s is InvalidRecipient", async (to) => {
    expectError(await send(t, tenant, { From: "Acme", To: to, Text: "hi" }), 400, "InvalidRecipient", [["To", "InvalidRecipient"]]);
  });

  it("Text missing is MissingParameter", async () => {
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient() }), 400, "MissingParameter", [["Text", "MissingParameter"]]);
  });

  it.each([[""], ["   "]])("Text %j is MissingParameter", async (text) => {
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: text }), 400, "MissingParameter", [["Text", "MissingParameter"]]);
  });

  it("Text of 1600 characters is accepted, 1601 is TextTooLong", async () => {
    const to = ukRecipient();
    const text = "a".repeat(1600);
    const msg = expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: text }), tenant, { From: "Acme", To: to, Text: text });
    expect((await record(t, tenant, msg.MessageSid)).Text).toBe(text);
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "a".repeat(1601) }), 400, "TextTooLong", [["Text", "TextTooLong"]]);
  });

  it("characters are code points: 1600 emoji (3200 UTF-16 units) are accepted, 1601 are TextTooLong", async () => {
    const to = ukRecipient();
    const text = "😀".repeat(1600);
    expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: text }), tenant, { From: "Acme", To: to, Text: text });
    const res = await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "😀".repeat(1601) });
    const rs = expectError(res, 400, "TextTooLong", [["Text", "TextTooLong"]]);
    expect(rs.Errors[0].Message).toBe("Text is 1601 characters long; the limit is 1600.");
  });

  it("160 GSM characters are GSM7 in 1 segment, 161 in 2", async () => {
    const one = (await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "b".repeat(160) })).json();
    const two = (await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "b".repeat(161) })).json();
    expect(await record(t, tenant, one.MessageSid)).toMatchObject({ Encoding: "GSM7", NumSegments: 1 });
    expect(await record(t, tenant, two.MessageSid)).toMatchObject({ Encoding: "GSM7", NumSegments: 2 });
  });

  it("a text with an emoji is UCS2", async () => {
    const to = ukRecipient();
    const msg = expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: "Hi 😀" }), tenant, { From: "Acme", To: to, Text: "Hi 😀" });
    expect(await record(t, tenant, msg.MessageSid)).toMatchObject({ Encoding: "UCS2", NumSegments: 1, Text: "Hi 😀" });
  });
});

describe("SMS enablement", () => {
  it("an account not enabled for SMS gets 400 SmsNotEnabled until the operator enables it", async () => {
    const tenant = await createTenant(t.app, { smsEnabled: false });
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "hi" }), 400, "SmsNotEnabled");
    const res = await t.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${tenant.accountSid}`,
      headers: { authorization: "Bearer test-admin-token-0123456789abcdefghijkl" },
      payload: { SmsEnabled: true },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ AccountSid: tenant.accountSid, SmsEnabled: true });
    const to = ukRecipient();
    expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: "hi" }), tenant, { From: "Acme", To: to, Text: "hi" });
    // And off again.
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { SmsEnabled: false });
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "hi" }), 400, "SmsNotEnabled");
  });

  it("a property not enabled for SMS gets 400 SmsNotEnabled until the operator enables it", async () => {
    const tenant = await createTenant(t.app, { propertySmsEnabled: false });
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "hi" }), 400, "SmsNotEnabled");
    expect(await admin(t.app, `/admin/v1/Properties/${tenant.propertySid}`, { SmsEnabled: true })).toMatchObject({ SmsEnabled: true });
    const to = ukRecipient();
    expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: "hi" }), tenant, { From: "Acme", To: to, Text: "hi" });
  });

  it("a disabled account creates no message", async () => {
    const tenant = await createTenant(t.app, { smsEnabled: false });
    await send(t, tenant, { To: ukRecipient(), Text: "hi" });
    expect((await list(t, tenant)).TotalCount).toBe(0);
  });
});

describe("sends answered together", () => {
  it("each send of one group commit gets its own answer, and only the accepted ones are stored", async () => {
    const tenant = await createTenant(t.app);
    const other = await createTenant(t.app);
    const disabled = await createTenant(t.app, { smsEnabled: false });
    const to = [ukRecipient(), ukRecipient(), ukRecipient(), ukRecipient(), ukRecipient(), ukRecipient()];
    // Started together, so that they wait for the same batch.
    const [owned, alpha, notOwned, otherProperty, off, empty] = await Promise.all([
      send(t, tenant, { From: tenant.ownedNumber, To: to[0], Text: "one" }),
      send(t, tenant, { From: "Acme", To: to[1], Text: "two" }),
      send(t, tenant, { From: other.ownedNumber, To: to[2], Text: "three" }),
      send(t, tenant, { From: "Acme", To: to[3], Text: "four" }, {}, other.propertySid),
      send(t, disabled, { From: "Acme", To: to[4], Text: "five" }),
      send(t, tenant, { From: "Acme", To: to[5], Text: "" }),
    ]);
    const first = expectMessage(owned, tenant, { From: tenant.ownedNumber, To: to[0], Text: "one" });
    const second = expectMessage(alpha, tenant, { From: "Acme", To: to[1], Text: "two" });
    expectError(notOwned, 400, "SenderNotOwned", [["From", "SenderNotOwned"]]);
    expectError(otherProperty, 404, "NotFound");
    expectError(off, 400, "SmsNotEnabled");
    expect(empty.statusCode).toBe(400);
    const stored = (await list(t, tenant)).Messages.map((m: { MessageSid: string }) => m.MessageSid).sort();
    expect(stored).toEqual([first.MessageSid, second.MessageSid].sort());
    expect((await list(t, other)).Messages).toEqual([]);
  });
});

describe("webhook and lease options", () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
  });

  it.each([["ftp://x"], ["not a uri"], ["/relative/path"]])("DeliveryReceiptWebhookUri %j is InvalidWebhookUri", async (uri) => {
    const res = await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "hi", DeliveryReceiptWebhookUri: uri });
    expectError(res, 400, "InvalidWebhookUri", [["DeliveryReceiptWebhookUri", "InvalidWebhookUri"]]);
  });

  it.each([["http://127.0.0.1/x"], ["http://localhost/x"], ["http://10.1.2.3/x"], ["http://169.254.169.254/latest"], ["http://[::1]/x"]])(
    "private target %s is refused by default",
    async (uri) => {
      expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "hi", DeliveryReceiptWebhookUri: uri }), 400, "InvalidWebhookUri", [
        ["DeliveryReceiptWebhookUri", "InvalidWebhookUri"],
      ]);
      expectError(await send(t, tenant, { To: ukRecipient(), Text: "hi", WebhookUri: uri }), 400, "InvalidWebhookUri", [["WebhookUri", "InvalidWebhookUri"]]);
    },
  );

  it("a public https webhook is accepted", async () => {
    const to = ukRecipient();
    const res = await send(t, tenant, {
      From: "Acme",
      To: to,
      Text: "hi",
      DeliveryReceiptWebhookUri: "https://example.com/dr",
      WebhookUri: "https://example.com/r",
    });
    expectMessage(res, tenant, { From: "Acme", To: to, Text: "hi" });
  });

  it.each([["post"], ["Get"], ["POST"], ["GET"]])("webhook method %s is accepted", async (m) => {
    const to = ukRecipient();
    const res = await send(t, tenant, {
      To: to,
      Text: "hi",
      DeliveryReceiptWebhookUri: "https://example.com/dr",
      DeliveryReceiptWebhookMethod: m,
      WebhookUri: "https://example.com/r",
      WebhookMethod: m,
    });
    expectMessage(res, tenant, { From: POOL_RE, To: to, Text: "hi" });
  });

  it("webhook method PUT is InvalidWebhookMethod", async () => {
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "hi", DeliveryReceiptWebhookMethod: "PUT" }), 400, "InvalidWebhookMethod", [
      ["DeliveryReceiptWebhookMethod", "InvalidWebhookMethod"],
    ]);
    expectError(await send(t, tenant, { To: ukRecipient(), Text: "hi", WebhookMethod: "PUT" }), 400, "InvalidWebhookMethod", [
      ["WebhookMethod", "InvalidWebhookMethod"],
    ]);
  });

  it("ForwardToSms that is not E164 is InvalidRecipient", async () => {
    expectError(await send(t, tenant, { To: ukRecipient(), Text: "hi", ForwardToSms: "12345" }), 400, "InvalidRecipient", [
      ["ForwardToSms", "InvalidRecipient"],
    ]);
  });

  it("ForwardFromSms of 12 characters is InvalidSenderId; 11 characters and E164 are accepted", async () => {
    expectError(await send(t, tenant, { To: ukRecipient(), Text: "hi", ForwardFromSms: "AcmeShop1234" }), 400, "InvalidSenderId", [
      ["ForwardFromSms", "InvalidSenderId"],
    ]);
    expect((await send(t, tenant, { To: ukRecipient(), Text: "hi", ForwardFromSms: "AcmeShop123" })).statusCode).toBe(200);
    expect((await send(t, tenant, { To: ukRecipient(), Text: "hi", ForwardToSms: "+447700900123", ForwardFromSms: tenant.ownedNumber })).statusCode).toBe(200);
  });

  it("ForwardToEmail and ForwardFromEmail that are not e-mail addresses are InvalidEmail", async () => {
    expectError(await send(t, tenant, { To: ukRecipient(), Text: "hi", ForwardToEmail: "nope" }), 400, "InvalidEmail", [["ForwardToEmail", "InvalidEmail"]]);
    expectError(await send(t, tenant, { To: ukRecipient(), Text: "hi", ForwardFromEmail: "a@b" }), 400, "InvalidEmail", [["ForwardFromEmail", "InvalidEmail"]]);
    expect(
      (await send(t, tenant, { To: ukRecipient(), Text: "hi", ForwardToEmail: "ops@example.com", ForwardFromEmail: "desk@switchboard.invalid" })).statusCode,
    ).toBe(200);
  });

  it("lease options are validated even when From is an alphanumeric ID", async () => {
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "hi", ForwardToEmail: "nope" }), 400, "InvalidEmail", [
      ["ForwardToEmail", "InvalidEmail"],
    ]);
  });

  it("several bad fields in one request are all listed in Errors", async () => {
    t.clock.set(T0);
    const res = await send(t, tenant, {
      From: "Acme!",
      To: "12345",
      Text: "",
      Schedule: nowSeconds(t) + 1_209_601,
      DeliveryReceiptWebhookUri: "ftp://x",
      DeliveryReceiptWebhookMethod: "PUT",
      WebhookUri: "not a uri",
      WebhookMethod: "DELETE",
      ForwardToSms: "+1",
      ForwardFromSms: "AcmeShop1234",
      ForwardToEmail: "nope",
      ForwardFromEmail: "nope2",
    });
    const rs = expectError(res, 400, "InvalidRecipient", [
      ["To", "InvalidRecipient"],
      ["From", "InvalidSenderId"],
      ["Text", "MissingParameter"],
      ["Schedule", "InvalidSchedule"],
      ["DeliveryReceiptWebhookUri", "InvalidWebhookUri"],
      ["DeliveryReceiptWebhookMethod", "InvalidWebhookMethod"],
      ["WebhookUri", "InvalidWebhookUri"],
      ["WebhookMethod", "InvalidWebhookMethod"],
      ["ForwardToSms", "InvalidRecipient"],
      ["ForwardFromSms", "InvalidSenderId"],
      ["ForwardToEmail", "InvalidEmail"],
      ["ForwardFromEmail", "InvalidEmail"],
    ]);
    expect(rs.Errors[0].FieldName).toBe("To");
  });

  it("several wrong JSON types are all listed as InvalidParameter", async () => {
    const res = await send(t, tenant, { To: 447700900123, Text: ["hi"], DeliveryReceipt: "yes" });
    expectError(res, 400, "InvalidParameter", [
      ["To", "InvalidParameter"],
      ["Text", "InvalidParameter"],
      ["DeliveryReceipt", "InvalidParameter"],
    ]);
  });

  it("a body that is not JSON is MalformedRequest", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth, "content-type": "application/json" },
      payload: "{not json",
    });
    expectError(res, 400, "MalformedRequest");
  });

  it("private webhook targets are accepted when the operator allows them", async () => {
    const t2 = await createTestApp({ now: T0, webhookAllowPrivate: true });
    try {
      await addPoolNumbers(t2.app, 1);
      const tenant2 = await createTenant(t2.app);
      for (const uri of ["http://127.0.0.1/x", "http://localhost/x"]) {
        const to = ukRecipient();
        const res = await send(t2, tenant2, { From: "Acme", To: to, Text: "hi", DeliveryReceiptWebhookUri: uri });
        expectMessage(res, tenant2, { From: "Acme", To: to, Text: "hi" });
        const res2 = await send(t2, tenant2, { To: ukRecipient(), Text: "hi", WebhookUri: uri });
        expect(res2.statusCode, res2.body).toBe(200);
      }
      // Still only http(s).
      expectError(
        await send(t2, tenant2, { From: "Acme", To: ukRecipient(), Text: "hi", DeliveryReceiptWebhookUri: "ftp://127.0.0.1/x" }),
        400,
        "InvalidWebhookUri",
        [["DeliveryReceiptWebhookUri", "InvalidWebhookUri"]],
      );
    } finally {
      await t2.close();
    }
  });
});

describe("Idempotency-Key", () => {
  it("the same key twice returns the same message and creates one", async () => {
    t.clock.set(T0);
    const tenant = await createTenant(t.app);
    const to = ukRecipient();
    const first = expectMessage(await send(t, tenant, { From: "Acme", To: to, Text: "once" }, { "idempotency-key": "k-1" }), tenant, {
      From: "Acme",
      To: to,
      Text: "once",
    });
    const again = await send(t, tenant, { From: "Acme", To: to, Text: "once" }, { "idempotency-key": "k-1" });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toStrictEqual(first);
    const l = await list(t, tenant);
    expect(l.TotalCount).toBe(1);
    expect(l.Messages.map((m: any) => m.MessageSid)).toEqual([first.MessageSid]);

    // A different key is a different send.
    const other = await send(t, tenant, { From: "Acme", To: to, Text: "once" }, { "idempotency-key": "k-2" });
    expect(other.statusCode).toBe(200);
    expect(other.json().MessageSid).not.toBe(first.MessageSid);
    expect((await list(t, tenant)).TotalCount).toBe(2);
  });

  it("a leased send repeated with the same key reuses the message and takes no second lease", async () => {
    t.clock.set(T0);
    const tenant = await createTenant(t.app);
    const to = ukRecipient();
    const first = (await send(t, tenant, { To: to, Text: "leased" }, { "idempotency-key": "lease-key" })).json();
    const again = (await send(t, tenant, { To: to, Text: "leased" }, { "idempotency-key": "lease-key" })).json();
    expect(again).toStrictEqual(first);
    // One live lease for `to`: four more leases are possible, then the limit.
    for (let i = 0; i < 4; i++) expect((await send(t, tenant, { To: to, Text: "more" })).statusCode).toBe(200);
    expectError(await send(t, tenant, { To: to, Text: "more" }), 400, "LeaseLimitReached");
  });

  it("keys are per account: another account's equal key is a new message", async () => {
    t.clock.set(T0);
    const a = await createTenant(t.app);
    const b = await createTenant(t.app);
    const to = ukRecipient();
    const ma = (await send(t, a, { From: "Acme", To: to, Text: "x" }, { "idempotency-key": "shared" })).json();
    const mb = (await send(t, b, { From: "Acme", To: to, Text: "x" }, { "idempotency-key": "shared" })).json();
    expect(ma.MessageSid).not.toBe(mb.MessageSid);
    expect(mb.AccountSid).toBe(b.accountSid);
  });

  it("a key is remembered for 24 hours: at 24 h - 1 s the same message, after 24 h a new one", async () => {
    t.clock.set(T0);
    const tenant = await createTenant(t.app);
    const to = ukRecipient();
    const first = (await send(t, tenant, { From: "Acme", To: to, Text: "day" }, { "idempotency-key": "day-key" })).json();
    t.clock.advance(DAY - 1000);
    expect((await send(t, tenant, { From: "Acme", To: to, Text: "day" }, { "idempotency-key": "day-key" })).json().MessageSid).toBe(first.MessageSid);
    t.clock.advance(2000);
    const later = await send(t, tenant, { From: "Acme", To: to, Text: "day" }, { "idempotency-key": "day-key" });
    expect(later.statusCode).toBe(200);
    expect(later.json().MessageSid).not.toBe(first.MessageSid);
    // And the new one is now what the key returns.
    expect((await send(t, tenant, { From: "Acme", To: to, Text: "day" }, { "idempotency-key": "day-key" })).json().MessageSid).toBe(later.json().MessageSid);
    expect((await list(t, tenant)).TotalCount).toBe(2);
    t.clock.set(T0);
  });

  it("a key is remembered for exactly 24 hours (86400 s): 1 ms before the same message, at that instant a new one", async () => {
    t.clock.set(T0);
    const tenant = await createTenant(t.app);
    const to = ukRecipient();
    const body = { From: "Acme", To: to, Text: "instant" };
    const first = (await send(t, tenant, body, { "idempotency-key": "instant-key" })).json();
    // The documented lifetime as a literal (docs/api.md, Idempotency-Key), not IDEMPOTENCY_TTL_MS.
    const TWENTY_FOUR_HOURS_MS = 86_400_000;
    t.clock.set(T0.getTime() + TWENTY_FOUR_HOURS_MS - 1);
    expect((await send(t, tenant, body, { "idempotency-key": "instant-key" })).json().MessageSid).toBe(first.MessageSid);
    t.clock.set(T0.getTime() + TWENTY_FOUR_HOURS_MS);
    const fresh = await send(t, tenant, body, { "idempotency-key": "instant-key" });
    expect(fresh.statusCode, fresh.body).toBe(200);
    expect(fresh.json().MessageSid).not.toBe(first.MessageSid);
    expect((await list(t, tenant)).TotalCount).toBe(2);
    t.clock.set(T0);
  });

  it("a key of 255 characters is accepted, 256 is 400 InvalidParameter naming Idempotency-Key", async () => {
    t.clock.set(T0);
    const tenant = await createTenant(t.app);
    expect((await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x" }, { "idempotency-key": "k".repeat(255) })).statusCode).toBe(200);
    const res = await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "x" }, { "idempotency-key": "k".repeat(256) });
    expectError(res, 400, "InvalidParameter", [["Idempotency-Key", "InvalidParameter"]]);
    expect((await list(t, tenant)).TotalCount).toBe(1);
  });

  it("credentials are checked first: a bad key without valid credentials is 401, not 400", async () => {
    const tenant = await createTenant(t.app);
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: `Basic ${Buffer.from(`${tenant.accountSid}:wrong-token`).toString("base64")}`, "idempotency-key": "" },
      payload: { From: "Acme", To: ukRecipient(), Text: "x" },
    });
    expectError(res, 401, "Unauthorized", []);
  });

  it("concurrent sends with the same key create one message", async () => {
    t.clock.set(T0);
    const tenant = await createTenant(t.app);
    const to = ukRecipient();
    const results = await Promise.all(
      Array.from({ length: 6 }, () => send(t, tenant, { From: tenant.ownedNumber, To: to, Text: "race" }, { "idempotency-key": "race-key" })),
    );
    for (const r of results) expect(r.statusCode, r.body).toBe(200);
    const sids = new Set(results.map((r) => r.json().MessageSid));
    expect(sids.size).toBe(1);
    expect((await list(t, tenant)).TotalCount).toBe(1);
  });

  it("concurrent leased sends with the same key create one message and one lease", async () => {
    t.clock.set(T0);
    const tenant = await createTenant(t.app);
    const to = ukRecipient();
    const results = await Promise.all(Array.from({ length: 4 }, () => send(t, tenant, { To: to, Text: "race" }, { "idempotency-key": "race-lease" })));
    for (const r of results) expect(r.statusCode, r.body).toBe(200);
    expect(new Set(results.map((r) => r.json().MessageSid)).size).toBe(1);
    expect((await list(t, tenant)).TotalCount).toBe(1);
    for (let i = 0; i < 4; i++) expect((await send(t, tenant, { To: to, Text: "more" })).statusCode).toBe(200);
    expectError(await send(t, tenant, { To: to, Text: "more" }), 400, "LeaseLimitReached");
  });
});

describe("tenancy and authentication", () => {
  let tenant: Tenant;
  let other: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
    other = await createTenant(t.app);
  });

  it("a property of another account is 404 NotFound", async () => {
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "hi" }, {}, other.propertySid), 404, "NotFound");
    expect((await list(t, other)).TotalCount).toBe(0);
  });

  it.each([["PRxyz"], ["PR" + "0".repeat(30)], ["pr" + "a".repeat(30)], ["AC" + "A".repeat(30)]])("PropertySid %s is 404 NotFound", async (sid) => {
    expectError(await send(t, tenant, { From: "Acme", To: ukRecipient(), Text: "hi" }, {}, sid), 404, "NotFound");
  });

  it("a PropertySid in the body does not override the path", async () => {
    const to = ukRecipient();
    const res = await send(t, tenant, { PropertySid: other.propertySid, From: "Acme", To: to, Text: "hi" });
    expectMessage(res, tenant, { From: "Acme", To: to, Text: "hi" });
  });

  it("a wrong token is 401 Unauthorized with WWW-Authenticate", async () => {
    const bad = { ...tenant, auth: `Basic ${Buffer.from(`${tenant.accountSid}:wrong-token`).toString("base64")}` };
    const res = await send(t, bad, { From: "Acme", To: ukRecipient(), Text: "hi" });
    expectError(res, 401, "Unauthorized");
    expect(res.headers["www-authenticate"]).toBe('Basic realm="switchboard"');
  });

  it("another account's token is 401", async () => {
    const mixed = { ...tenant, auth: `Basic ${Buffer.from(`${tenant.accountSid}:${other.token}`).toString("base64")}` };
    expectError(await send(t, mixed, { From: "Acme", To: ukRecipient(), Text: "hi" }), 401, "Unauthorized");
  });

  it("no credentials is 401 Unauthorized with WWW-Authenticate", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      payload: { From: "Acme", To: ukRecipient(), Text: "hi" },
    });
    expectError(res, 401, "Unauthorized");
    expect(res.headers["www-authenticate"]).toBe('Basic realm="switchboard"');
  });

  it("the operator's bearer token is not account credentials", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: "Bearer test-admin-token-0123456789abcdefghijkl" },
      payload: { From: "Acme", To: ukRecipient(), Text: "hi" },
    });
    expectError(res, 401, "Unauthorized");
  });
});

// ---------------------------------------------------------------------------------------------
// Leased senders: each test on its own app, so the pool and the clock are its own.

describe("leased senders", () => {
  async function withApp(poolSize: number, fn: (t: TestApp, tenant: Tenant, pool: string[]) => Promise<void>) {
    const app = await createTestApp({ now: T0 });
    try {
      const p = await addPoolNumbers(app.app, poolSize);
      const tenant = await createTenant(app.app);
      await fn(app, tenant, p);
    } finally {
      await app.close();
    }
  }

  it("with 6 pool numbers, 5 leases to one recipient use 5 distinct numbers and the 6th is LeaseLimitReached", async () => {
    await withApp(6, async (t, tenant, p) => {
      const to = "+14155550100";
      const froms: string[] = [];
      for (let i = 0; i < 5; i++) {
        const msg = expectMessage(await send(t, tenant, { To: to, Text: `n${i}` }), tenant, { From: POOL_RE, To: to, Text: `n${i}` });
        froms.push(msg.From);
      }
      expect(new Set(froms).size).toBe(5);
      for (const f of froms) expect(p).toContain(f);
      expectError(await send(t, tenant, { To: to, Text: "six" }), 400, "LeaseLimitReached");
      // An alphanumeric From to a US number needs a lease too.
      expectError(await send(t, tenant, { From: "Acme", To: to, Text: "six" }), 400, "LeaseLimitReached");
      // Non-leased senders are not limited.
      expect((await send(t, tenant, { From: tenant.ownedNumber, To: to, Text: "own" })).statusCode).toBe(200);
      // Another recipient is not affected.
      expect((await send(t, tenant, { To: "+14155550101", Text: "other" })).statusCode).toBe(200);
      expect((await list(t, tenant)).TotalCount).toBe(7);
    });
  });

  it("6 concurrent leased sends to one recipient: exactly 5 succeed and 1 is LeaseLimitReached", async () => {
    await withApp(6, async (t, tenant) => {
      const to = "+14155550102";
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => send(t, tenant, { To: to, Text: `c${i}` })));
      const ok = results.filter((r) => r.statusCode === 200);
      const refused = results.filter((r) => r.statusCode !== 200);
      expect(ok.length).toBe(5);
      expect(refused.length).toBe(1);
      expectError(refused[0], 400, "LeaseLimitReached");
      expect(new Set(ok.map((r) => r.json().From)).size).toBe(5);
      expect((await list(t, tenant)).TotalCount).toBe(5);
    });
  });

  it("with 2 pool numbers, a 3rd lease to one recipient is NoLeasedNumberAvailable, another recipient still gets one", async () => {
    await withApp(2, async (t, tenant, p) => {
      const to = "+14155550103";
      const a = (await send(t, tenant, { To: to, Text: "1" })).json();
      const b = (await send(t, tenant, { To: to, Text: "2" })).json();
      expect([a.From, b.From].sort()).toEqual([...p].sort());
      expectError(await send(t, tenant, { To: to, Text: "3" }), 400, "NoLeasedNumberAvailable");
      const other = "+14155550104";
      const c = expectMessage(await send(t, tenant, { To: other, Text: "x" }), tenant, { From: POOL_RE, To: other, Text: "x" });
      expect(p).toContain(c.From);
    });
  });

  it("leases last 30 days: at 30 days - 1 s the limit holds, at 30 days + 1 s it frees and numbers are reused", async () => {
    await withApp(5, async (t, tenant, p) => {
      const to = "+14155550105";
      const first: string[] = [];
      for (let i = 0; i < 5; i++) first.push((await send(t, tenant, { To: to, Text: `a${i}` })).json().From);
      expect([...first].sort()).toEqual([...p].sort());
      t.clock.set(T0.getTime() + 30 * DAY - 1000);
      expectError(await send(t, tenant, { To: to, Text: "early" }), 400, "LeaseLimitReached");
      t.clock.set(T0.getTime() + 30 * DAY + 1000);
      const second: string[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await send(t, tenant, { To: to, Text: `b${i}` });
        expect(r.statusCode, r.body).toBe(200);
        second.push(r.json().From);
      }
      expect([...second].sort()).toEqual([...first].sort());
      expectError(await send(t, tenant, { To: to, Text: "again" }), 400, "LeaseLimitReached");
    });
  });

  it("a lease ends at exactly 30 days (2592000 s): the limit holds 1 ms before, and not at that instant", async () => {
    await withApp(5, async (t, tenant) => {
      const to = "+14155550107";
      t.clock.set(T0);
      for (let i = 0; i < 5; i++) expect((await send(t, tenant, { To: to, Text: `a${i}` })).statusCode).toBe(200);
      // The documented lifetime as a literal (docs/api.md, leased senders), not LEASE_DAYS.
      const THIRTY_DAYS_MS = 2_592_000_000;
      t.clock.set(T0.getTime() + THIRTY_DAYS_MS - 1);
      expectError(await send(t, tenant, { To: to, Text: "1 ms early" }), 400, "LeaseLimitReached");
      t.clock.set(T0.getTime() + THIRTY_DAYS_MS);
      const r = await send(t, tenant, { To: to, Text: "on the instant" });
      expect(r.statusCode, r.body).toBe(200);
    });
  });

  it("a scheduled leased send's lease runs from the send request", async () => {
    await withApp(5, async (t, tenant) => {
      const to = "+14155550106";
      const schedule = Math.floor(T0.getTime() / 1000) + 14 * 86400;
      for (let i = 0; i < 5; i++) expect((await send(t, tenant, { To: to, Text: `s${i}`, Schedule: schedule })).statusCode).toBe(200);
      t.clock.set(T0.getTime() + 30 * DAY + 1000);
      expect((await send(t, tenant, { To: to, Text: "after" })).statusCode).toBe(200);
    });
  });
});
