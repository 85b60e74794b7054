import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, basic, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { ACCOUNT_DEFAULTS as CONSENT_DEFAULTS } from "../support/account-defaults.js";

/** An account's consent and destination settings as created (docs/api.md#opt-out-stop-start-help). */

let t: TestApp;

beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => {
  await t?.close();
});

const BEARER = `Bearer ${ADMIN_TOKEN}`;
const AC = /^AC[A-Z0-9]{30}$/;
const PR = /^PR[A-Z0-9]{30}$/;

/** POST to the operator API; authorization null sends no Authorization header. */
function adminPost(url: string, body?: unknown, authorization: string | null = BEARER) {
  return t.app.inject({
    method: "POST",
    url,
    headers: authorization === null ? {} : { authorization },
    ...(body === undefined ? {} : { payload: body as object }),
  });
}

async function ok(url: string, body?: unknown): Promise<any> {
  const res = await adminPost(url, body);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

function v2(url: string, auth: string) {
  return t.app.inject({ method: "GET", url, headers: { authorization: auth } });
}

const UNAUTHORIZED = {
  ResponseStatus: { ErrorCode: "Unauthorized", Message: "Operator calls need `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`.", Errors: [] },
};

describe("operator authentication", () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
  });

  const routes = () =>
    [
      ["/admin/v1/Accounts", { Name: "X" }],
      [`/admin/v1/Accounts/${tenant.accountSid}`, { Name: "X" }],
      [`/admin/v1/Accounts/${tenant.accountSid}/Token`, {}],
      [`/admin/v1/Accounts/${tenant.accountSid}/Properties`, { Name: "X" }],
      [`/admin/v1/Properties/${tenant.propertySid}`, { Name: "X" }],
      ["/admin/v1/Numbers", { Number: "+14155550111" }],
      [`/admin/v1/Addresses/AD${"0".repeat(30)}/Review`, { Status: "Active" }],
    ] as const;

  it.each([
    ["no header", null],
    ["a wrong bearer token", "Bearer wrong-token"],
    ["the token with a suffix", `${BEARER}x`],
    ["the token as Basic", `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString("base64")}`],
    ["an empty bearer", "Bearer "],
    ["the bare token", ADMIN_TOKEN],
  ])("401 Unauthorized on every operator route with %s", async (_what, authorization) => {
    for (const [url, body] of routes()) {
      const res = await adminPost(url, body, authorization);
      expect(res.statusCode, url).toBe(401);
      expect(res.json()).toStrictEqual(UNAUTHORIZED);
      expect(res.headers["www-authenticate"]).toBeDefined();
    }
  });

  it("an account's Basic credentials do not open /admin", async () => {
    for (const [url, body] of routes()) {
      const res = await adminPost(url, body, tenant.auth);
      expect(res.statusCode, url).toBe(401);
      expect(res.json()).toStrictEqual(UNAUTHORIZED);
    }
    // Nothing was changed by the refused calls: the tenant's token still works, the account's name is unchanged.
    expect((await v2(`/v2/Accounts/${tenant.accountSid}/Numbers`, tenant.auth)).statusCode).toBe(200);
    expect((await ok(`/admin/v1/Accounts/${tenant.accountSid}`, {})).Name).toBe("Tenant");
  });

  it("the admin token does not open /v2", async () => {
    const res = await v2(`/v2/Accounts/${tenant.accountSid}/Numbers`, BEARER);
    expect(res.statusCode).toBe(401);
    expect(res.json().ResponseStatus.ErrorCode).toBe("Unauthorized");
    expect(res.headers["www-authenticate"]).toBe('Basic realm="switchboard"');
  });

  it("the bearer scheme is case-insensitive", async () => {
    const res = await adminPost("/admin/v1/Accounts", { Name: "Case" }, `bearer ${ADMIN_TOKEN}`);
    expect(res.statusCode).toBe(200);
  });
});

