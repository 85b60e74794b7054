/**
 * The operator's read routes over REST: GET /admin/v1/Accounts, /Accounts/{AccountSid},
 * /Accounts/{AccountSid}/Properties, /Numbers (with lease state) and /Addresses (the review
 * queue). Each group runs on its own fresh database so lists and totals are exact.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, admin, basic, createTestApp, type TestApp } from "../support/harness.js";
import { ACCOUNT_DEFAULTS as CONSENT_DEFAULTS } from "../support/account-defaults.js";

/** An account's consent and destination settings as created (docs/api.md#opt-out-stop-start-help). */

const BEARER = `Bearer ${ADMIN_TOKEN}`;
const DAY = 86_400_000;

/** A fresh app for one describe block; closed after it. */
function freshApp(): () => TestApp {
  let t: TestApp | undefined;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });
  return () => t!;
}

function get(t: TestApp, url: string, authorization: string | null = BEARER) {
  return t.app.inject({ method: "GET", url, headers: authorization === null ? {} : { authorization } });
}

async function ok(t: TestApp, url: string): Promise<any> {
  const res = await get(t, url);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const secs = (t: TestApp) => Math.floor(t.clock.now().getTime() / 1000);

/** The 400 body of field problems, in order. */
function fieldErrorsBody(...errors: [string, string][]) {
  return {
    ResponseStatus: {
      ErrorCode: "InvalidParameter",
      Message: errors.map(([, m]) => m).join(" "),
      Errors: errors.map(([FieldName, Message]) => ({ FieldName, ErrorCode: "InvalidParameter", Message })),
    },
  };
}

const PAGING_ERRORS: [string, [string, string]][] = [
  ["Results_Count=0", ["Results_Count", "Results_Count must be between 1 and 1000."]],
  ["Results_Count=1001", ["Results_Count", "Results_Count must be between 1 and 1000."]],
  ["Results_Count=-1", ["Results_Count", "Results_Count must be between 1 and 1000."]],
  ["Results_Skip=-1", ["Results_Skip", "Results_Skip must be 0 or more."]],
  ["Results_Count=ten", ["Results_Count", "Results_Count must be an integer."]],
];

describe("GET /admin/v1/Accounts and /admin/v1/Accounts/{AccountSid}", () => {
  const app = freshApp();
  const made: any[] = [];

  it("an empty list before any account exists", async () => {
    expect(await ok(app(), "/admin/v1/Accounts")).toStrictEqual({ Accounts: [], TotalCount: 0 });
  });

  it("lists accounts newest first with Created, never a token, token hash or webhook secret", async () => {
    const t = app();
    for (const [name, sms] of [
      ["First", true],
      ["Second", false],
      ["Third", true],
    ] as const) {
      const created = await admin(t.app, "/admin/v1/Accounts", { Name: name, SmsEnabled: sms });
      made.push({ ...created, Created: secs(t) });
      t.clock.advance(60_000);
    }
    const res = await get(t, "/admin/v1/Accounts");
    expect(res.statusCode).toBe(200);
    const expected = made
      .map((a) => ({ AccountSid: a.AccountSid, Name: a.Name, SmsEnabled: a.SmsEnabled, RestCompatibility: "None", Created: a.Created, ...CONSENT_DEFAULTS }))
      .reverse();
    expect(res.json()).toStrictEqual({ Accounts: expected, TotalCount: 3 });
    for (const a of made) {
      expect(res.body).not.toContain(a.Token);
      expect(res.body).not.toContain(a.WebhookSecret);
    }
    const hashes = await t.db.orm.em.fork().getConnection().execute<{ token_hash: string }[]>("select token_hash from accounts");
    for (const { token_hash } of hashes) expect(res.body).not.toContain(token_hash);
  });

  it("pages with Results_Count and Results_Skip; TotalCount counts every account", async () => {
    const t = app();
    const all = (await ok(t, "/admin/v1/Accounts")).Accounts;
    expect(await ok(t, "/admin/v1/Accounts?Results_Count=2")).toStrictEqual({ Accounts: all.slice(0, 2), TotalCount: 3 });
    expect(await ok(t, "/admin/v1/Accounts?Results_Count=2&Results_Skip=2")).toStrictEqual({ Accounts: all.slice(2), TotalCount: 3 });
    expect(await ok(t, "/admin/v1/Accounts?Results_Skip=3")).toStrictEqual({ Accounts: [], TotalCount: 3 });
    expect(await ok(t, "/admin/v1/Accounts?Results_Count=1&Results_Skip=1")).toStrictEqual({ Accounts: [all[1]], TotalCount: 3 });
    expect(await ok(t, "/admin/v1/Accounts?Results_Count=1000")).toStrictEqual({ Accounts: all, TotalCount: 3 });
    expect(await ok(t, "/admin/v1/Accounts?Results_Count=1")).toStrictEqual({ Accounts: [all[0]], TotalCount: 3 });
  });

  it.each(PAGING_ERRORS)("400 InvalidParameter for %s", async (query, error) => {
    const res = await get(app(), `/admin/v1/Accounts?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual(fieldErrorsBody(error));
  });

  it("gets one account, as updates leave it, without secrets", async () => {
    const t = app();
    const [first] = made;
    expect(await ok(t, `/admin/v1/Accounts/${first.AccountSid}`)).toStrictEqual({
      AccountSid: first.AccountSid,
      Name: "First",
      SmsEnabled: true,
      RestCompatibility: "None",
      Created: first.Created,
      ...CONSENT_DEFAULTS,
      // GetAccount only: today's use of the daily quota (none set).
      SegmentsToday: 0,
    });
    await admin(t.app, `/admin/v1/Accounts/${first.AccountSid}`, { Name: "Renamed", SmsEnabled: false });
    expect(await ok(t, `/admin/v1/Accounts/${first.AccountSid}`)).toStrictEqual({
      AccountSid: first.AccountSid,
      Name: "Renamed",
      SmsEnabled: false,
      RestCompatibility: "None",
      Created: first.Created,
      ...CONSENT_DEFAULTS,
      SegmentsToday: 0,
    });
    // A token rotation changes nothing the operator sees.
    await admin(t.app, `/admin/v1/Accounts/${first.AccountSid}/Token`);
    expect((await ok(t, `/admin/v1/Accounts/${first.AccountSid}`)).Name).toBe("Renamed");
  });

  it.each(["AC" + "0".repeat(30), "AC1", "PR" + "A".repeat(30), "ac" + "0".repeat(30)])("404 NotFound for the AccountSid %s", async (sid) => {
    const res = await get(app(), `/admin/v1/Accounts/${sid}`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${sid} was not found.`, Errors: [] } });
  });

  it("401 without the operator token, on every new route", async () => {
    const t = app();
    const sid = made[0].AccountSid;
    const auth = basic(sid, made[0].Token);
    for (const url of ["/admin/v1/Accounts", `/admin/v1/Accounts/${sid}`, `/admin/v1/Accounts/${sid}/Properties`, "/admin/v1/Numbers", "/admin/v1/Addresses"]) {
      for (const authorization of [null, "Bearer wrong", auth]) {
        const res = await get(t, url, authorization);
        expect(res.statusCode, `${url} ${authorization}`).toBe(401);
        expect(res.json()).toStrictEqual({
          ResponseStatus: { ErrorCode: "Unauthorized", Message: "Operator calls need `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`.", Errors: [] },
        });
      }
    }
  });
});

