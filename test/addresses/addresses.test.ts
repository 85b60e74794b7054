import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

let t: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  t = await createTestApp();
  tenant = await createTenant(t.app);
});
afterAll(async () => {
  await t?.close();
});

const SID = /^AD[A-Z0-9]{30}$/;

function post(body: unknown, accountSid = tenant.accountSid, auth = tenant.auth) {
  return t.app.inject({ method: "POST", url: `/v2/Accounts/${accountSid}/Addresses`, headers: { authorization: auth }, payload: body as object });
}
function get(url: string, auth = tenant.auth) {
  return t.app.inject({ method: "GET", url, headers: { authorization: auth } });
}
function del(sid: string, auth = tenant.auth) {
  return t.app.inject({ method: "DELETE", url: `/v2/Addresses/${sid}`, headers: { authorization: auth } });
}
function configure(number: string, body: object, auth = tenant.auth) {
  return t.app.inject({ method: "POST", url: `/v2/Numbers/${number.replace(/^\+/, "")}`, headers: { authorization: auth }, payload: body });
}

const US = { Line1: "1 Market St", City: "San Francisco", CountryCode: "US", PostalCode: "94103" };
const GB = { Line1: "10 Downing Street", City: "London", CountryCode: "GB", PostalCode: "SW1A 1AA" };

/** The Address resource the service must answer with: exactly these eleven fields. */
function addressBody(sid: string, fields: Record<string, string>, status: string, accountSid = tenant.accountSid) {
  return {
    AddressSid: sid,
    AccountSid: accountSid,
    Friendly: fields.Friendly ?? "",
    Reference: fields.Reference ?? "",
    Line1: fields.Line1 ?? "",
    Line2: fields.Line2 ?? "",
    City: fields.City ?? "",
    Region: fields.Region ?? "",
    CountryCode: fields.CountryCode ?? "",
    PostalCode: fields.PostalCode ?? "",
    Status: status,
  };
}

