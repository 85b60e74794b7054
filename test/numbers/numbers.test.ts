import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, addPoolNumbers, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

let t: TestApp;
let a: Tenant;
let b: Tenant;
let pool: string[];
/** A's second number, added by the operator. */
const A_SECOND = "+14155550100";

beforeAll(async () => {
  t = await createTestApp();
  a = await createTenant(t.app);
  b = await createTenant(t.app);
  pool = await addPoolNumbers(t.app, 2);
  await admin(t.app, "/admin/v1/Numbers", { Number: A_SECOND, AccountSid: a.accountSid });
});
afterAll(async () => {
  await t?.close();
});

const US = { Line1: "1 Market St", City: "San Francisco", CountryCode: "US", PostalCode: "94103" };

function path(number: string) {
  return `/v2/Numbers/${number.replace(/^\+/, "")}`;
}
function configure(number: string, body: object, auth = a.auth) {
  return t.app.inject({ method: "POST", url: path(number), headers: { authorization: auth }, payload: body });
}
function listNumbers(accountSid: string, auth: string, query = "") {
  return t.app.inject({ method: "GET", url: `/v2/Accounts/${accountSid}/Numbers${query}`, headers: { authorization: auth } });
}
async function addAddress(tenant: Tenant, body: object): Promise<any> {
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Accounts/${tenant.accountSid}/Addresses`,
    headers: { authorization: tenant.auth },
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}
function review(addressSid: string, status: string) {
  return t.app.inject({
    method: "POST",
    url: `/admin/v1/Addresses/${addressSid}/Review`,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    payload: { Status: status },
  });
}
async function numberOf(tenant: Tenant, number: string): Promise<any> {
  const res = await listNumbers(tenant.accountSid, tenant.auth);
  return res.json().Numbers.find((n: any) => n.Number === number);
}

describe("GET /v2/Accounts/{AccountSid}/Numbers", () => {
  it("lists only the account's own numbers, not pool numbers nor another account's", async () => {
    const res = await listNumbers(a.accountSid, a.auth);
    expect(res.statusCode).toBe(200);
    const expected = [
      { Number: a.ownedNumber, AccountSid: a.accountSid, Friendly: "", AddressSid: "" },
      { Number: A_SECOND, AccountSid: a.accountSid, Friendly: "", AddressSid: "" },
    ].sort((x, y) => (x.Number < y.Number ? -1 : 1));
    expect(res.json()).toStrictEqual({ Numbers: expected, TotalCount: 2 });
    const numbers = res.json().Numbers.map((n: any) => n.Number);
    for (const p of pool) expect(numbers).not.toContain(p);
    expect(numbers).not.toContain(b.ownedNumber);

    const resB = await listNumbers(b.accountSid, b.auth);
    expect(resB.json()).toStrictEqual({ Numbers: [{ Number: b.ownedNumber, AccountSid: b.accountSid, Friendly: "", AddressSid: "" }], TotalCount: 1 });
  });

  it("pages with Results_Count and Results_Skip", async () => {
    const all = (await listNumbers(a.accountSid, a.auth)).json().Numbers;
    expect((await listNumbers(a.accountSid, a.auth, "?Results_Count=1")).json()).toStrictEqual({ Numbers: [all[0]], TotalCount: 2 });
    expect((await listNumbers(a.accountSid, a.auth, "?Results_Count=1&Results_Skip=1")).json()).toStrictEqual({ Numbers: [all[1]], TotalCount: 2 });
    expect((await listNumbers(a.accountSid, a.auth, "?Results_Skip=2")).json()).toStrictEqual({ Numbers: [], TotalCount: 2 });
    const bad = await listNumbers(a.accountSid, a.auth, "?Results_Count=0");
    expect(bad.statusCode).toBe(400);
    expect(bad.json().ResponseStatus.Errors[0]).toMatchObject({ FieldName: "Results_Count", ErrorCode: "InvalidParameter" });
  });

  it("404 for another account's AccountSid", async () => {
    const res = await listNumbers(b.accountSid, a.auth);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${b.accountSid} was not found.`, Errors: [] } });
  });
});

