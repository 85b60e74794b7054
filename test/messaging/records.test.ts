/**
 * Message records through REST: GET one record, list with filters and paging, cancel, and batch
 * send. Exact status codes and exact JSON bodies.
 */
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addPoolNumbers, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const MESSAGE_KEYS = ["AccountSid", "From", "MessageSid", "PropertySid", "Text", "To"];
const RECORD_KEYS = [
  "AccountSid",
  "Carrier",
  "CarrierError",
  "Created",
  "DeliveryReceipt",
  "Delivered",
  "Direction",
  "Encoding",
  "ErrorCode",
  "From",
  "MessageSid",
  "NumSegments",
  "Price",
  "PriceUnit",
  "PropertySid",
  "Received",
  "Redacted",
  "Schedule",
  "SmartEncoded",
  "Status",
  "Submitted",
  "Text",
  "To",
].sort();
const SID = (prefix: string) => expect.stringMatching(new RegExp(`^${prefix}[A-Z0-9]{30}$`));
const T0 = new Date("2026-11-22T12:00:00Z");
const T0S = Math.floor(T0.getTime() / 1000);
const POOL_RE = /^\+1202555\d{4}$/;

let recipientSeq = 0;
function ukRecipient(): string {
  return `+447922${String(++recipientSeq).padStart(6, "0")}`;
}

let t: TestApp;
let pool: string[];

beforeAll(async () => {
  t = await createTestApp({ now: T0 });
  pool = await addPoolNumbers(t.app, 6);
});
afterAll(async () => {
  await t?.close();
});

function send(tenant: Tenant, body: object) {
  return t.app.inject({ method: "POST", url: `/v2/Properties/${tenant.propertySid}/Messages`, headers: { authorization: tenant.auth }, payload: body });
}
async function sent(tenant: Tenant, body: object): Promise<any> {
  const res = await send(tenant, body);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}
function get(tenant: Tenant, sid: string) {
  return t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
}
function del(tenant: Tenant, sid: string) {
  return t.app.inject({ method: "DELETE", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } });
}
function list(tenant: Tenant, query = "", propertySid = tenant.propertySid) {
  return t.app.inject({ method: "GET", url: `/v2/Properties/${propertySid}/Messages${query}`, headers: { authorization: tenant.auth } });
}
function batch(tenant: Tenant, body: unknown, propertySid = tenant.propertySid) {
  return t.app.inject({ method: "POST", url: `/v2/Properties/${propertySid}/BatchMessages`, headers: { authorization: tenant.auth }, payload: body as object });
}

function expectError(res: LightMyRequestResponse, status: number, errorCode: string, fields: [string, string][] = []): any {
  expect(res.statusCode, res.body).toBe(status);
  const body = res.json();
  expect(Object.keys(body)).toEqual(["ResponseStatus"]);
  return expectResponseStatus(body.ResponseStatus, errorCode, fields);
}

function expectResponseStatus(rs: any, errorCode: string, fields: [string, string][] = []): any {
  expect(Object.keys(rs).sort()).toEqual(["ErrorCode", "Errors", "Message"]);
  expect(rs.ErrorCode).toBe(errorCode);
  expect(rs.Message.length).toBeGreaterThan(0);
  const got = (rs.Errors as any[]).map((e) => [e.FieldName, e.ErrorCode]);
  const sortPairs = (l: unknown[][]) => [...l].sort((a, b) => String(a).localeCompare(String(b)));
  expect(sortPairs(got)).toEqual(sortPairs(fields));
  return rs;
}

function sids(res: LightMyRequestResponse): string[] {
  expect(res.statusCode, res.body).toBe(200);
  return res.json().Messages.map((m: any) => m.MessageSid);
}