async function add(body: Record<string, string>): Promise<any> {
  const res = await post(body);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

describe("POST /v2/Accounts/{AccountSid}/Addresses", () => {
  it("adds a well-formed US address as Active with exactly the eleven Address fields", async () => {
    const res = await post(US);
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    const body = res.json();
    expect(body.AddressSid).toMatch(SID);
    expect(body).toStrictEqual(addressBody(body.AddressSid, US, "Active"));
    expect(Object.keys(body)).toHaveLength(11);
  });

  it("adds a well-formed GB address with every optional field as Active", async () => {
    const full = {
      Friendly: "HQ",
      Reference: "ref-1",
      Line1: "10 Downing Street",
      Line2: "Westminster",
      City: "London",
      Region: "Greater London",
      CountryCode: "GB",
      PostalCode: "SW1A 1AA",
    };
    const body = await add(full);
    expect(body).toStrictEqual(addressBody(body.AddressSid, full, "Active"));
  });

  it("upper-cases the CountryCode: us → US", async () => {
    const body = await add({ ...US, CountryCode: "us" });
    expect(body).toStrictEqual(addressBody(body.AddressSid, { ...US, CountryCode: "US" }, "Active"));
    const again = await get(`/v2/Addresses/${body.AddressSid}`);
    expect(again.json().CountryCode).toBe("US");
  });

  it("ignores an AccountSid in the body: the path's account owns the address", async () => {
    const other = await createTenant(t.app);
    const body = await add({ ...US, AccountSid: other.accountSid });
    expect(body.AccountSid).toBe(tenant.accountSid);
  });

  it.each(["Line1", "City", "CountryCode"] as const)("400 MissingParameter when %s is missing", async (field) => {
    const body: Record<string, string> = { ...US };
    delete body[field];
    const res = await post(body);
    expect(res.statusCode).toBe(400);
    const rs = res.json().ResponseStatus;
    expect(rs.ErrorCode).toBe("MissingParameter");
    expect(rs.Errors).toStrictEqual([{ FieldName: field, ErrorCode: "MissingParameter", Message: rs.Message }]);
    expect(rs.Message).toContain(field);
  });

  it.each(["Line1", "City", "CountryCode"] as const)("400 MissingParameter when %s is blank", async (field) => {
    for (const blank of ["", "   ", "\t \n"]) {
      const res = await post({ ...US, [field]: blank });
      expect(res.statusCode).toBe(400);
      const rs = res.json().ResponseStatus;
      expect(rs.ErrorCode).toBe("MissingParameter");
      expect(rs.Errors.map((e: any) => [e.FieldName, e.ErrorCode])).toStrictEqual([[field, "MissingParameter"]]);
    }
  });

  it("names all three required fields when all are missing", async () => {
    const res = await post({ Friendly: "nothing else" });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "MissingParameter",
        Message:
          "Line1 is required: the first line of the street address. City is required. CountryCode is required: a two-letter ISO 3166-1 code such as US or GB.",
        Errors: [
          { FieldName: "Line1", ErrorCode: "MissingParameter", Message: "Line1 is required: the first line of the street address." },
          { FieldName: "City", ErrorCode: "MissingParameter", Message: "City is required." },
          { FieldName: "CountryCode", ErrorCode: "MissingParameter", Message: "CountryCode is required: a two-letter ISO 3166-1 code such as US or GB." },
        ],
      },
    });
  });

  it("an empty body names the three required fields too", async () => {
    const res = await t.app.inject({ method: "POST", url: `/v2/Accounts/${tenant.accountSid}/Addresses`, headers: { authorization: tenant.auth } });
    expect(res.statusCode).toBe(400);
    expect(res.json().ResponseStatus.Errors.map((e: any) => e.FieldName)).toStrictEqual(["Line1", "City", "CountryCode"]);
  });

  it.each(["XX", "USA", "1", "U", "U1", "ZZ", "uk", "EU"])("400 InvalidCountryCode for CountryCode %j", async (code) => {
    const res = await post({ ...US, CountryCode: code });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidCountryCode",
        Message: `CountryCode "${code}" is not a two-letter ISO 3166-1 country code such as US or GB.`,
        Errors: [
          {
            FieldName: "CountryCode",
            ErrorCode: "InvalidCountryCode",
            Message: `CountryCode "${code}" is not a two-letter ISO 3166-1 country code such as US or GB.`,
          },
        ],
      },
    });
  });

  it("a CountryCode of the wrong JSON type is 400 InvalidParameter naming it", async () => {
    const res = await post({ ...US, CountryCode: 1 });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: "CountryCode must be a string.",
        Errors: [{ FieldName: "CountryCode", ErrorCode: "InvalidParameter", Message: "CountryCode must be a string." }],
      },
    });
  });

  const TEXT = ["Friendly", "Reference", "Line1", "Line2", "City", "Region", "PostalCode"] as const;

  it.each(TEXT)("%s of 256 characters is 400 InvalidParameter; 255 is accepted", async (field) => {
    const tooLong = await post({ ...US, [field]: "a".repeat(256) });
    expect(tooLong.statusCode).toBe(400);
    expect(tooLong.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: `${field} is 256 characters long; the limit is 255.`,
        Errors: [{ FieldName: field, ErrorCode: "InvalidParameter", Message: `${field} is 256 characters long; the limit is 255.` }],
      },
    });
    const ok = await post({ ...US, [field]: "a".repeat(255) });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()[field]).toBe("a".repeat(255));
  });

  it("a CountryCode of 256 characters is one field problem, not two", async () => {
    const res = await post({ ...US, CountryCode: "A".repeat(256) });
    expect(res.statusCode).toBe(400);
    const rs = res.json().ResponseStatus;
    expect(rs.Errors).toHaveLength(1);
    expect(rs.Errors[0].FieldName).toBe("CountryCode");
    expect(["InvalidParameter", "InvalidCountryCode"]).toContain(rs.Errors[0].ErrorCode);
  });

  it("counts characters, not bytes: 255 two-byte characters are accepted", async () => {
    const body = await add({ ...US, Friendly: "é".repeat(255), Line2: "日".repeat(255) });
    expect(body.Friendly).toBe("é".repeat(255));
    expect(body.Line2).toBe("日".repeat(255));
  });

  it("reports several field problems together, one entry per field", async () => {
    const res = await post({ Line1: "x".repeat(300), City: "", CountryCode: "XX", Region: "r".repeat(256) });
    expect(res.statusCode).toBe(400);
    const rs = res.json().ResponseStatus;
    expect(rs.Errors.map((e: any) => [e.FieldName, e.ErrorCode]).sort()).toStrictEqual(
      [
        ["City", "MissingParameter"],
        ["CountryCode", "InvalidCountryCode"],
        ["Line1", "InvalidParameter"],
        ["Region", "InvalidParameter"],
      ].sort(),
    );
  });

  it("Pending when PostalCode is missing for a country that uses postal codes (US)", async () => {
    const { PostalCode: _, ...noPostal } = US;
    const body = await add(noPostal);
    expect(body).toStrictEqual(addressBody(body.AddressSid, noPostal, "Pending"));
    const blank = await add({ ...US, PostalCode: "   " });
    expect(blank.Status).toBe("Pending");
    expect(blank.PostalCode).toBe("");
  });

  it("Pending when PostalCode does not fit the country's format (US ABCDE, GB 12345)", async () => {
    expect((await add({ ...US, PostalCode: "ABCDE" })).Status).toBe("Pending");
    expect((await add({ ...GB, PostalCode: "12345" })).Status).toBe("Pending");
  });

  it("Active for US ZIP+4 and a lower-case GB postcode", async () => {
    expect((await add({ ...US, PostalCode: "94103-1234" })).Status).toBe("Active");
    expect((await add({ ...GB, PostalCode: "sw1a 1aa" })).Status).toBe("Active");
  });

  it("Active without a PostalCode for countries postcode-validator has no format for (HK, AE)", async () => {
    const hk = { Line1: "1 Queen's Road Central", City: "Hong Kong", CountryCode: "HK" };
    const hkBody = await add(hk);
    expect(hkBody).toStrictEqual(addressBody(hkBody.AddressSid, hk, "Active"));
    const ae = { Line1: "1 Sheikh Zayed Road", City: "Dubai", CountryCode: "ae" };
    const aeBody = await add(ae);
    expect(aeBody).toStrictEqual(addressBody(aeBody.AddressSid, { ...ae, CountryCode: "AE" }, "Active"));
  });

  it("trims surrounding whitespace of the stored texts", async () => {
    const body = await add({ Line1: "  1 Market St  ", City: " San Francisco ", CountryCode: " us ", PostalCode: " 94103 " });
    expect(body).toStrictEqual(addressBody(body.AddressSid, US, "Active"));
  });

  it("404 NotFound when the path's AccountSid is not the caller's", async () => {
    const other = await createTenant(t.app);
    const res = await post(US, other.accountSid);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toStrictEqual({
      ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${other.accountSid} was not found.`, Errors: [] },
    });
    const list = await get(`/v2/Accounts/${other.accountSid}/Addresses`, other.auth);
    expect(list.json()).toStrictEqual({ Addresses: [], TotalCount: 0 });
  });
});

describe("GET /v2/Addresses/{AddressSid}", () => {
  it("returns the stored Address resource", async () => {
    const created = await add({ ...GB, Friendly: "Office", Reference: "R-9", Region: "London" });
    const res = await get(`/v2/Addresses/${created.AddressSid}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toStrictEqual(created);
  });

  it.each([
    ["unknown", "AD" + "0".repeat(30)],
    ["lower case", "ad" + "a".repeat(30)],
    ["too short", "AD123"],
    ["wrong prefix", "MG" + "A".repeat(30)],
  ])("404 NotFound for an %s AddressSid", async (_what, sid) => {
    const res = await get(`/v2/Addresses/${sid}`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Address ${sid} was not found.`, Errors: [] } });
  });
});

describe("GET /v2/Accounts/{AccountSid}/Addresses", () => {
  let lister: Tenant;
  const created: any[] = [];
  const rows = [
    { Friendly: "Home", Reference: "r1", Line1: "1 A St", City: "Boston", Region: "MA", CountryCode: "US", PostalCode: "02108" },
    { Friendly: "Work", Reference: "r2", Line1: "2 B St", City: "Boston", Region: "MA", CountryCode: "US", PostalCode: "02109" },
    { Friendly: "Home", Reference: "r3", Line1: "3 C Rd", City: "London", Region: "", CountryCode: "GB", PostalCode: "SW1A 1AA" },
    { Friendly: "Depot", Reference: "r4", Line1: "4 D Rd", City: "Leeds", Region: "West Yorkshire", CountryCode: "GB", PostalCode: "LS1 1UR" },
    { Friendly: "", Reference: "", Line1: "5 E Ave", City: "Hong Kong", Region: "", CountryCode: "HK", PostalCode: "" },
  ];

  beforeAll(async () => {
    lister = await createTenant(t.app);
    for (const row of rows) {
      // Distinct creation times make the oldest-first order deterministic.
      t.clock.advance(1000);
      const res = await post(row, lister.accountSid, lister.auth);
      expect(res.statusCode, res.body).toBe(200);
      created.push(res.json());
    }
  });

  const list = (query = "") => get(`/v2/Accounts/${lister.accountSid}/Addresses${query}`, lister.auth);

  it("lists the account's addresses oldest first with TotalCount", async () => {
    const res = await list();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toStrictEqual({ Addresses: created, TotalCount: 5 });
  });

  it.each([
    ["Friendly=Home", [0, 2]],
    ["Friendly=home", []],
    ["Reference=r4", [3]],
    ["City=Boston", [0, 1]],
    ["City=Bost", []],
    ["Region=MA", [0, 1]],
    ["Region=West%20Yorkshire", [3]],
    ["CountryCode=GB", [2, 3]],
    ["CountryCode=gb", [2, 3]],
    ["CountryCode=HK", [4]],
    ["PostalCode=SW1A%201AA", [2]],
    ["PostalCode=02108", [0]],
    ["City=Boston&PostalCode=02109", [1]],
    ["Friendly=Home&CountryCode=US", [0]],
    ["Friendly=Nobody", []],
  ] as const)("exact-match filter %s", async (query, indexes) => {
    const res = await list(`?${query}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toStrictEqual({ Addresses: indexes.map((i) => created[i]), TotalCount: indexes.length });
  });

  it("pages with Results_Count and Results_Skip; TotalCount counts every match", async () => {
    expect((await list("?Results_Count=2")).json()).toStrictEqual({ Addresses: created.slice(0, 2), TotalCount: 5 });
    expect((await list("?Results_Count=2&Results_Skip=2")).json()).toStrictEqual({ Addresses: created.slice(2, 4), TotalCount: 5 });
    expect((await list("?Results_Count=2&Results_Skip=4")).json()).toStrictEqual({ Addresses: created.slice(4), TotalCount: 5 });
    expect((await list("?Results_Skip=5")).json()).toStrictEqual({ Addresses: [], TotalCount: 5 });
    expect((await list("?Results_Count=1000")).json()).toStrictEqual({ Addresses: created, TotalCount: 5 });
    expect((await list("?CountryCode=GB&Results_Count=1&Results_Skip=1")).json()).toStrictEqual({ Addresses: [created[3]], TotalCount: 2 });
  });

  it.each([
    ["Results_Count=0", "Results_Count", "Results_Count must be between 1 and 1000."],
    ["Results_Count=1001", "Results_Count", "Results_Count must be between 1 and 1000."],
    ["Results_Count=-1", "Results_Count", "Results_Count must be between 1 and 1000."],
    ["Results_Skip=-1", "Results_Skip", "Results_Skip must be 0 or more."],
  ])("400 InvalidParameter for %s", async (query, field, message) => {
    const res = await list(`?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual({
      ResponseStatus: { ErrorCode: "InvalidParameter", Message: message, Errors: [{ FieldName: field, ErrorCode: "InvalidParameter", Message: message }] },
    });
  });

  it("400 InvalidParameter for a Results_Count that is not an integer", async () => {
    const res = await list("?Results_Count=abc");
    expect(res.statusCode).toBe(400);
    expect(res.json().ResponseStatus.ErrorCode).toBe("InvalidParameter");
    expect(res.json().ResponseStatus.Errors[0].FieldName).toBe("Results_Count");
  });

  it("does not show another account's addresses", async () => {
    const res = await get(`/v2/Accounts/${tenant.accountSid}/Addresses?Friendly=Depot`);
    expect(res.json()).toStrictEqual({ Addresses: [], TotalCount: 0 });
  });
});

describe("DELETE /v2/Addresses/{AddressSid}", () => {
  it("removes the address: {AddressSid}, then get and delete are 404", async () => {
    const created = await add(US);
    const res = await del(created.AddressSid);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toStrictEqual({ AddressSid: created.AddressSid });
    const after = await get(`/v2/Addresses/${created.AddressSid}`);
    expect(after.statusCode).toBe(404);
    expect(after.json().ResponseStatus.ErrorCode).toBe("NotFound");
    const again = await del(created.AddressSid);
    expect(again.statusCode).toBe(404);
    expect(again.json()).toStrictEqual({
      ResponseStatus: { ErrorCode: "NotFound", Message: `Address ${created.AddressSid} was not found.`, Errors: [] },
    });
    const list = await get(`/v2/Accounts/${tenant.accountSid}/Addresses`);
    expect(list.json().Addresses.map((a: any) => a.AddressSid)).not.toContain(created.AddressSid);
  });

  it("400 AddressInUse while a number uses it; after unassigning, delete works", async () => {
    const created = await add(GB);
    const assigned = await configure(tenant.ownedNumber, { AddressSid: created.AddressSid });
    expect(assigned.statusCode, assigned.body).toBe(200);
    expect(assigned.json().AddressSid).toBe(created.AddressSid);

    const refused = await del(created.AddressSid);
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "AddressInUse",
        Message: `Address ${created.AddressSid} is used to register numbers; assign those numbers another address first (Configure Numbers).`,
        Errors: [],
      },
    });
    const still = await get(`/v2/Addresses/${created.AddressSid}`);
    expect(still.statusCode).toBe(200);
    expect(still.json()).toStrictEqual(created);

    const unassigned = await configure(tenant.ownedNumber, { AddressSid: "" });
    expect(unassigned.statusCode).toBe(200);
    expect(unassigned.json().AddressSid).toBe("");

    const removed = await del(created.AddressSid);
    expect(removed.statusCode).toBe(200);
    expect(removed.json()).toStrictEqual({ AddressSid: created.AddressSid });
    expect((await get(`/v2/Addresses/${created.AddressSid}`)).statusCode).toBe(404);
  });

  it("a Pending or Rejected address can be deleted", async () => {
    const pending = await add({ ...US, PostalCode: "" });
    expect(pending.Status).toBe("Pending");
    expect((await del(pending.AddressSid)).statusCode).toBe(200);

    const rejected = await add({ ...US, PostalCode: "" });
    const review = await t.app.inject({
      method: "POST",
      url: `/admin/v1/Addresses/${rejected.AddressSid}/Review`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { Status: "Rejected" },
    });
    expect(review.json().Status).toBe("Rejected");
    expect((await del(rejected.AddressSid)).json()).toStrictEqual({ AddressSid: rejected.AddressSid });
  });

  it("404 for a malformed AddressSid", async () => {
    for (const sid of ["AD1", "XX" + "A".repeat(30), "ad" + "A".repeat(30)]) {
      const res = await del(sid);
      expect(res.statusCode).toBe(404);
      expect(res.json().ResponseStatus.ErrorCode).toBe("NotFound");
    }
  });
});