describe("GET /admin/v1/Accounts/{AccountSid}/Properties", () => {
  const app = freshApp();
  let owner: string;
  let props: any[];

  beforeAll(async () => {
    const t = app();
    owner = (await admin(t.app, "/admin/v1/Accounts", { Name: "Owner" })).AccountSid;
    const other = (await admin(t.app, "/admin/v1/Accounts", { Name: "Other" })).AccountSid;
    props = [];
    for (const [name, sms] of [
      ["Harbour", true],
      ["Hill", false],
      ["Lake", true],
    ] as const) {
      const p = await admin(t.app, `/admin/v1/Accounts/${owner}/Properties`, { Name: name, SmsEnabled: sms });
      props.push({ ...p, Created: secs(t) });
      await admin(t.app, `/admin/v1/Accounts/${other}/Properties`, { Name: `Other ${name}` });
      t.clock.advance(1000);
    }
  });

  it("lists only that account's properties, oldest first, with Created", async () => {
    const t = app();
    expect(props.map((p) => Object.keys(p))).toStrictEqual(props.map(() => ["PropertySid", "AccountSid", "Name", "SmsEnabled", "Created"]));
    expect(await ok(t, `/admin/v1/Accounts/${owner}/Properties`)).toStrictEqual({ Properties: props, TotalCount: 3 });
    expect(props.map((p) => [p.AccountSid, p.Name, p.SmsEnabled])).toStrictEqual([
      [owner, "Harbour", true],
      [owner, "Hill", false],
      [owner, "Lake", true],
    ]);
  });

  it("an account without properties has an empty list", async () => {
    const t = app();
    const bare = (await admin(t.app, "/admin/v1/Accounts", { Name: "Bare" })).AccountSid;
    expect(await ok(t, `/admin/v1/Accounts/${bare}/Properties`)).toStrictEqual({ Properties: [], TotalCount: 0 });
  });

  it("pages with Results_Count and Results_Skip", async () => {
    const t = app();
    const url = `/admin/v1/Accounts/${owner}/Properties`;
    expect(await ok(t, `${url}?Results_Count=2`)).toStrictEqual({ Properties: props.slice(0, 2), TotalCount: 3 });
    expect(await ok(t, `${url}?Results_Count=2&Results_Skip=2`)).toStrictEqual({ Properties: props.slice(2), TotalCount: 3 });
    expect(await ok(t, `${url}?Results_Skip=3`)).toStrictEqual({ Properties: [], TotalCount: 3 });
    expect(await ok(t, `${url}?Results_Count=1000`)).toStrictEqual({ Properties: props, TotalCount: 3 });
  });

  it.each(PAGING_ERRORS)("400 InvalidParameter for %s", async (query, error) => {
    const res = await get(app(), `/admin/v1/Accounts/${owner}/Properties?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual(fieldErrorsBody(error));
  });

  it("404 NotFound for an unknown or malformed account, before the paging is checked", async () => {
    for (const sid of ["AC" + "0".repeat(30), "AC1", props[0].PropertySid]) {
      const res = await get(app(), `/admin/v1/Accounts/${sid}/Properties?Results_Count=0`);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${sid} was not found.`, Errors: [] } });
    }
  });
});