describe("POST /admin/v1/Accounts", () => {
  it("creates an account: Token of at least 32 characters, WebhookSecret whsec_…, SmsEnabled true by default", async () => {
    const res = await adminPost("/admin/v1/Accounts", { Name: "Acme" });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toStrictEqual(["AccountSid", "Name", "RestCompatibility", "SmsEnabled", "Token", "WebhookSecret"]);
    expect(body).toStrictEqual({
      AccountSid: expect.stringMatching(AC),
      Name: "Acme",
      SmsEnabled: true,
      Token: expect.any(String),
      WebhookSecret: expect.any(String),
      RestCompatibility: "None",
    });
    expect(body.Token.length).toBeGreaterThanOrEqual(32);
    expect(body.Token).toMatch(/^[A-Za-z0-9]+$/);
    expect(body.WebhookSecret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(body.WebhookSecret.slice(6), "base64").length).toBeGreaterThanOrEqual(24);
    // The token works on /v2 at once.
    const list = await v2(`/v2/Accounts/${body.AccountSid}/Addresses`, basic(body.AccountSid, body.Token));
    expect(list.statusCode).toBe(200);
    expect(list.json()).toStrictEqual({ Addresses: [], TotalCount: 0 });
  });

  it("every account gets its own Sid, token and secret", async () => {
    const one = await ok("/admin/v1/Accounts", { Name: "One" });
    const two = await ok("/admin/v1/Accounts", { Name: "Two" });
    expect(one.AccountSid).not.toBe(two.AccountSid);
    expect(one.Token).not.toBe(two.Token);
    expect(one.WebhookSecret).not.toBe(two.WebhookSecret);
    // One's token does not open two.
    expect((await v2(`/v2/Accounts/${two.AccountSid}/Numbers`, basic(two.AccountSid, one.Token))).statusCode).toBe(401);
  });

  it("SmsEnabled false is kept", async () => {
    const body = await ok("/admin/v1/Accounts", { Name: "Quiet", SmsEnabled: false });
    expect(body.SmsEnabled).toBe(false);
  });

  it.each([
    ["missing", {}],
    ["blank", { Name: "   " }],
    ["empty", { Name: "" }],
    ["null", { Name: null }],
  ])("400 MissingParameter when Name is %s", async (_what, body) => {
    const res = await adminPost("/admin/v1/Accounts", body);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "MissingParameter",
        Message: "Name is required.",
        Errors: [{ FieldName: "Name", ErrorCode: "MissingParameter", Message: "Name is required." }],
      },
    });
  });

  it("400 InvalidParameter for a Name over 255 characters or of the wrong type", async () => {
    const long = await adminPost("/admin/v1/Accounts", { Name: "n".repeat(256) });
    expect(long.statusCode).toBe(400);
    expect(long.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: "Name must be at most 255 characters.",
        Errors: [{ FieldName: "Name", ErrorCode: "InvalidParameter", Message: "Name must be at most 255 characters." }],
      },
    });
    const typed = await adminPost("/admin/v1/Accounts", { Name: 7, SmsEnabled: "yes" });
    expect(typed.statusCode).toBe(400);
    expect(typed.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: "Name must be a string. SmsEnabled must be true or false.",
        Errors: [
          { FieldName: "Name", ErrorCode: "InvalidParameter", Message: "Name must be a string." },
          { FieldName: "SmsEnabled", ErrorCode: "InvalidParameter", Message: "SmsEnabled must be true or false." },
        ],
      },
    });
    expect((await ok("/admin/v1/Accounts", { Name: "n".repeat(255) })).Name).toBe("n".repeat(255));
  });
});

