/**
 * An account's billing over the API (docs/billing.md): RateCard, BillingMode and CreditLimit on
 * CreateAccount and UpdateAccount (presence semantics: omitted unchanged, "" cleared), Balance and
 * PriceUnit on the account, the operator's top-ups and adjustments
 * (POST /admin/v1/Accounts/{AccountSid}/BalanceEntries) and the account's ledger
 * (GET /v2/Accounts/{AccountSid}/BalanceEntries): exact JSON, every refusal a 400 naming its
 * field with nothing changed, and the balance always the sum of the ledger.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { balanceOf, ledgerSum } from "../../src/billing/balance-store.js";
import { formatMoney } from "../../src/common/money.js";
import { ConfigError, loadConfig, parseVariables } from "../../src/config.js";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const BEARER = `Bearer ${ADMIN_TOKEN}`;

let t: TestApp;
let now: number;

beforeAll(async () => {
  t = await createTestApp();
  now = Math.floor(t.clock.now().getTime() / 1000);
  await call("PUT", "/admin/v1/RateCards/retail", { Rates: [{ Prefix: "+61", PricePerSegment: "0.05" }] });
});
afterAll(async () => {
  await t?.close();
});

function call(method: "GET" | "POST" | "PUT", url: string, body?: object, authorization = BEARER) {
  return t.app.inject({ method, url, headers: { authorization }, ...(body === undefined ? {} : { payload: body }) });
}

async function ok(method: "GET" | "POST" | "PUT", url: string, body?: object, authorization = BEARER): Promise<any> {
  const res = await call(method, url, body, authorization);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** The 400 of one field problem. */
function refused(field: string, message: string, code = "InvalidParameter") {
  return { ResponseStatus: { ErrorCode: code, Message: message, Errors: [{ FieldName: field, ErrorCode: code, Message: message }] } };
}

/** The account's balance as GetAccount shows it, after checking that it is the sum of its ledger. */
async function balance(accountSid: string): Promise<string> {
  const stored = await balanceOf(t.db.orm.em.fork(), accountSid);
  expect(await ledgerSum(t.db.orm.em.fork(), accountSid)).toBe(stored);
  const shown = (await ok("GET", `/admin/v1/Accounts/${accountSid}`)).Balance;
  expect(shown).toBe(formatMoney(stored));
  return shown;
}

const entries = (accountSid: string) => `/admin/v1/Accounts/${accountSid}/BalanceEntries`;

