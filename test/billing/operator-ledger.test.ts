/**
 * The operator's read of any account's ledger (GET /admin/v1/Accounts/{AccountSid}/BalanceEntries,
 * AdminService.ListBalanceEntries; the console's account page shows it): the same answer as the
 * account's own read on /v2, exact JSON, paging, a 404 for an unknown account, a 401 without the
 * operator token, and the same over Connect.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const BEARER = `Bearer ${ADMIN_TOKEN}`;

let t: TestApp;
let tenant: Tenant;
let other: Tenant;

const entries = (sid: string) => `/admin/v1/Accounts/${sid}/BalanceEntries`;
const read = (url: string, authorization = BEARER) => t.app.inject({ method: "GET", url, headers: { authorization } });

beforeAll(async () => {
  t = await createTestApp();
  tenant = await createTenant(t.app);
  other = await createTenant(t.app);
  for (const [type, amount, reference] of [
    ["TopUp", "10.00", "invoice 1"],
    ["Adjustment", "-0.0525", "goodwill reversal"],
    ["TopUp", "0.000001", ""],
  ]) {
    t.clock.advance(1000);
    await admin(t.app, entries(tenant.accountSid), { Type: type, Amount: amount, Reference: reference });
  }
  await admin(t.app, entries(other.accountSid), { Type: "TopUp", Amount: "99", Reference: "other's" });
});
afterAll(async () => {
  await t?.close();
});

describe("GET /admin/v1/Accounts/{AccountSid}/BalanceEntries", () => {
  it("answers exactly what the account reads on /v2: its entries newest first, TotalCount, PriceUnit", async () => {
    const res = await read(entries(tenant.accountSid));
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.TotalCount).toBe(3);
    expect(body.PriceUnit).toBe("AUD");
    expect(
      body.BalanceEntries.map((e: { Type: string; Amount: string; BalanceAfter: string; Reference: string }) => [
        e.Type,
        e.Amount,
        e.BalanceAfter,
        e.Reference,
      ]),
    ).toStrictEqual([
      ["TopUp", "0.000001", "9.947501", ""],
      ["Adjustment", "-0.0525", "9.9475", "goodwill reversal"],
      ["TopUp", "10.00", "10.00", "invoice 1"],
    ]);
    expect(body.BalanceEntries[1]).toStrictEqual({
      EntryId: expect.stringMatching(/^[1-9][0-9]*$/),
      AccountSid: tenant.accountSid,
      Type: "Adjustment",
      Amount: "-0.0525",
      BalanceAfter: "9.9475",
      MessageSid: "",
      Reference: "goodwill reversal",
      Created: Math.floor(t.clock.now().getTime() / 1000) - 1,
    });
    expect(res.body).not.toContain("other's");
    const own = await read(`/v2/Accounts/${tenant.accountSid}/BalanceEntries`, tenant.auth);
    expect(own.json()).toStrictEqual(body);
    expect((await read(`/admin/v1/Accounts/${tenant.accountSid}`)).json().Balance).toBe(body.BalanceEntries[0].BalanceAfter);
  });

  it("pages with Results_Count and Results_Skip; a bad paging value is a 400 naming it", async () => {
    const all = (await read(entries(tenant.accountSid))).json().BalanceEntries;
    expect((await read(`${entries(tenant.accountSid)}?Results_Count=1&Results_Skip=1`)).json()).toStrictEqual({
      BalanceEntries: [all[1]],
      TotalCount: 3,
      PriceUnit: "AUD",
    });
    const bad = await read(`${entries(tenant.accountSid)}?Results_Count=0`);
    expect(bad.statusCode).toBe(400);
    const message = "Results_Count must be between 1 and 1000.";
    expect(bad.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: message,
        Errors: [{ FieldName: "Results_Count", ErrorCode: "InvalidParameter", Message: message }],
      },
    });
  });

  it("an account with no entries: an empty ledger", async () => {
    const fresh = await createTenant(t.app);
    expect((await read(entries(fresh.accountSid))).json()).toStrictEqual({ BalanceEntries: [], TotalCount: 0, PriceUnit: "AUD" });
  });

  it("an unknown or malformed AccountSid is 404 NotFound; an account's credentials are 401", async () => {
    for (const sid of ["AC00000000000000000000000000000000", "nope"]) {
      const res = await read(entries(sid));
      expect(res.statusCode, sid).toBe(404);
      expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${sid} was not found.`, Errors: [] } });
    }
    const res = await read(entries(tenant.accountSid), tenant.auth);
    expect(res.statusCode).toBe(401);
    expect(res.json().ResponseStatus.ErrorCode).toBe("Unauthorized");
  });

  it("over Connect: the same entries", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: "/switchboard.admin.v1.AdminService/ListBalanceEntries",
      headers: { authorization: BEARER, "content-type": "application/json" },
      payload: { AccountSid: tenant.accountSid, Results_Count: 2 },
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.TotalCount).toBe(3);
    expect(body.BalanceEntries.map((e: { Amount: string }) => e.Amount)).toStrictEqual(["0.000001", "-0.0525"]);
  });
});