describe("GET /admin/v1/Numbers", () => {
  const app = freshApp();
  const POOL = ["+12025550101", "+12025550102", "+12025550103"];
  const OWNED_A = "+447700900101";
  const OWNED_B = "+447700900102";
  let a: any;
  let b: any;
  let propertyA: string;
  let created: number;

  const entry = (number: string, accountSid: string, liveLeases = 0) => ({
    Number: number,
    AccountSid: accountSid,
    Friendly: "",
    AddressSid: "",
    Pool: accountSid === "",
    Leased: liveLeases > 0,
    LiveLeases: liveLeases,
    Created: created,
  });

  async function send(to: string, extra: object = {}): Promise<any> {
    const t = app();
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${propertyA}/Messages`,
      headers: { authorization: basic(a.AccountSid, a.Token) },
      payload: { To: to, Text: "Your room is ready", ...extra },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }

  beforeAll(async () => {
    const t = app();
    created = secs(t);
    a = await admin(t.app, "/admin/v1/Accounts", { Name: "A" });
    b = await admin(t.app, "/admin/v1/Accounts", { Name: "B" });
    propertyA = (await admin(t.app, `/admin/v1/Accounts/${a.AccountSid}/Properties`, { Name: "Site" })).PropertySid;
    // Added out of order: the list is ordered by number.
    for (const n of [POOL[2], POOL[0], POOL[1]]) await admin(t.app, "/admin/v1/Numbers", { Number: n });
    await admin(t.app, "/admin/v1/Numbers", { Number: OWNED_B, AccountSid: b.AccountSid });
    await admin(t.app, "/admin/v1/Numbers", { Number: OWNED_A, AccountSid: a.AccountSid });
  });

  it("lists every number, pool and owned, ordered by number, none leased yet", async () => {
    expect(await ok(app(), "/admin/v1/Numbers")).toStrictEqual({
      Numbers: [entry(POOL[0], ""), entry(POOL[1], ""), entry(POOL[2], ""), entry(OWNED_A, a.AccountSid), entry(OWNED_B, b.AccountSid)],
      TotalCount: 5,
    });
  });

  it("shows live leases: one pool number leased to two recipients, another to one; Friendly as configured", async () => {
    const t = app();
    // US recipients without a From get a leased pool number (the first free one for that recipient).
    expect((await send("+14155550001")).From).toBe(POOL[0]);
    expect((await send("+14155550002")).From).toBe(POOL[0]);
    expect((await send("+14155550001")).From).toBe(POOL[1]);
    const configured = await t.app.inject({
      method: "POST",
      url: `/v2/Numbers/${OWNED_A.slice(1)}`,
      headers: { authorization: basic(a.AccountSid, a.Token) },
      payload: { Friendly: "Front desk" },
    });
    expect(configured.statusCode).toBe(200);
    expect(await ok(t, "/admin/v1/Numbers")).toStrictEqual({
      Numbers: [
        entry(POOL[0], "", 2),
        entry(POOL[1], "", 1),
        entry(POOL[2], ""),
        { ...entry(OWNED_A, a.AccountSid), Friendly: "Front desk" },
        entry(OWNED_B, b.AccountSid),
      ],
      TotalCount: 5,
    });
  });

  it("filters: Pool=true only pool numbers, Pool=false only owned, AccountSid only that account's; both must hold", async () => {
    const t = app();
    const pool = await ok(t, "/admin/v1/Numbers?Pool=true");
    expect(pool.Numbers.map((n: any) => [n.Number, n.LiveLeases])).toStrictEqual([
      [POOL[0], 2],
      [POOL[1], 1],
      [POOL[2], 0],
    ]);
    expect(pool.TotalCount).toBe(3);
    const owned = await ok(t, "/admin/v1/Numbers?Pool=false");
    expect(owned.Numbers.map((n: any) => n.Number)).toStrictEqual([OWNED_A, OWNED_B]);
    expect(owned.TotalCount).toBe(2);
    expect(await ok(t, `/admin/v1/Numbers?AccountSid=${b.AccountSid}`)).toStrictEqual({ Numbers: [entry(OWNED_B, b.AccountSid)], TotalCount: 1 });
    expect(await ok(t, `/admin/v1/Numbers?AccountSid=${b.AccountSid}&Pool=false`)).toStrictEqual({ Numbers: [entry(OWNED_B, b.AccountSid)], TotalCount: 1 });
    expect(await ok(t, `/admin/v1/Numbers?AccountSid=${b.AccountSid}&Pool=true`)).toStrictEqual({ Numbers: [], TotalCount: 0 });
    const bare = (await admin(t.app, "/admin/v1/Accounts", { Name: "No numbers" })).AccountSid;
    expect(await ok(t, `/admin/v1/Numbers?AccountSid=${bare}`)).toStrictEqual({ Numbers: [], TotalCount: 0 });
  });

  it("pages with Results_Count and Results_Skip over the filtered list", async () => {
    const t = app();
    const all = (await ok(t, "/admin/v1/Numbers")).Numbers;
    expect(await ok(t, "/admin/v1/Numbers?Results_Count=2")).toStrictEqual({ Numbers: all.slice(0, 2), TotalCount: 5 });
    expect(await ok(t, "/admin/v1/Numbers?Results_Count=2&Results_Skip=4")).toStrictEqual({ Numbers: all.slice(4), TotalCount: 5 });
    expect(await ok(t, "/admin/v1/Numbers?Results_Skip=5")).toStrictEqual({ Numbers: [], TotalCount: 5 });
    expect(await ok(t, "/admin/v1/Numbers?Pool=true&Results_Count=1&Results_Skip=2")).toStrictEqual({ Numbers: [all[2]], TotalCount: 3 });
    expect(await ok(t, "/admin/v1/Numbers?Results_Count=1000")).toStrictEqual({ Numbers: all, TotalCount: 5 });
  });

  it("a canceled message's lease is released at once; every lease stops being live when it expires", async () => {
    const t = app();
    const later = await send("+14155550003", { Schedule: secs(t) + 3600 });
    expect(later.From).toBe(POOL[0]);
    expect((await ok(t, "/admin/v1/Numbers?Pool=true")).Numbers[0]).toStrictEqual(entry(POOL[0], "", 3));
    const cancel = await t.app.inject({ method: "DELETE", url: `/v2/Messages/${later.MessageSid}`, headers: { authorization: basic(a.AccountSid, a.Token) } });
    expect(cancel.statusCode).toBe(200);
    expect((await ok(t, "/admin/v1/Numbers?Pool=true")).Numbers[0]).toStrictEqual(entry(POOL[0], "", 2));

    // 30 days after the sends: the last second of the leases, then past them.
    t.clock.advance(30 * DAY - 1000);
    expect((await ok(t, "/admin/v1/Numbers?Pool=true")).Numbers.map((n: any) => n.LiveLeases)).toStrictEqual([2, 1, 0]);
    t.clock.advance(1000);
    expect(await ok(t, "/admin/v1/Numbers?Pool=true")).toStrictEqual({
      Numbers: [entry(POOL[0], ""), entry(POOL[1], ""), entry(POOL[2], "")],
      TotalCount: 3,
    });
  });

  it("400 InvalidParameter naming AccountSid for an unknown or malformed account, and for a Pool that is not a boolean", async () => {
    const t = app();
    for (const sid of ["AC" + "0".repeat(30), "AC1", propertyA]) {
      const res = await get(t, `/admin/v1/Numbers?AccountSid=${sid}`);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toStrictEqual(fieldErrorsBody(["AccountSid", `AccountSid "${sid}" is not an account.`]));
    }
    const both = await get(t, `/admin/v1/Numbers?AccountSid=AC1&Results_Count=0`);
    expect(both.json()).toStrictEqual(
      fieldErrorsBody(["AccountSid", 'AccountSid "AC1" is not an account.'], ["Results_Count", "Results_Count must be between 1 and 1000."]),
    );
    const pool = await get(t, "/admin/v1/Numbers?Pool=maybe");
    expect(pool.statusCode).toBe(400);
    expect(pool.json()).toStrictEqual(fieldErrorsBody(["Pool", "Pool must be true or false."]));
  });

  it.each(PAGING_ERRORS)("400 InvalidParameter for %s", async (query, error) => {
    const res = await get(app(), `/admin/v1/Numbers?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual(fieldErrorsBody(error));
  });
});