describe("an account's billing settings", () => {
  it("a new account: no own RateCard, Postpaid, no CreditLimit, Balance 0.00 in AUD", async () => {
    const acc = await admin(t.app, "/admin/v1/Accounts", { Name: "Plain" });
    const got = await ok("GET", `/admin/v1/Accounts/${acc.AccountSid}`);
    expect(got).toMatchObject({ RateCard: "", BillingMode: "Postpaid", Balance: "0.00", PriceUnit: "AUD" });
    expect(got).not.toHaveProperty("CreditLimit");
  });

  it("CreateAccount takes RateCard, BillingMode and CreditLimit; GetAccount and ListAccounts show them", async () => {
    const acc = await admin(t.app, "/admin/v1/Accounts", { Name: "Billed", RateCard: "retail", BillingMode: "Prepaid", CreditLimit: "50.5" });
    // The create answer is unchanged: the secrets and the few fields it always had.
    expect(Object.keys(acc).sort()).toStrictEqual(["AccountSid", "Name", "RestCompatibility", "SmsEnabled", "Token", "WebhookSecret"]);
    const got = await ok("GET", `/admin/v1/Accounts/${acc.AccountSid}`);
    expect(got).toMatchObject({ RateCard: "retail", BillingMode: "Prepaid", CreditLimit: "50.50", Balance: "0.00", PriceUnit: "AUD" });
    const listed = (await ok("GET", "/admin/v1/Accounts?Results_Count=1000")).Accounts.find((a: any) => a.AccountSid === acc.AccountSid);
    expect(listed).toMatchObject({ RateCard: "retail", BillingMode: "Prepaid", CreditLimit: "50.50", Balance: "0.00", PriceUnit: "AUD" });
  });

  it("CreateAccount refuses an unknown RateCard, a BillingMode in another case and a bad CreditLimit, naming each, and creates nothing", async () => {
    const before = (await ok("GET", "/admin/v1/Accounts")).TotalCount;
    const cases: [object, string, string][] = [
      [{ RateCard: "wholesale" }, "RateCard", 'RateCard "wholesale" is not a rate card.'],
      [{ RateCard: "bad name" }, "RateCard", `RateCard must be 1 to 64 letters, digits, '.', '_' or '-'; got "bad name".`],
      [{ BillingMode: "prepaid" }, "BillingMode", 'BillingMode must be Postpaid or Prepaid; got "prepaid".'],
      [{ BillingMode: "" }, "BillingMode", 'BillingMode must be Postpaid or Prepaid; got "".'],
      [{ CreditLimit: "-1" }, "CreditLimit", `CreditLimit takes no sign; got "-1".`],
      [{ CreditLimit: "0.1234567" }, "CreditLimit", 'CreditLimit has more than 6 decimal places; got "0.1234567".'],
      [{ CreditLimit: "1e3" }, "CreditLimit", `CreditLimit must be written without an exponent, such as "0.0525"; got "1e3".`],
    ];
    for (const [body, field, message] of cases) {
      const res = await call("POST", "/admin/v1/Accounts", { Name: "Refused", ...body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json()).toStrictEqual(refused(field, message));
    }
    // Every bad field at once, each named.
    const all = await call("POST", "/admin/v1/Accounts", { Name: "Refused", RateCard: "wholesale", BillingMode: "Credit", CreditLimit: "-5" });
    expect(all.statusCode).toBe(400);
    expect(all.json().ResponseStatus.Errors.map((e: { FieldName: string }) => e.FieldName)).toStrictEqual(["RateCard", "BillingMode", "CreditLimit"]);
    expect((await ok("GET", "/admin/v1/Accounts")).TotalCount).toBe(before);
  });

  it('UpdateAccount: an omitted field stays, a given one changes, "" clears RateCard and CreditLimit, CreditLimit 0 is kept as 0.00', async () => {
    const acc = await admin(t.app, "/admin/v1/Accounts", { Name: "Changing" });
    const url = `/admin/v1/Accounts/${acc.AccountSid}`;
    const set = await ok("POST", url, { RateCard: "retail", BillingMode: "Prepaid", CreditLimit: "10" });
    expect(set).toMatchObject({ RateCard: "retail", BillingMode: "Prepaid", CreditLimit: "10.00", Balance: "0.00", PriceUnit: "AUD" });
    expect(await ok("POST", url, {})).toStrictEqual(set);
    expect(await ok("POST", url, { Name: "Renamed" })).toStrictEqual({ ...set, Name: "Renamed" });
    // CreditLimit 0 is a limit (a Postpaid account may not go below zero), not the absence of one.
    const zero = await ok("POST", url, { CreditLimit: "0", BillingMode: "Postpaid" });
    expect(zero).toMatchObject({ RateCard: "retail", BillingMode: "Postpaid", CreditLimit: "0.00" });
    const cleared = await ok("POST", url, { CreditLimit: "", RateCard: "" });
    expect(cleared).toMatchObject({ RateCard: "", BillingMode: "Postpaid" });
    expect(cleared).not.toHaveProperty("CreditLimit");
    expect(await ok("GET", url)).toStrictEqual({ ...cleared, SegmentsToday: 0 });
  });

  it("UpdateAccount refuses bad billing values with a 400 naming the field and changes nothing", async () => {
    const acc = await admin(t.app, "/admin/v1/Accounts", { Name: "Kept", RateCard: "retail", BillingMode: "Prepaid", CreditLimit: "5" });
    const url = `/admin/v1/Accounts/${acc.AccountSid}`;
    const before = await ok("GET", url);
    for (const body of [{ RateCard: "wholesale" }, { BillingMode: "Monthly" }, { CreditLimit: "-0.01" }, { CreditLimit: "1.0000001" }, { CreditLimit: " 5" }]) {
      const res = await call("POST", url, { Name: "Changed", ...body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().ResponseStatus.Errors[0].FieldName).toBe(Object.keys(body)[0]);
    }
    expect(await ok("GET", url)).toStrictEqual(before);
  });
});

describe("POST /admin/v1/Accounts/{AccountSid}/BalanceEntries", () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
  });

  it("a TopUp and an Adjustment answer the entry with the balance after it, and move the account's Balance exactly", async () => {
    const topUp = await ok("POST", entries(tenant.accountSid), { Type: "TopUp", Amount: "12.50", Reference: " invoice 1 " });
    expect(topUp).toStrictEqual({
      EntryId: expect.stringMatching(/^[1-9][0-9]*$/),
      AccountSid: tenant.accountSid,
      Type: "TopUp",
      Amount: "12.50",
      BalanceAfter: "12.50",
      MessageSid: "",
      Reference: "invoice 1",
      Created: now,
    });
    expect(await balance(tenant.accountSid)).toBe("12.50");
    const down = await ok("POST", entries(tenant.accountSid), { Type: "Adjustment", Amount: "-2.000001", Reference: "credit note 7" });
    expect(down).toMatchObject({ Type: "Adjustment", Amount: "-2.000001", BalanceAfter: "10.499999", Reference: "credit note 7" });
    expect(BigInt(down.EntryId)).toBeGreaterThan(BigInt(topUp.EntryId));
    const up = await ok("POST", entries(tenant.accountSid), { Type: "Adjustment", Amount: "0.000001" });
    expect(up).toMatchObject({ Amount: "0.000001", BalanceAfter: "10.50", Reference: "" });
    expect(await balance(tenant.accountSid)).toBe("10.50");
    // An Adjustment may take the balance below zero: it is the operator's, never refused for the credit.
    expect(await ok("POST", entries(tenant.accountSid), { Type: "Adjustment", Amount: "-20" })).toMatchObject({ BalanceAfter: "-9.50" });
    expect(await balance(tenant.accountSid)).toBe("-9.50");
  });

  it("6 decimal places are taken, 7 are refused; a TopUp must be more than 0, an Adjustment not 0; each refusal names its field and changes nothing", async () => {
    const acc = await admin(t.app, "/admin/v1/Accounts", { Name: "Bounds" });
    const url = entries(acc.AccountSid);
    expect(await ok("POST", url, { Type: "TopUp", Amount: "0.000001" })).toMatchObject({ BalanceAfter: "0.000001" });
    const cases: [object, string, string, string?][] = [
      [{ Type: "TopUp", Amount: "0.0000001" }, "Amount", 'Amount has more than 6 decimal places; got "0.0000001".'],
      [{ Type: "TopUp", Amount: "-5.00" }, "Amount", `Amount takes no sign; got "-5.00".`],
      [{ Type: "TopUp", Amount: "0" }, "Amount", 'Amount of a TopUp must be more than 0; got "0".'],
      [{ Type: "TopUp", Amount: "0.000000" }, "Amount", 'Amount of a TopUp must be more than 0; got "0.000000".'],
      [{ Type: "Adjustment", Amount: "-0.00" }, "Amount", 'Amount of an Adjustment must not be 0; got "-0.00".'],
      [{ Type: "Adjustment", Amount: "+1" }, "Amount", `Amount takes no sign but a leading '-'; got "+1".`],
      [{ Type: "Adjustment", Amount: "1." }, "Amount", `Amount must be a decimal string such as "12.50" or "-0.0525"; got "1.".`],
      [{ Type: "TopUp" }, "Amount", 'Amount is required: a decimal string such as "0.0525".', "MissingParameter"],
      // A JSON number is refused: an amount never passes through a binary float.
      [{ Type: "TopUp", Amount: 12.5 }, "Amount", "Amount must be a string."],
      [{ Type: "TopUp", Amount: "1000000000000" }, "Amount", 'Amount is past the largest amount, 999999999999.999999; got "1000000000000".'],
      [{ Type: "Charge", Amount: "1" }, "Type", 'Type must be TopUp or Adjustment; got "Charge".'],
      [{ Type: "topup", Amount: "1" }, "Type", 'Type must be TopUp or Adjustment; got "topup".'],
      [{ Amount: "1" }, "Type", "Type is required: TopUp or Adjustment.", "MissingParameter"],
      [{ Type: "TopUp", Amount: "1", Reference: "r".repeat(256) }, "Reference", "Reference is 256 characters long; the limit is 255."],
    ];
    for (const [body, field, message, code] of cases) {
      const res = await call("POST", url, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json(), JSON.stringify(body)).toStrictEqual(refused(field, message, code));
    }
    // Both fields wrong: both named.
    const both = await call("POST", url, { Type: "Refund", Amount: "abc" });
    expect(both.json().ResponseStatus.Errors.map((e: { FieldName: string }) => e.FieldName)).toStrictEqual(["Type", "Amount"]);
    expect(await ok("POST", url, { Type: "TopUp", Amount: "1", Reference: "r".repeat(255) })).toMatchObject({ BalanceAfter: "1.000001" });
    expect(await balance(acc.AccountSid)).toBe("1.000001");
  });

  it("a balance past the storable range is refused naming Amount, and nothing changes", async () => {
    const acc = await admin(t.app, "/admin/v1/Accounts", { Name: "Rich" });
    const url = entries(acc.AccountSid);
    expect(await ok("POST", url, { Type: "TopUp", Amount: "999999999999.999999" })).toMatchObject({ BalanceAfter: "999999999999.999999" });
    const res = await call("POST", url, { Type: "TopUp", Amount: "0.000001" });
    expect(res.statusCode).toBe(400);
    expect(res.json().ResponseStatus.Errors).toStrictEqual([
      {
        FieldName: "Amount",
        ErrorCode: "InvalidParameter",
        Message: "Amount would take the balance to 1000000000000.00, past the largest amount, 999999999999.999999.",
      },
    ]);
    expect(await balance(acc.AccountSid)).toBe("999999999999.999999");
  });

  it("404 for an unknown or malformed account, 401 without the operator's token", async () => {
    for (const sid of ["AC" + "0".repeat(30), "AC1", "PR" + "A".repeat(30)]) {
      const res = await call("POST", entries(sid), { Type: "TopUp", Amount: "1" });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${sid} was not found.`, Errors: [] } });
    }
    const res = await call("POST", entries(tenant.accountSid), { Type: "TopUp", Amount: "1" }, tenant.auth);
    expect(res.statusCode).toBe(401);
    expect(res.json().ResponseStatus.ErrorCode).toBe("Unauthorized");
  });
});

describe("GET /v2/Accounts/{AccountSid}/BalanceEntries", () => {
  let tenant: Tenant;
  let other: Tenant;
  const amounts = ["1.00", "2.50", "-0.25", "0.000001", "-1.0525"];
  beforeAll(async () => {
    tenant = await createTenant(t.app);
    other = await createTenant(t.app);
    for (const [i, amount] of amounts.entries()) {
      t.clock.advance(1000);
      const type = amount.startsWith("-") || i === 3 ? "Adjustment" : "TopUp";
      await admin(t.app, entries(tenant.accountSid), { Type: type, Amount: amount, Reference: `ref ${i}` });
    }
    await admin(t.app, entries(other.accountSid), { Type: "TopUp", Amount: "99", Reference: "other's" });
  });

  const ledger = (query = "", auth = tenant.auth, sid = tenant.accountSid) =>
    t.app.inject({ method: "GET", url: `/v2/Accounts/${sid}/BalanceEntries${query}`, headers: { authorization: auth } });

  it("lists the account's own entries newest first, with TotalCount and PriceUnit; the balance is their sum", async () => {
    const res = await ledger();
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toStrictEqual(["BalanceEntries", "PriceUnit", "TotalCount"]);
    expect(body.TotalCount).toBe(5);
    expect(body.PriceUnit).toBe("AUD");
    expect(body.BalanceEntries.map((e: { Amount: string }) => e.Amount)).toStrictEqual(["-1.0525", "0.000001", "-0.25", "2.50", "1.00"]);
    expect(body.BalanceEntries.map((e: { BalanceAfter: string }) => e.BalanceAfter)).toStrictEqual(["2.197501", "3.250001", "3.25", "3.50", "1.00"]);
    expect(body.BalanceEntries[0]).toStrictEqual({
      EntryId: expect.stringMatching(/^[1-9][0-9]*$/),
      AccountSid: tenant.accountSid,
      Type: "Adjustment",
      Amount: "-1.0525",
      BalanceAfter: "2.197501",
      MessageSid: "",
      Reference: "ref 4",
      Created: expect.any(Number),
    });
    const created = body.BalanceEntries.map((e: { Created: number }) => e.Created);
    expect(created).toStrictEqual([...created].sort((x: number, y: number) => y - x));
    expect(await balance(tenant.accountSid)).toBe(body.BalanceEntries[0].BalanceAfter);
    // Nothing of the other account's.
    expect(res.body).not.toContain("other's");
  });

  it("pages with Results_Count and Results_Skip; a bad paging value is a 400 naming it", async () => {
    const all = (await ledger()).json().BalanceEntries;
    const page = (await ledger("?Results_Count=2&Results_Skip=2")).json();
    expect(page).toStrictEqual({ BalanceEntries: all.slice(2, 4), TotalCount: 5, PriceUnit: "AUD" });
    expect((await ledger("?Results_Skip=5")).json()).toStrictEqual({ BalanceEntries: [], TotalCount: 5, PriceUnit: "AUD" });
    for (const [query, field, message] of [
      ["?Results_Count=0", "Results_Count", "Results_Count must be between 1 and 1000."],
      ["?Results_Count=1001", "Results_Count", "Results_Count must be between 1 and 1000."],
      ["?Results_Skip=-1", "Results_Skip", "Results_Skip must be 0 or more."],
    ]) {
      const res = await ledger(query);
      expect(res.statusCode, query).toBe(400);
      expect(res.json()).toStrictEqual(refused(field, message));
    }
  });

  it("an account with no entries has an empty ledger and a balance of 0.00", async () => {
    const fresh = await createTenant(t.app);
    expect((await ledger("", fresh.auth, fresh.accountSid)).json()).toStrictEqual({ BalanceEntries: [], TotalCount: 0, PriceUnit: "AUD" });
    expect(await balance(fresh.accountSid)).toBe("0.00");
  });

  it("another account's Sid is 404 NotFound, as on every /v2 account path; no credentials are 401", async () => {
    const res = await ledger("", tenant.auth, other.accountSid);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${other.accountSid} was not found.`, Errors: [] } });
    const anonymous = await t.app.inject({ method: "GET", url: `/v2/Accounts/${tenant.accountSid}/BalanceEntries` });
    expect(anonymous.statusCode).toBe(401);
    expect((await ledger("", BEARER)).statusCode).toBe(401);
  });
});