describe("GET /v2/Messages/{MessageSid}", () => {
  let tenant: Tenant;
  let other: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
    other = await createTenant(t.app);
  });

  it("returns every record field of an immediate message", async () => {
    t.clock.set(T0);
    const to = ukRecipient();
    const msg = await sent(tenant, { From: "Acme", To: to, Text: "hello" });
    const res = await get(tenant, msg.MessageSid);
    expect(res.statusCode).toBe(200);
    const rec = res.json();
    expect(Object.keys(rec).sort()).toEqual(RECORD_KEYS);
    expect(rec).toStrictEqual({
      MessageSid: msg.MessageSid,
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: "Acme",
      To: to,
      Text: "hello",
      Direction: "Transmit",
      Status: "Processing",
      NumSegments: 1,
      Encoding: "GSM7",
      DeliveryReceipt: true,
      Schedule: 0,
      Created: T0S,
      Submitted: 0,
      Delivered: 0,
      Received: 0,
      ErrorCode: "",
      CarrierError: "",
      Redacted: false,
      Carrier: "",
      SmartEncoded: false,
      Price: "",
      PriceUnit: "AUD",
    });
  });

  it("returns every record field of a scheduled, leased, UCS2 message without delivery receipt", async () => {
    t.clock.set(T0.getTime() + 5000);
    const to = ukRecipient();
    const text = "Grüße 😀 ".repeat(10);
    const msg = await sent(tenant, { To: to, Text: text, Schedule: T0S + 3600, DeliveryReceipt: false });
    expect(msg.From).toMatch(POOL_RE);
    const rec = (await get(tenant, msg.MessageSid)).json();
    expect(Object.keys(rec).sort()).toEqual(RECORD_KEYS);
    expect(rec).toStrictEqual({
      MessageSid: msg.MessageSid,
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: msg.From,
      To: to,
      Text: text,
      Direction: "Transmit",
      Status: "Scheduled",
      NumSegments: 2,
      Encoding: "UCS2",
      DeliveryReceipt: false,
      Schedule: T0S + 3600,
      Created: T0S + 5,
      Submitted: 0,
      Delivered: 0,
      Received: 0,
      ErrorCode: "",
      CarrierError: "",
      Redacted: false,
      Carrier: "",
      SmartEncoded: false,
      Price: "",
      PriceUnit: "AUD",
    });
  });

  it("another account's message is 404 NotFound", async () => {
    const msg = await sent(tenant, { From: "Acme", To: ukRecipient(), Text: "mine" });
    expectError(await get(other, msg.MessageSid), 404, "NotFound");
    expectError(await del(other, msg.MessageSid), 404, "NotFound");
  });

  it.each([["MGxyz"], ["MG" + "0".repeat(30)], ["PR" + "A".repeat(30)]])("MessageSid %s is 404 NotFound", async (sid) => {
    expectError(await get(tenant, sid), 404, "NotFound");
    expectError(await del(tenant, sid), 404, "NotFound");
  });

  it("no credentials is 401", async () => {
    const msg = await sent(tenant, { From: "Acme", To: ukRecipient(), Text: "mine" });
    const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${msg.MessageSid}` });
    expectError(res, 401, "Unauthorized");
    expect(res.headers["www-authenticate"]).toBe('Basic realm="switchboard"');
  });
});

describe("GET /v2/Properties/{PropertySid}/Messages", () => {
  let tenant: Tenant;
  // m0 at B (sent at once), m1 at B+10 (scheduled), m2 at B+20 (at once), m3 at B+30 (scheduled).
  const B = T0S + 100_000;
  const m: string[] = [];

  beforeAll(async () => {
    tenant = await createTenant(t.app);
    for (let i = 0; i < 4; i++) {
      t.clock.set((B + i * 10) * 1000);
      const body = i % 2 === 1 ? { From: "Acme", To: ukRecipient(), Text: `m${i}`, Schedule: B + 86_400 } : { From: "Acme", To: ukRecipient(), Text: `m${i}` };
      m.push((await sent(tenant, body)).MessageSid);
    }
    t.clock.set(T0);
  });

  it("lists newest first with TotalCount, every item a full record", async () => {
    const res = await list(tenant);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(["Messages", "TotalCount"]);
    expect(body.TotalCount).toBe(4);
    expect(body.Messages.map((x: any) => x.MessageSid)).toEqual([m[3], m[2], m[1], m[0]]);
    for (const rec of body.Messages) expect(Object.keys(rec).sort()).toEqual(RECORD_KEYS);
    expect(body.Messages.map((x: any) => x.Created)).toEqual([B + 30, B + 20, B + 10, B]);
    expect(body.Messages[0]).toStrictEqual((await get(tenant, m[3])).json());
  });

  it("an empty property lists nothing", async () => {
    const empty = await createTenant(t.app);
    const res = await list(empty);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toStrictEqual({ Messages: [], TotalCount: 0 });
  });

  it("pages with Results_Count and Results_Skip; TotalCount ignores paging", async () => {
    expect(sids(await list(tenant, "?Results_Count=2"))).toEqual([m[3], m[2]]);
    expect(sids(await list(tenant, "?Results_Count=2&Results_Skip=2"))).toEqual([m[1], m[0]]);
    expect(sids(await list(tenant, "?Results_Count=2&Results_Skip=1"))).toEqual([m[2], m[1]]);
    const past = await list(tenant, "?Results_Skip=4");
    expect(past.json()).toStrictEqual({ Messages: [], TotalCount: 4 });
    expect((await list(tenant, "?Results_Count=1")).json().TotalCount).toBe(4);
  });

  it.each([["0"], ["1001"], ["-1"], ["abc"], ["1.5"]])("Results_Count=%s is 400 InvalidParameter", async (v) => {
    expectError(await list(tenant, `?Results_Count=${v}`), 400, "InvalidParameter", [["Results_Count", "InvalidParameter"]]);
  });

  it.each([["-1"], ["x"]])("Results_Skip=%s is 400 InvalidParameter", async (v) => {
    expectError(await list(tenant, `?Results_Skip=${v}`), 400, "InvalidParameter", [["Results_Skip", "InvalidParameter"]]);
  });

  it("Date_From is inclusive and Date_To exclusive, on Created", async () => {
    expect(sids(await list(tenant, `?Date_From=${B + 10}`))).toEqual([m[3], m[2], m[1]]);
    expect(sids(await list(tenant, `?Date_From=${B + 11}`))).toEqual([m[3], m[2]]);
    expect(sids(await list(tenant, `?Date_To=${B + 20}`))).toEqual([m[1], m[0]]);
    expect(sids(await list(tenant, `?Date_To=${B + 21}`))).toEqual([m[2], m[1], m[0]]);
    const between = await list(tenant, `?Date_From=${B + 10}&Date_To=${B + 30}`);
    expect(sids(between)).toEqual([m[2], m[1]]);
    expect(between.json().TotalCount).toBe(2);
    expect((await list(tenant, `?Date_From=${B + 20}&Date_To=${B + 20}`)).json()).toStrictEqual({ Messages: [], TotalCount: 0 });
    // Filters, not Schedule: m1 and m3 are scheduled a day later and still counted by Created.
    expect(sids(await list(tenant, `?Date_From=${B + 86_400}`))).toEqual([]);
  });

  it("Date_From and Date_To agree with Created for a message created within a second", async () => {
    const tn = await createTenant(t.app);
    const C = B + 1000;
    t.clock.set(C * 1000 + 500);
    const msg = await sent(tn, { From: "Acme", To: ukRecipient(), Text: "half" });
    t.clock.set(T0);
    expect((await get(tn, msg.MessageSid)).json().Created).toBe(C);
    expect(sids(await list(tn, `?Date_From=${C}`))).toEqual([msg.MessageSid]);
    expect(sids(await list(tn, `?Date_To=${C}`))).toEqual([]);
    expect(sids(await list(tn, `?Date_From=${C}&Date_To=${C + 1}`))).toEqual([msg.MessageSid]);
    expect(sids(await list(tn, `?Date_From=${C + 1}`))).toEqual([]);
  });

  it.each([["Date_From"], ["Date_To"]])("%s that is not an integer is 400 InvalidParameter", async (name) => {
    expectError(await list(tenant, `?${name}=yesterday`), 400, "InvalidParameter", [[name, "InvalidParameter"]]);
  });

  it("filters by Status and Direction", async () => {
    expect(sids(await list(tenant, "?Status=Scheduled"))).toEqual([m[3], m[1]]);
    expect(sids(await list(tenant, "?Status=Processing"))).toEqual([m[2], m[0]]);
    expect((await list(tenant, "?Status=Delivered")).json()).toStrictEqual({ Messages: [], TotalCount: 0 });
    expect(sids(await list(tenant, "?Direction=Transmit"))).toEqual([m[3], m[2], m[1], m[0]]);
    expect((await list(tenant, "?Direction=Receive")).json()).toStrictEqual({ Messages: [], TotalCount: 0 });
    const combined = await list(tenant, `?Status=Scheduled&Direction=Transmit&Date_To=${B + 30}&Results_Count=5`);
    expect(sids(combined)).toEqual([m[1]]);
    expect(combined.json().TotalCount).toBe(1);
  });

  it.each([["Sent"], ["scheduled"], ["Cancelled"]])("Status=%s is 400 InvalidParameter", async (s) => {
    expectError(await list(tenant, `?Status=${s}`), 400, "InvalidParameter", [["Status", "InvalidParameter"]]);
  });

  it("a bad Direction is 400 InvalidParameter", async () => {
    expectError(await list(tenant, "?Direction=Outbound"), 400, "InvalidParameter", [["Direction", "InvalidParameter"]]);
  });

  it("another account's property is 404; a malformed PropertySid is 404", async () => {
    const other = await createTenant(t.app);
    expectError(await list(other, "", tenant.propertySid), 404, "NotFound");
    expectError(await list(tenant, "", "PRnope"), 404, "NotFound");
  });

  it("a default page holds 200; Results_Count=1000 is allowed", async () => {
    const big = await createTenant(t.app);
    t.clock.set(T0);
    const items = (n: number) => Array.from({ length: n }, (_, i) => ({ From: "Acme", To: ukRecipient(), Text: `bulk ${i}` }));
    for (const n of [100, 100, 1]) {
      const res = await batch(big, { Messages: items(n) });
      expect(res.statusCode).toBe(200);
      expect(res.json().Messages.every((x: any) => typeof x.MessageSid === "string")).toBe(true);
    }
    const page = await list(big);
    expect(page.json().Messages.length).toBe(200);
    expect(page.json().TotalCount).toBe(201);
    const all = await list(big, "?Results_Count=1000");
    expect(all.json().Messages.length).toBe(201);
    expect(all.json().TotalCount).toBe(201);
    expect(new Set(all.json().Messages.map((x: any) => x.MessageSid)).size).toBe(201);
    expect((await list(big, "?Results_Skip=200")).json().Messages.length).toBe(1);
  });
});

describe("DELETE /v2/Messages/{MessageSid}", () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
  });

  it("cancels a Scheduled message; a second cancel is MessageNotCancelable", async () => {
    t.clock.set(T0);
    const to = ukRecipient();
    const msg = await sent(tenant, { From: "Acme", To: to, Text: "soon", Schedule: T0S + 600 });
    const before = (await get(tenant, msg.MessageSid)).json();
    expect(before.Status).toBe("Scheduled");

    const res = await del(tenant, msg.MessageSid);
    expect(res.statusCode, res.body).toBe(200);
    const rec = res.json();
    expect(Object.keys(rec).sort()).toEqual(RECORD_KEYS);
    expect(rec).toStrictEqual({ ...before, Status: "Canceled" });
    expect((await get(tenant, msg.MessageSid)).json()).toStrictEqual(rec);
    expect(sids(await list(tenant, "?Status=Canceled"))).toEqual([msg.MessageSid]);

    expectError(await del(tenant, msg.MessageSid), 400, "MessageNotCancelable");
    expect((await get(tenant, msg.MessageSid)).json().Status).toBe("Canceled");
  });

  it("a message sent at once (Processing) is MessageNotCancelable", async () => {
    t.clock.set(T0);
    const msg = await sent(tenant, { From: "Acme", To: ukRecipient(), Text: "now" });
    expectError(await del(tenant, msg.MessageSid), 400, "MessageNotCancelable");
    expect((await get(tenant, msg.MessageSid)).json().Status).toBe("Processing");
    // Also one whose Schedule was less than an hour in the past.
    const late = await sent(tenant, { From: "Acme", To: ukRecipient(), Text: "late", Schedule: T0S - 60 });
    expectError(await del(tenant, late.MessageSid), 400, "MessageNotCancelable");
  });

  it("canceling releases the lease: a recipient at the limit can take a new lease", async () => {
    t.clock.set(T0);
    const to = "+14155550190";
    const scheduled = [];
    for (let i = 0; i < 5; i++) scheduled.push(await sent(tenant, { To: to, Text: `s${i}`, Schedule: T0S + 3600 }));
    expect(new Set(scheduled.map((x) => x.From)).size).toBe(5);
    expectError(await send(tenant, { To: to, Text: "six" }), 400, "LeaseLimitReached");

    expect((await del(tenant, scheduled[0].MessageSid)).statusCode).toBe(200);
    const next = await sent(tenant, { To: to, Text: "after cancel" });
    expect(next.From).toMatch(POOL_RE);
    expect(pool).toContain(next.From);
    expect(scheduled.slice(1).map((x) => x.From)).not.toContain(next.From);
    expectError(await send(tenant, { To: to, Text: "seven" }), 400, "LeaseLimitReached");
  });
});

describe("POST /v2/Properties/{PropertySid}/BatchMessages", () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
  });

  it("answers 200 with each item's Message or ResponseStatus, in request order", async () => {
    t.clock.set(T0);
    const to = [ukRecipient(), ukRecipient(), "+14155550191", ukRecipient(), ukRecipient(), ukRecipient()];
    const res = await batch(tenant, {
      Messages: [
        { From: "Acme", To: to[0], Text: "good 1" },
        { From: "Acme", To: "12345", Text: "bad recipient" },
        { To: to[2], Text: "good leased" },
        { From: "Acme", To: to[3], Text: "too old", Schedule: T0S - 3600 },
        { From: tenant.ownedNumber, To: to[4], Text: "good scheduled", Schedule: T0S + 1_209_600 },
        { From: "Acme!", To: to[5], Text: "" },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(Object.keys(body)).toEqual(["Messages"]);
    const items = body.Messages;
    expect(items.length).toBe(6);

    const ok = (i: number, from: string | RegExp, text: string) => {
      expect(Object.keys(items[i]).sort()).toEqual(MESSAGE_KEYS);
      expect(items[i]).toStrictEqual({
        MessageSid: SID("MG"),
        AccountSid: tenant.accountSid,
        PropertySid: tenant.propertySid,
        From: typeof from === "string" ? from : expect.stringMatching(from),
        To: to[i],
        Text: text,
      });
    };
    const bad = (i: number, code: string, fields: [string, string][]) => {
      expect(Object.keys(items[i])).toEqual(["ResponseStatus"]);
      expectResponseStatus(items[i].ResponseStatus, code, fields);
    };
    ok(0, "Acme", "good 1");
    bad(1, "InvalidRecipient", [["To", "InvalidRecipient"]]);
    ok(2, POOL_RE, "good leased");
    bad(3, "ScheduleInPast", [["Schedule", "ScheduleInPast"]]);
    ok(4, tenant.ownedNumber, "good scheduled");
    bad(5, "InvalidSenderId", [
      ["From", "InvalidSenderId"],
      ["Text", "MissingParameter"],
    ]);

    // Only the good items were stored, with the same records a single send makes.
    const stored = await list(tenant);
    expect(stored.json().TotalCount).toBe(3);
    expect(sids(stored).sort()).toEqual([items[0].MessageSid, items[2].MessageSid, items[4].MessageSid].sort());
    expect((await get(tenant, items[4].MessageSid)).json()).toMatchObject({ Status: "Scheduled", Schedule: T0S + 1_209_600 });
    expect((await get(tenant, items[0].MessageSid)).json()).toMatchObject({ Status: "Processing", From: "Acme" });
  });

  it("each item meets the lease limit on its own", async () => {
    t.clock.set(T0);
    const to = "+14155550192";
    const res = await batch(tenant, { Messages: Array.from({ length: 7 }, (_, i) => ({ To: to, Text: `l${i}` })) });
    expect(res.statusCode).toBe(200);
    const items = res.json().Messages;
    for (let i = 0; i < 5; i++) expect(items[i].From).toMatch(POOL_RE);
    expect(new Set(items.slice(0, 5).map((x: any) => x.From)).size).toBe(5);
    for (const i of [5, 6]) {
      expect(Object.keys(items[i])).toEqual(["ResponseStatus"]);
      expectResponseStatus(items[i].ResponseStatus, "LeaseLimitReached");
    }
  });

  it("items of a disabled account each fail with SmsNotEnabled", async () => {
    const off = await createTenant(t.app, { smsEnabled: false });
    const res = await batch(off, {
      Messages: [
        { From: "Acme", To: ukRecipient(), Text: "x" },
        { To: ukRecipient(), Text: "y" },
      ],
    });
    expect(res.statusCode).toBe(200);
    for (const item of res.json().Messages) expectResponseStatus(item.ResponseStatus, "SmsNotEnabled");
    expect((await list(off)).json().TotalCount).toBe(0);
  });

  it("0 items is 400", async () => {
    expectError(await batch(tenant, { Messages: [] }), 400, "MissingParameter", [["Messages", "MissingParameter"]]);
    expectError(await batch(tenant, {}), 400, "MissingParameter", [["Messages", "MissingParameter"]]);
  });

  it("100 items are accepted, 101 is 400 InvalidParameter naming Messages", async () => {
    const tn = await createTenant(t.app);
    const items = (n: number) => Array.from({ length: n }, (_, i) => ({ From: "Acme", To: ukRecipient(), Text: `b${i}` }));
    expectError(await batch(tn, { Messages: items(101) }), 400, "InvalidParameter", [["Messages", "InvalidParameter"]]);
    expect((await list(tn)).json().TotalCount).toBe(0);
    const res = await batch(tn, { Messages: items(100) });
    expect(res.statusCode).toBe(200);
    expect(res.json().Messages.length).toBe(100);
    expect((await list(tn)).json().TotalCount).toBe(100);
  });

  it("Messages that is not an array is 400 InvalidParameter", async () => {
    expectError(await batch(tenant, { Messages: { To: ukRecipient() } }), 400, "InvalidParameter", [["Messages", "InvalidParameter"]]);
  });

  it("another account's property is 404", async () => {
    const other = await createTenant(t.app);
    expectError(await batch(other, { Messages: [{ From: "Acme", To: ukRecipient(), Text: "x" }] }, tenant.propertySid), 404, "NotFound");
  });
});