describe("POST /admin/v1/Accounts/{AccountSid}", () => {
  it("updates Name and SmsEnabled and returns the account without secrets", async () => {
    const acc = await ok("/admin/v1/Accounts", { Name: "Before" });
    const Created = Math.floor(t.clock.now().getTime() / 1000);
    const renamed = await ok(`/admin/v1/Accounts/${acc.AccountSid}`, { Name: "After" });
    expect(renamed).toStrictEqual({ AccountSid: acc.AccountSid, Name: "After", SmsEnabled: true, Created, RestCompatibility: "None", ...CONSENT_DEFAULTS });
    const disabled = await ok(`/admin/v1/Accounts/${acc.AccountSid}`, { SmsEnabled: false });
    expect(disabled).toStrictEqual({ AccountSid: acc.AccountSid, Name: "After", SmsEnabled: false, Created, RestCompatibility: "None", ...CONSENT_DEFAULTS });
    const both = await ok(`/admin/v1/Accounts/${acc.AccountSid}`, { Name: " Both ", SmsEnabled: true });
    expect(both).toStrictEqual({ AccountSid: acc.AccountSid, Name: "Both", SmsEnabled: true, Created, RestCompatibility: "None", ...CONSENT_DEFAULTS });
    const nothing = await ok(`/admin/v1/Accounts/${acc.AccountSid}`, {});
    expect(nothing).toStrictEqual(both);
    // The token is untouched by updates.
    expect((await v2(`/v2/Accounts/${acc.AccountSid}/Numbers`, basic(acc.AccountSid, acc.Token))).statusCode).toBe(200);
  });

  it("RestCompatibility: None by default, FoneDynamics set on create or update, shown by GET; anything else is a 400 naming the field", async () => {
    const plain = await ok("/admin/v1/Accounts", { Name: "Plain" });
    expect(plain.RestCompatibility).toBe("None");
    const fone = await ok("/admin/v1/Accounts", { Name: "Fone", RestCompatibility: "FoneDynamics" });
    expect(fone.RestCompatibility).toBe("FoneDynamics");
    const get = await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${fone.AccountSid}`, headers: { authorization: BEARER } });
    expect(get.json().RestCompatibility).toBe("FoneDynamics");
    expect((await ok(`/admin/v1/Accounts/${plain.AccountSid}`, { RestCompatibility: "FoneDynamics" })).RestCompatibility).toBe("FoneDynamics");
    // Omitted on update: unchanged.
    expect((await ok(`/admin/v1/Accounts/${plain.AccountSid}`, { Name: "Renamed" })).RestCompatibility).toBe("FoneDynamics");
    expect((await ok(`/admin/v1/Accounts/${plain.AccountSid}`, { RestCompatibility: "None" })).RestCompatibility).toBe("None");
    for (const [url, body] of [
      ["/admin/v1/Accounts", { Name: "Bad", RestCompatibility: "fonedynamics" }],
      [`/admin/v1/Accounts/${plain.AccountSid}`, { RestCompatibility: "" }],
    ] as const) {
      const res = await adminPost(url, body);
      expect(res.statusCode).toBe(400);
      const given = JSON.stringify(body.RestCompatibility);
      const message = `RestCompatibility must be None or FoneDynamics; got ${given}.`;
      expect(res.json()).toStrictEqual({
        ResponseStatus: {
          ErrorCode: "InvalidParameter",
          Message: message,
          Errors: [{ FieldName: "RestCompatibility", ErrorCode: "InvalidParameter", Message: message }],
        },
      });
    }
    expect((await ok(`/admin/v1/Accounts/${plain.AccountSid}`, {})).RestCompatibility).toBe("None");
  });

  it("SmsEnabled false on the account stops sending (SmsNotEnabled)", async () => {
    const tenant = await createTenant(t.app);
    await ok(`/admin/v1/Accounts/${tenant.accountSid}`, { SmsEnabled: false });
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: "Acme", To: "+447700900123", Text: "hi" },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().ResponseStatus.ErrorCode).toBe("SmsNotEnabled");
  });

  it("404 for an unknown or malformed AccountSid", async () => {
    for (const sid of ["AC" + "0".repeat(30), "AC1", "PR" + "A".repeat(30)]) {
      const res = await adminPost(`/admin/v1/Accounts/${sid}`, { Name: "x" });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${sid} was not found.`, Errors: [] } });
    }
  });

  it("400 InvalidParameter for a Name over 255 characters", async () => {
    const acc = await ok("/admin/v1/Accounts", { Name: "Keep" });
    const res = await adminPost(`/admin/v1/Accounts/${acc.AccountSid}`, { Name: "n".repeat(256) });
    expect(res.statusCode).toBe(400);
    expect(res.json().ResponseStatus.Errors[0]).toMatchObject({ FieldName: "Name", ErrorCode: "InvalidParameter" });
    expect((await ok(`/admin/v1/Accounts/${acc.AccountSid}`, {})).Name).toBe("Keep");
  });
});