describe("GET /admin/v1/Addresses", () => {
  const app = freshApp();
  let a: any;
  let b: any;
  // In creation order, one second apart.
  const addresses: any[] = [];

  async function addAddress(account: any, body: object): Promise<any> {
    const t = app();
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Accounts/${account.AccountSid}/Addresses`,
      headers: { authorization: basic(account.AccountSid, account.Token) },
      payload: body,
    });
    expect(res.statusCode, res.body).toBe(200);
    t.clock.advance(1000);
    addresses.push(res.json());
    return res.json();
  }

  const US_NO_POSTCODE = { Line1: "1 Harbour Way", City: "San Francisco", CountryCode: "US" };
  const GB_VALID = { Line1: "10 Downing St", City: "London", CountryCode: "GB", PostalCode: "SW1A 2AA" };
  const byStatus = (status: string) => addresses.filter((x) => x.Status === status);

  beforeAll(async () => {
    const t = app();
    a = await admin(t.app, "/admin/v1/Accounts", { Name: "A" });
    b = await admin(t.app, "/admin/v1/Accounts", { Name: "B" });
    await addAddress(a, { ...US_NO_POSTCODE, Friendly: "a1" });
    await addAddress(b, { ...GB_VALID, Friendly: "b1" });
    await addAddress(b, { ...US_NO_POSTCODE, Friendly: "b2" });
    await addAddress(a, { ...GB_VALID, Friendly: "a2" });
    await addAddress(a, { ...US_NO_POSTCODE, Friendly: "a3" });
    expect(addresses.map((x) => x.Status)).toStrictEqual(["Pending", "Active", "Pending", "Active", "Pending"]);
  });

  it("lists the Pending addresses of every account, oldest first, as the Address resource", async () => {
    const pending = byStatus("Pending");
    expect(pending.map((x) => x.Friendly)).toStrictEqual(["a1", "b2", "a3"]);
    expect(await ok(app(), "/admin/v1/Addresses")).toStrictEqual({ Addresses: pending, TotalCount: 3 });
    expect(await ok(app(), "/admin/v1/Addresses?Status=Pending")).toStrictEqual({ Addresses: pending, TotalCount: 3 });
    expect(await ok(app(), "/admin/v1/Addresses?Status=")).toStrictEqual({ Addresses: pending, TotalCount: 3 });
  });

  it("Status=Active, Rejected or All; AccountSid narrows to one account", async () => {
    const t = app();
    expect(await ok(t, "/admin/v1/Addresses?Status=Active")).toStrictEqual({ Addresses: byStatus("Active"), TotalCount: 2 });
    expect(await ok(t, "/admin/v1/Addresses?Status=Rejected")).toStrictEqual({ Addresses: [], TotalCount: 0 });
    expect(await ok(t, "/admin/v1/Addresses?Status=All")).toStrictEqual({ Addresses: addresses, TotalCount: 5 });
    const ofA = addresses.filter((x) => x.AccountSid === a.AccountSid);
    expect(await ok(t, `/admin/v1/Addresses?AccountSid=${a.AccountSid}&Status=All`)).toStrictEqual({ Addresses: ofA, TotalCount: 3 });
    expect(await ok(t, `/admin/v1/Addresses?AccountSid=${b.AccountSid}`)).toStrictEqual({
      Addresses: addresses.filter((x) => x.AccountSid === b.AccountSid && x.Status === "Pending"),
      TotalCount: 1,
    });
  });

  it("pages with Results_Count and Results_Skip", async () => {
    const t = app();
    expect(await ok(t, "/admin/v1/Addresses?Status=All&Results_Count=2")).toStrictEqual({ Addresses: addresses.slice(0, 2), TotalCount: 5 });
    expect(await ok(t, "/admin/v1/Addresses?Status=All&Results_Count=2&Results_Skip=4")).toStrictEqual({ Addresses: addresses.slice(4), TotalCount: 5 });
    expect(await ok(t, "/admin/v1/Addresses?Results_Count=1&Results_Skip=1")).toStrictEqual({ Addresses: [byStatus("Pending")[1]], TotalCount: 3 });
    expect(await ok(t, "/admin/v1/Addresses?Results_Skip=3")).toStrictEqual({ Addresses: [], TotalCount: 3 });
    expect(await ok(t, "/admin/v1/Addresses?Results_Count=1000")).toStrictEqual({ Addresses: byStatus("Pending"), TotalCount: 3 });
  });

  it("a reviewed address leaves the queue and shows under its new status", async () => {
    const t = app();
    const [first, second] = byStatus("Pending");
    const approved = await admin(t.app, `/admin/v1/Addresses/${first.AddressSid}/Review`, { Status: "Active" });
    const rejected = await admin(t.app, `/admin/v1/Addresses/${second.AddressSid}/Review`, { Status: "Rejected" });
    const third = addresses[4];
    expect(await ok(t, "/admin/v1/Addresses")).toStrictEqual({ Addresses: [third], TotalCount: 1 });
    expect(await ok(t, "/admin/v1/Addresses?Status=Rejected")).toStrictEqual({ Addresses: [rejected], TotalCount: 1 });
    expect(await ok(t, "/admin/v1/Addresses?Status=Active")).toStrictEqual({ Addresses: [approved, addresses[1], addresses[3]], TotalCount: 3 });
    expect(approved).toStrictEqual({ ...first, Status: "Active" });
  });

  it("a deleted address is gone from every list", async () => {
    const t = app();
    const gone = addresses[4];
    const res = await t.app.inject({ method: "DELETE", url: `/v2/Addresses/${gone.AddressSid}`, headers: { authorization: basic(a.AccountSid, a.Token) } });
    expect(res.statusCode).toBe(200);
    expect(await ok(t, "/admin/v1/Addresses")).toStrictEqual({ Addresses: [], TotalCount: 0 });
    expect((await ok(t, "/admin/v1/Addresses?Status=All")).TotalCount).toBe(4);
  });

  it.each(["Approved", "pending", "ALL", "Active,Pending"])("400 InvalidParameter for Status=%s", async (status) => {
    const res = await get(app(), `/admin/v1/Addresses?Status=${encodeURIComponent(status)}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual(fieldErrorsBody(["Status", `Status must be Pending, Active, Rejected or All, not "${status}".`]));
  });

  it("400 InvalidParameter naming AccountSid for an unknown account; every problem at once", async () => {
    const t = app();
    const sid = "AC" + "0".repeat(30);
    expect((await get(t, `/admin/v1/Addresses?AccountSid=${sid}`)).json()).toStrictEqual(
      fieldErrorsBody(["AccountSid", `AccountSid "${sid}" is not an account.`]),
    );
    const all = await get(t, `/admin/v1/Addresses?AccountSid=${sid}&Status=Nope&Results_Skip=-1`);
    expect(all.statusCode).toBe(400);
    expect(all.json()).toStrictEqual(
      fieldErrorsBody(
        ["AccountSid", `AccountSid "${sid}" is not an account.`],
        ["Status", 'Status must be Pending, Active, Rejected or All, not "Nope".'],
        ["Results_Skip", "Results_Skip must be 0 or more."],
      ),
    );
  });

  it.each(PAGING_ERRORS)("400 InvalidParameter for %s", async (query, error) => {
    const res = await get(app(), `/admin/v1/Addresses?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual(fieldErrorsBody(error));
  });
});

describe("junk query strings on the operator list routes", () => {
  const app = freshApp();

  it.each([
    ["/admin/v1/Addresses", "Status", "%00"],
    ["/admin/v1/Addresses", "Status", "Pending%00"],
    ["/admin/v1/Addresses", "AccountSid", "%00"],
    ["/admin/v1/Numbers", "AccountSid", "AC%00"],
    ["/admin/v1/Numbers", "AccountSid", "A".repeat(5000)],
    ["/admin/v1/Numbers", "Pool", ""],
    ["/admin/v1/Numbers", "Pool", "%00"],
    ["/admin/v1/Accounts", "Results_Skip", "99999999999"],
    ["/admin/v1/Addresses", "Results_Count", "1.5"],
  ])("%s?%s=%s is a 400 InvalidParameter naming the parameter", async (path, param, value) => {
    const res = await get(app(), `${path}?${param}=${value}`);
    expect(res.statusCode).toBe(400);
    const status = res.json().ResponseStatus;
    expect(status.ErrorCode).toBe("InvalidParameter");
    expect(status.Errors.map((e: { FieldName: string }) => e.FieldName)).toStrictEqual([param]);
  });

  it("the largest Results_Skip is an empty page, on every list", async () => {
    const t = app();
    const sid = (await admin(t.app, "/admin/v1/Accounts", { Name: "Edge" })).AccountSid;
    expect(await ok(t, "/admin/v1/Accounts?Results_Skip=2147483647")).toStrictEqual({ Accounts: [], TotalCount: 1 });
    expect(await ok(t, `/admin/v1/Accounts/${sid}/Properties?Results_Skip=2147483647`)).toStrictEqual({ Properties: [], TotalCount: 0 });
    expect(await ok(t, "/admin/v1/Numbers?Results_Skip=2147483647")).toStrictEqual({ Numbers: [], TotalCount: 0 });
    expect(await ok(t, "/admin/v1/Addresses?Status=All&Results_Skip=2147483647")).toStrictEqual({ Addresses: [], TotalCount: 0 });
  });
});