describe("POST /v2/Numbers/{Number} (Configure Numbers)", () => {
  it("sets Friendly and AddressSid, and an empty AddressSid unassigns", async () => {
    const address = await addAddress(a, US);
    const res = await configure(a.ownedNumber, { Friendly: "Front desk", AddressSid: address.AddressSid });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toStrictEqual({ Number: a.ownedNumber, AccountSid: a.accountSid, Friendly: "Front desk", AddressSid: address.AddressSid });
    expect(await numberOf(a, a.ownedNumber)).toStrictEqual(res.json());

    // Only Friendly: AddressSid stays.
    const renamed = await configure(a.ownedNumber, { Friendly: "Reception" });
    expect(renamed.json()).toStrictEqual({ Number: a.ownedNumber, AccountSid: a.accountSid, Friendly: "Reception", AddressSid: address.AddressSid });

    // Only AddressSid "": Friendly stays.
    const unassigned = await configure(a.ownedNumber, { AddressSid: "" });
    expect(unassigned.statusCode).toBe(200);
    expect(unassigned.json()).toStrictEqual({ Number: a.ownedNumber, AccountSid: a.accountSid, Friendly: "Reception", AddressSid: "" });
    expect(await numberOf(a, a.ownedNumber)).toStrictEqual(unassigned.json());

    // An empty body changes nothing.
    const same = await configure(a.ownedNumber, {});
    expect(same.json()).toStrictEqual(unassigned.json());

    // Friendly "" clears the name.
    const cleared = await configure(a.ownedNumber, { Friendly: "" });
    expect(cleared.json().Friendly).toBe("");
  });

  it("accepts the number with a leading + (URL-encoded) too", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Numbers/%2B${A_SECOND.slice(1)}`,
      headers: { authorization: a.auth },
      payload: { Friendly: "plus" },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toStrictEqual({ Number: A_SECOND, AccountSid: a.accountSid, Friendly: "plus", AddressSid: "" });
  });

  it("400 InvalidParameter for a Friendly over 255 characters; 255 is accepted", async () => {
    const bad = await configure(A_SECOND, { Friendly: "f".repeat(256) });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: "Friendly must be at most 255 characters.",
        Errors: [{ FieldName: "Friendly", ErrorCode: "InvalidParameter", Message: "Friendly must be at most 255 characters." }],
      },
    });
    const ok = await configure(A_SECOND, { Friendly: "f".repeat(255) });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().Friendly).toBe("f".repeat(255));
  });

  it("400 AddressNotActive for a Pending address, and the number is unchanged", async () => {
    const pending = await addAddress(a, { ...US, PostalCode: "" });
    expect(pending.Status).toBe("Pending");
    const before = await numberOf(a, A_SECOND);
    const res = await configure(A_SECOND, { Friendly: "should not stick", AddressSid: pending.AddressSid });
    expect(res.statusCode).toBe(400);
    const message = `Address ${pending.AddressSid} is Pending; numbers can only be registered against an Active address.`;
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "AddressNotActive",
        Message: message,
        Errors: [{ FieldName: "AddressSid", ErrorCode: "AddressNotActive", Message: message }],
      },
    });
    expect(await numberOf(a, A_SECOND)).toStrictEqual(before);
  });

  it("400 AddressNotActive for a Rejected address (after operator review)", async () => {
    const pending = await addAddress(a, { ...US, PostalCode: "ABCDE" });
    expect(pending.Status).toBe("Pending");
    const rejected = await review(pending.AddressSid, "Rejected");
    expect(rejected.statusCode).toBe(200);
    expect(rejected.json()).toStrictEqual({ ...pending, Status: "Rejected" });
    const res = await configure(A_SECOND, { AddressSid: pending.AddressSid });
    expect(res.statusCode).toBe(400);
    const message = `Address ${pending.AddressSid} is Rejected; numbers can only be registered against an Active address.`;
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "AddressNotActive",
        Message: message,
        Errors: [{ FieldName: "AddressSid", ErrorCode: "AddressNotActive", Message: message }],
      },
    });
    expect((await numberOf(a, A_SECOND)).AddressSid).toBe("");
  });

  it("operator review Pending → Active lets the number register against it", async () => {
    const pending = await addAddress(a, { ...US, PostalCode: "" });
    expect((await configure(A_SECOND, { AddressSid: pending.AddressSid })).statusCode).toBe(400);
    const reviewed = await review(pending.AddressSid, "Active");
    expect(reviewed.statusCode).toBe(200);
    expect(reviewed.json()).toStrictEqual({ ...pending, Status: "Active" });
    const got = await t.app.inject({ method: "GET", url: `/v2/Addresses/${pending.AddressSid}`, headers: { authorization: a.auth } });
    expect(got.json().Status).toBe("Active");
    const res = await configure(A_SECOND, { AddressSid: pending.AddressSid });
    expect(res.statusCode).toBe(200);
    expect(res.json().AddressSid).toBe(pending.AddressSid);
    expect((await configure(A_SECOND, { AddressSid: "" })).json().AddressSid).toBe("");
  });

  it("review of a Rejected address is 409 AddressNotPending; it stays Rejected", async () => {
    const pending = await addAddress(a, { ...US, PostalCode: "" });
    expect((await review(pending.AddressSid, "Rejected")).statusCode).toBe(200);
    const res = await review(pending.AddressSid, "Active");
    expect(res.statusCode).toBe(409);
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "AddressNotPending",
        Message: `Address ${pending.AddressSid} is Rejected; only a Pending address can be reviewed (a Rejected address stays rejected: the customer submits a new one).`,
        Errors: [],
      },
    });
    const got = await t.app.inject({ method: "GET", url: `/v2/Addresses/${pending.AddressSid}`, headers: { authorization: a.auth } });
    expect(got.json().Status).toBe("Rejected");
  });

  it("review of an Active address to Rejected is 409 AddressNotPending", async () => {
    const active = await addAddress(a, US);
    const res = await review(active.AddressSid, "Rejected");
    expect(res.statusCode).toBe(409);
    expect(res.json().ResponseStatus.ErrorCode).toBe("AddressNotPending");
  });

  it("review with a Status other than Active/Rejected is 400 InvalidParameter", async () => {
    const pending = await addAddress(a, { ...US, PostalCode: "" });
    for (const status of ["Pending", "active", "", "Deleted"]) {
      const res = await review(pending.AddressSid, status);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toStrictEqual({
        ResponseStatus: {
          ErrorCode: "InvalidParameter",
          Message: "Status must be Active or Rejected.",
          Errors: [{ FieldName: "Status", ErrorCode: "InvalidParameter", Message: "Status must be Active or Rejected." }],
        },
      });
    }
  });

  it("400 InvalidParameter naming AddressSid for another account's address, and for an unknown or malformed one", async () => {
    const foreign = await addAddress(b, US);
    for (const sid of [foreign.AddressSid, "AD" + "0".repeat(30), "nonsense"]) {
      const res = await configure(a.ownedNumber, { AddressSid: sid });
      expect(res.statusCode).toBe(400);
      const message = `AddressSid ${sid} is not an address of this account; add it first (POST /v2/Accounts/{AccountSid}/Addresses).`;
      expect(res.json()).toStrictEqual({
        ResponseStatus: {
          ErrorCode: "InvalidParameter",
          Message: message,
          Errors: [{ FieldName: "AddressSid", ErrorCode: "InvalidParameter", Message: message }],
        },
      });
    }
    // B's address is not touched and can still be deleted by B.
    const del = await t.app.inject({ method: "DELETE", url: `/v2/Addresses/${foreign.AddressSid}`, headers: { authorization: b.auth } });
    expect(del.json()).toStrictEqual({ AddressSid: foreign.AddressSid });
  });

  it("404 for another account's number, a pool number, an unknown or a malformed number", async () => {
    const bBefore = await numberOf(b, b.ownedNumber);
    for (const number of [b.ownedNumber, pool[0], "+14155559999", "abc", "1", "+" + "1".repeat(16)]) {
      const res = await configure(number, { Friendly: "hijack" });
      expect(res.statusCode, number).toBe(404);
      expect(res.json().ResponseStatus.ErrorCode).toBe("NotFound");
      expect(res.json().ResponseStatus.Errors).toStrictEqual([]);
    }
    expect(await numberOf(b, b.ownedNumber)).toStrictEqual(bBefore);
    expect(bBefore.Friendly).toBe("");
  });

  it("400 InvalidParameter for fields of the wrong JSON type", async () => {
    const res = await configure(a.ownedNumber, { Friendly: 5, AddressSid: ["AD"] });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: "Friendly must be a string. AddressSid must be a string.",
        Errors: [
          { FieldName: "Friendly", ErrorCode: "InvalidParameter", Message: "Friendly must be a string." },
          { FieldName: "AddressSid", ErrorCode: "InvalidParameter", Message: "AddressSid must be a string." },
        ],
      },
    });
  });
});