describe("BILLING_CURRENCY and DEFAULT_RATE_CARD", () => {
  it("default AUD and no default card; a code must be three capital letters of a known currency; a card name its shape", () => {
    expect(loadConfig({}).billing).toStrictEqual({ currency: "AUD", defaultRateCard: undefined });
    expect(loadConfig({ BILLING_CURRENCY: "NZD", DEFAULT_RATE_CARD: "retail" }).billing).toStrictEqual({ currency: "NZD", defaultRateCard: "retail" });
    for (const bad of ["aud", "AU", "AUDD", "XYZ", "A1D"]) {
      expect(parseVariables({ BILLING_CURRENCY: bad }, ["BILLING_CURRENCY"]).problems, bad).toStrictEqual([
        `BILLING_CURRENCY must be an ISO 4217 currency code of three capital letters such as AUD, got "${bad}"`,
      ]);
    }
    expect(parseVariables({ DEFAULT_RATE_CARD: "bad name" }, ["DEFAULT_RATE_CARD"]).problems).toStrictEqual([
      `DEFAULT_RATE_CARD must be a rate card name: 1 to 64 letters, digits, '.', '_' or '-', got "bad name"`,
    ]);
    expect(() => loadConfig({ BILLING_CURRENCY: "dollars" })).toThrow(ConfigError);
  });

  it("the configured currency is the PriceUnit of the account and of its ledger", async () => {
    const nz = await createTestApp({ db: t.db, clock: t.clock, config: { billing: { currency: "NZD" } } });
    try {
      const acc = await admin(nz.app, "/admin/v1/Accounts", { Name: "Kiwi" });
      const got = await nz.app.inject({ method: "GET", url: `/admin/v1/Accounts/${acc.AccountSid}`, headers: { authorization: BEARER } });
      expect(got.json()).toMatchObject({ PriceUnit: "NZD", Balance: "0.00" });
      const auth = `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}`;
      const list = await nz.app.inject({ method: "GET", url: `/v2/Accounts/${acc.AccountSid}/BalanceEntries`, headers: { authorization: auth } });
      expect(list.json()).toStrictEqual({ BalanceEntries: [], TotalCount: 0, PriceUnit: "NZD" });
    } finally {
      await nz.close();
    }
  });
});