describe("POST /admin/v1/Accounts/{AccountSid}/Token", () => {
  it("rotates the token: the old one is 401 on /v2, the new one works", async () => {
    const acc = await ok("/admin/v1/Accounts", { Name: "Rotating" });
    const url = `/v2/Accounts/${acc.AccountSid}/Numbers`;
    expect((await v2(url, basic(acc.AccountSid, acc.Token))).statusCode).toBe(200);

    const rotated = await ok(`/admin/v1/Accounts/${acc.AccountSid}/Token`);
    expect(Object.keys(rotated).sort()).toStrictEqual(["AccountSid", "Token"]);
    expect(rotated.AccountSid).toBe(acc.AccountSid);
    expect(rotated.Token.length).toBeGreaterThanOrEqual(32);
    expect(rotated.Token).not.toBe(acc.Token);

    const old = await v2(url, basic(acc.AccountSid, acc.Token));
    expect(old.statusCode).toBe(401);
    expect(old.headers["www-authenticate"]).toBe('Basic realm="switchboard"');
    expect(old.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "Unauthorized", Message: "The AccountSid or token is wrong.", Errors: [] } });
    const fresh = await v2(url, basic(acc.AccountSid, rotated.Token));
    expect(fresh.statusCode).toBe(200);

    // Rotating again retires the second token as well.
    const third = await ok(`/admin/v1/Accounts/${acc.AccountSid}/Token`, {});
    expect((await v2(url, basic(acc.AccountSid, rotated.Token))).statusCode).toBe(401);
    expect((await v2(url, basic(acc.AccountSid, third.Token))).statusCode).toBe(200);
  });

  it("404 for an unknown account", async () => {
    const sid = "AC" + "Z".repeat(30);
    const res = await adminPost(`/admin/v1/Accounts/${sid}/Token`);
    expect(res.statusCode).toBe(404);
    expect(res.json().ResponseStatus.ErrorCode).toBe("NotFound");
  });
});

describe("properties", () => {
  it("creates a property (SmsEnabled default true) and updates it", async () => {
    const acc = await ok("/admin/v1/Accounts", { Name: "Owner" });
    const prop = await ok(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Site" });
    const Created = Math.floor(t.clock.now().getTime() / 1000);
    expect(prop).toStrictEqual({ PropertySid: expect.stringMatching(PR), AccountSid: acc.AccountSid, Name: "Site", SmsEnabled: true, Created });
    const off = await ok(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Off", SmsEnabled: false });
    expect(off.SmsEnabled).toBe(false);

    const updated = await ok(`/admin/v1/Properties/${prop.PropertySid}`, { Name: "Renamed", SmsEnabled: false });
    expect(updated).toStrictEqual({ PropertySid: prop.PropertySid, AccountSid: acc.AccountSid, Name: "Renamed", SmsEnabled: false, Created });
    const same = await ok(`/admin/v1/Properties/${prop.PropertySid}`, {});
    expect(same).toStrictEqual(updated);
  });

  it("a property with SmsEnabled false refuses sends (SmsNotEnabled)", async () => {
    const tenant = await createTenant(t.app);
    await ok(`/admin/v1/Properties/${tenant.propertySid}`, { SmsEnabled: false });
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: "Acme", To: "+447700900123", Text: "hi" },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().ResponseStatus.ErrorCode).toBe("SmsNotEnabled");
  });

  it("404 creating a property for an unknown account", async () => {
    const sid = "AC" + "1".repeat(30);
    const res = await adminPost(`/admin/v1/Accounts/${sid}/Properties`, { Name: "Ghost" });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Account ${sid} was not found.`, Errors: [] } });
  });

  it("400 MissingParameter creating a property without a Name", async () => {
    const acc = await ok("/admin/v1/Accounts", { Name: "Owner" });
    const res = await adminPost(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { SmsEnabled: true });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "MissingParameter",
        Message: "Name is required.",
        Errors: [{ FieldName: "Name", ErrorCode: "MissingParameter", Message: "Name is required." }],
      },
    });
  });

  it("404 updating an unknown or malformed property", async () => {
    for (const sid of ["PR" + "0".repeat(30), "PR0", "AC" + "0".repeat(30)]) {
      const res = await adminPost(`/admin/v1/Properties/${sid}`, { Name: "x" });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Property ${sid} was not found.`, Errors: [] } });
    }
  });
});

describe("POST /admin/v1/Numbers", () => {
  it("creates an owned number and a pool number", async () => {
    const acc = await ok("/admin/v1/Accounts", { Name: "Numbers" });
    const owned = await ok("/admin/v1/Numbers", { Number: "+14155550177", AccountSid: acc.AccountSid });
    expect(owned).toStrictEqual({ Number: "+14155550177", AccountSid: acc.AccountSid, Friendly: "", AddressSid: "" });
    const pooled = await ok("/admin/v1/Numbers", { Number: "+12025550177" });
    expect(pooled).toStrictEqual({ Number: "+12025550177", AccountSid: "", Friendly: "", AddressSid: "" });
    const list = await v2(`/v2/Accounts/${acc.AccountSid}/Numbers`, basic(acc.AccountSid, acc.Token));
    expect(list.json()).toStrictEqual({ Numbers: [owned], TotalCount: 1 });
  });

  it("409 NumberExists for a number that exists, owned or pooled", async () => {
    const acc = await ok("/admin/v1/Accounts", { Name: "Dup" });
    await ok("/admin/v1/Numbers", { Number: "+14155550178", AccountSid: acc.AccountSid });
    for (const body of [{ Number: "+14155550178" }, { Number: "+14155550178", AccountSid: acc.AccountSid }, { Number: " +14155550178 " }]) {
      const res = await adminPost("/admin/v1/Numbers", body);
      expect(res.statusCode).toBe(409);
      expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NumberExists", Message: "Number +14155550178 already exists.", Errors: [] } });
    }
  });

  it.each(["14155550179", "+1 415 555 0179", "+0123456789", "+1234", "+1415555017900000", "abc", "+44 7700 900123"])(
    "400 InvalidParameter for the Number %j",
    async (number) => {
      const res = await adminPost("/admin/v1/Numbers", { Number: number });
      expect(res.statusCode).toBe(400);
      // A number written with spaces is told its one spelling (issue 41, defect 2).
      const spelled: Record<string, string> = { "+1 415 555 0179": "+14155550179", "+44 7700 900123": "+447700900123" };
      const hint = spelled[number]
        ? ` Write it ${spelled[number]} (E164: + and the country code, then the number without its trunk prefix such as 0, no spaces).`
        : "";
      const message = `Number "${number}" is not a valid E164 number such as +14155550123.${hint}`;
      expect(res.json()).toStrictEqual({
        ResponseStatus: { ErrorCode: "InvalidParameter", Message: message, Errors: [{ FieldName: "Number", ErrorCode: "InvalidParameter", Message: message }] },
      });
    },
  );

  it("400 MissingParameter without a Number", async () => {
    for (const body of [{}, { Number: "" }, { Number: "  " }]) {
      const res = await adminPost("/admin/v1/Numbers", body);
      expect(res.statusCode).toBe(400);
      expect(res.json().ResponseStatus).toMatchObject({ ErrorCode: "MissingParameter", Errors: [{ FieldName: "Number", ErrorCode: "MissingParameter" }] });
    }
  });

  it("400 InvalidParameter naming AccountSid for an unknown account", async () => {
    const sid = "AC" + "9".repeat(30);
    const res = await adminPost("/admin/v1/Numbers", { Number: "+14155550180", AccountSid: sid });
    expect(res.statusCode).toBe(400);
    const message = `AccountSid "${sid}" is not an account.`;
    expect(res.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: message,
        Errors: [{ FieldName: "AccountSid", ErrorCode: "InvalidParameter", Message: message }],
      },
    });
    // The number was not created.
    expect((await adminPost("/admin/v1/Numbers", { Number: "+14155550180" })).statusCode).toBe(200);
  });
});

describe("POST /admin/v1/Addresses/{AddressSid}/Review", () => {
  it("404 for an unknown address", async () => {
    const sid = "AD" + "0".repeat(30);
    const res = await adminPost(`/admin/v1/Addresses/${sid}/Review`, { Status: "Active" });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `Address ${sid} was not found.`, Errors: [] } });
  });
});
