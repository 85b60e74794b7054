import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

let t: TestApp;
let a: Tenant;
let b: Tenant;
/** B's resources. */
let bMessage: any;
let bAddress: any;

type Method = "GET" | "POST" | "DELETE";

function call(method: Method, url: string, auth: string | null, payload?: object) {
  return t.app.inject({ method, url, headers: auth === null ? {} : { authorization: auth }, ...(payload ? { payload } : {}) });
}

const SEND = { From: "Acme", To: "+447700900123", Text: "hello" };
const US = { Line1: "1 Market St", City: "San Francisco", CountryCode: "US", PostalCode: "94103" };

/** What B sees of its own data; compared before and after A's attempts. */
async function bSnapshot() {
  const get = async (url: string) => {
    const res = await call("GET", url, b.auth);
    expect(res.statusCode, url).toBe(200);
    return res.json();
  };
  return {
    message: await get(`/v2/Messages/${bMessage.MessageSid}`),
    messages: await get(`/v2/Properties/${b.propertySid}/Messages`),
    address: await get(`/v2/Addresses/${bAddress.AddressSid}`),
    addresses: await get(`/v2/Accounts/${b.accountSid}/Addresses`),
    numbers: await get(`/v2/Accounts/${b.accountSid}/Numbers`),
  };
}

beforeAll(async () => {
  t = await createTestApp();
  a = await createTenant(t.app);
  b = await createTenant(t.app);
  const schedule = Math.floor(t.clock.now().getTime() / 1000) + 3600;
  const sent = await call("POST", `/v2/Properties/${b.propertySid}/Messages`, b.auth, { ...SEND, Schedule: schedule });
  expect(sent.statusCode, sent.body).toBe(200);
  bMessage = sent.json();
  const added = await call("POST", `/v2/Accounts/${b.accountSid}/Addresses`, b.auth, US);
  expect(added.statusCode, added.body).toBe(200);
  bAddress = added.json();
  const configured = await call("POST", `/v2/Numbers/${b.ownedNumber.slice(1)}`, b.auth, { Friendly: "B's line", AddressSid: bAddress.AddressSid });
  expect(configured.statusCode, configured.body).toBe(200);
});
afterAll(async () => {
  await t?.close();
});

/** Every /v2 route, with B's Sids in the path. */
function routesWithBSids(): { name: string; method: Method; url: string; body?: object; what: string; sid: string }[] {
  return [
    { name: "send from B's property", method: "POST", url: `/v2/Properties/${b.propertySid}/Messages`, body: SEND, what: "Property", sid: b.propertySid },
    { name: "list B's property's messages", method: "GET", url: `/v2/Properties/${b.propertySid}/Messages`, what: "Property", sid: b.propertySid },
    { name: "batch from B's property", method: "POST", url: `/v2/Properties/${b.propertySid}/BatchMessages`, body: { Messages: [SEND] }, what: "Property", sid: b.propertySid },
    { name: "get B's message", method: "GET", url: `/v2/Messages/${bMessage.MessageSid}`, what: "Message", sid: bMessage.MessageSid },
    { name: "cancel B's message", method: "DELETE", url: `/v2/Messages/${bMessage.MessageSid}`, what: "Message", sid: bMessage.MessageSid },
    { name: "get B's address", method: "GET", url: `/v2/Addresses/${bAddress.AddressSid}`, what: "Address", sid: bAddress.AddressSid },
    { name: "delete B's address", method: "DELETE", url: `/v2/Addresses/${bAddress.AddressSid}`, what: "Address", sid: bAddress.AddressSid },
    { name: "list addresses under B's AccountSid", method: "GET", url: `/v2/Accounts/${b.accountSid}/Addresses`, what: "Account", sid: b.accountSid },
    { name: "add an address under B's AccountSid", method: "POST", url: `/v2/Accounts/${b.accountSid}/Addresses`, body: US, what: "Account", sid: b.accountSid },
    { name: "list numbers under B's AccountSid", method: "GET", url: `/v2/Accounts/${b.accountSid}/Numbers`, what: "Account", sid: b.accountSid },
    { name: "configure B's number", method: "POST", url: `/v2/Numbers/${b.ownedNumber.slice(1)}`, body: { Friendly: "stolen", AddressSid: "" }, what: "Number", sid: b.ownedNumber.slice(1) },
  ];
}

describe("tenant isolation", () => {
  it("A gets 404 NotFound on every /v2 route with B's Sids, and nothing of B's changes", async () => {
    const before = await bSnapshot();
    expect(before.message.Status).toBe("Scheduled");
    expect(before.numbers.Numbers[0]).toStrictEqual({ Number: b.ownedNumber, AccountSid: b.accountSid, Friendly: "B's line", AddressSid: bAddress.AddressSid });
    const routes = routesWithBSids();
    expect(routes).toHaveLength(11);
    for (const r of routes) {
      const res = await call(r.method, r.url, a.auth, r.body);
      expect(res.statusCode, r.name).toBe(404);
      expect(res.json(), r.name).toStrictEqual({ ResponseStatus: { ErrorCode: "NotFound", Message: `${r.what} ${r.sid} was not found.`, Errors: [] } });
    }
    expect(await bSnapshot()).toStrictEqual(before);
    // And nothing landed on A's side either.
    expect((await call("GET", `/v2/Properties/${a.propertySid}/Messages`, a.auth)).json()).toStrictEqual({ Messages: [], TotalCount: 0 });
    expect((await call("GET", `/v2/Accounts/${a.accountSid}/Addresses`, a.auth)).json()).toStrictEqual({ Addresses: [], TotalCount: 0 });
  });

  it("the same calls with B's own credentials succeed (the 404s above are about ownership)", async () => {
    const res = await call("GET", `/v2/Messages/${bMessage.MessageSid}`, b.auth);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ ...bMessage, Status: "Scheduled", Direction: "Transmit" });
  });

  it("A cannot send from B's number (SenderNotOwned) nor register B's address (InvalidParameter)", async () => {
    const send = await call("POST", `/v2/Properties/${a.propertySid}/Messages`, a.auth, { ...SEND, From: b.ownedNumber });
    expect(send.statusCode).toBe(400);
    expect(send.json().ResponseStatus).toMatchObject({ ErrorCode: "SenderNotOwned", Errors: [{ FieldName: "From", ErrorCode: "SenderNotOwned" }] });
    const configure = await call("POST", `/v2/Numbers/${a.ownedNumber.slice(1)}`, a.auth, { AddressSid: bAddress.AddressSid });
    expect(configure.statusCode).toBe(400);
    expect(configure.json().ResponseStatus).toMatchObject({ ErrorCode: "InvalidParameter", Errors: [{ FieldName: "AddressSid", ErrorCode: "InvalidParameter" }] });
    expect((await call("GET", `/v2/Properties/${a.propertySid}/Messages`, a.auth)).json().TotalCount).toBe(0);
  });

  it("A's own message and address are 404 to B as well (isolation is symmetric)", async () => {
    const added = await call("POST", `/v2/Accounts/${a.accountSid}/Addresses`, a.auth, US);
    const sid = added.json().AddressSid;
    expect((await call("GET", `/v2/Addresses/${sid}`, b.auth)).statusCode).toBe(404);
    expect((await call("DELETE", `/v2/Addresses/${sid}`, b.auth)).statusCode).toBe(404);
    expect((await call("GET", `/v2/Addresses/${sid}`, a.auth)).statusCode).toBe(200);
    expect((await call("DELETE", `/v2/Addresses/${sid}`, a.auth)).json()).toStrictEqual({ AddressSid: sid });
  });
});

describe("authentication", () => {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const WRONG = { ResponseStatus: { ErrorCode: "Unauthorized", Message: "The AccountSid or token is wrong.", Errors: [] } };
  const MISSING = {
    ResponseStatus: {
      ErrorCode: "Unauthorized",
      Message: "Authentication required: use HTTP Basic with your AccountSid as user and your token as password.",
      Errors: [],
    },
  };

  /** [name, header, expected body] for every credential that must be refused. */
  function badCredentials(): [string, string | null, object][] {
    return [
      ["no Authorization header", null, MISSING],
      ["a wrong token", basic(a.accountSid, "x".repeat(40)), WRONG],
      ["B's token with A's Sid", basic(a.accountSid, b.token), WRONG],
      ["A's token with a one-character change", basic(a.accountSid, a.token.slice(0, -1) + (a.token.endsWith("A") ? "B" : "A")), WRONG],
      ["A's token with a suffix", basic(a.accountSid, a.token + "x"), WRONG],
      ["an empty token", basic(a.accountSid, ""), WRONG],
      ["an unknown AccountSid", basic("AC" + "0".repeat(30), a.token), WRONG],
      ["a lower-case AccountSid", basic(a.accountSid.toLowerCase(), a.token), WRONG],
      ["a property Sid as user", basic(a.propertySid, a.token), WRONG],
      ["an empty user", basic("", a.token), WRONG],
      ["Basic without credentials", "Basic", MISSING],
      ["Basic with a blank", "Basic   ", MISSING],
      ["credentials without a colon", `Basic ${b64(a.accountSid + a.token)}`, MISSING],
      ["bad Base64 characters", "Basic %%%%****", MISSING],
      ["Base64 with spaces inside", `Basic ${b64(`${a.accountSid}:${a.token}`).slice(0, 10)} ${b64(`${a.accountSid}:${a.token}`).slice(10)}`, MISSING],
      ["truncated Base64", `Basic ${b64(`${a.accountSid}:${a.token}`).slice(0, 7)}`, MISSING],
      ["a Bearer token", `Bearer ${a.token}`, MISSING],
      ["a Digest header", `Digest username="${a.accountSid}"`, MISSING],
      ["the raw credentials without Base64", `Basic ${a.accountSid}:${a.token}`, MISSING],
    ];
  }

  it("every refused credential is 401 Unauthorized with WWW-Authenticate: Basic realm=\"switchboard\"", async () => {
    for (const [name, header, body] of badCredentials()) {
      const res = await call("GET", `/v2/Accounts/${a.accountSid}/Addresses`, header);
      expect(res.statusCode, name).toBe(401);
      expect(res.headers["www-authenticate"], name).toBe('Basic realm="switchboard"');
      expect(res.headers["content-type"], name).toMatch(/^application\/json/);
      expect(res.json(), name).toStrictEqual(body);
    }
  });

  it("401 comes before 404 and before body validation on every /v2 route", async () => {
    const before = await bSnapshot();
    for (const r of routesWithBSids()) {
      for (const header of [null, basic(b.accountSid, "wrong"), "Basic !!"]) {
        const res = await call(r.method, r.url, header, r.body);
        expect(res.statusCode, `${r.name} ${header}`).toBe(401);
        expect(res.headers["www-authenticate"]).toBe('Basic realm="switchboard"');
        expect(res.json().ResponseStatus.ErrorCode).toBe("Unauthorized");
      }
    }
    // Even a body that is not JSON is refused as 401, not 400.
    const junk = await t.app.inject({ method: "POST", url: `/v2/Properties/${a.propertySid}/Messages`, headers: { "content-type": "application/json" }, payload: "{nope" });
    expect(junk.statusCode).toBe(401);
    expect(await bSnapshot()).toStrictEqual(before);
  });

  it("the correct credentials work, with any case of the Basic scheme", async () => {
    for (const scheme of ["Basic", "basic", "BASIC"]) {
      const header = `${scheme} ${b64(`${a.accountSid}:${a.token}`)}`;
      const res = await call("GET", `/v2/Accounts/${a.accountSid}/Numbers`, header);
      expect(res.statusCode, scheme).toBe(200);
    }
  });
});

describe("malformed Sids", () => {
  it("Sids with the wrong prefix or length are 404 NotFound on every route", async () => {
    const good = { PR: a.propertySid, MG: "MG" + a.propertySid.slice(2), AD: "AD" + a.propertySid.slice(2), AC: a.accountSid };
    const variants = (sid: string, prefix: string) => [
      sid.slice(0, -1), // 31 characters
      sid + "A", // 33 characters
      (prefix === "AC" ? "PR" : "AC") + sid.slice(2), // wrong prefix
      sid.toLowerCase(),
      sid.slice(0, 2) + "-".repeat(30),
      prefix,
      "%20" + sid,
    ];
    const cases: [Method, (sid: string) => string, keyof typeof good, string, object?][] = [
      ["POST", (s) => `/v2/Properties/${s}/Messages`, "PR", "Property", SEND],
      ["GET", (s) => `/v2/Properties/${s}/Messages`, "PR", "Property"],
      ["POST", (s) => `/v2/Properties/${s}/BatchMessages`, "PR", "Property", { Messages: [SEND] }],
      ["GET", (s) => `/v2/Messages/${s}`, "MG", "Message"],
      ["DELETE", (s) => `/v2/Messages/${s}`, "MG", "Message"],
      ["GET", (s) => `/v2/Addresses/${s}`, "AD", "Address"],
      ["DELETE", (s) => `/v2/Addresses/${s}`, "AD", "Address"],
      ["GET", (s) => `/v2/Accounts/${s}/Addresses`, "AC", "Account"],
      ["POST", (s) => `/v2/Accounts/${s}/Addresses`, "AC", "Account", US],
      ["GET", (s) => `/v2/Accounts/${s}/Numbers`, "AC", "Account"],
    ];
    let n = 0;
    for (const [method, url, prefix, what, body] of cases) {
      for (const sid of variants(good[prefix], prefix)) {
        const res = await call(method, url(sid), a.auth, body);
        expect(res.statusCode, `${method} ${url(sid)}`).toBe(404);
        expect(res.json().ResponseStatus.ErrorCode, `${method} ${url(sid)}`).toBe("NotFound");
        expect(res.json().ResponseStatus.Message).toMatch(new RegExp(`^${what} .* was not found\\.$`));
        n++;
      }
    }
    expect(n).toBe(70);
    // Nothing was created by the refused sends and adds.
    expect((await call("GET", `/v2/Properties/${a.propertySid}/Messages`, a.auth)).json().TotalCount).toBe(0);
  });

  it("a valid-looking but unknown Sid of each kind is 404", async () => {
    for (const [method, url] of [
      ["GET", `/v2/Messages/MG${"0".repeat(30)}`],
      ["DELETE", `/v2/Messages/MG${"0".repeat(30)}`],
      ["GET", `/v2/Properties/PR${"0".repeat(30)}/Messages`],
      ["GET", `/v2/Addresses/AD${"0".repeat(30)}`],
      ["DELETE", `/v2/Addresses/AD${"0".repeat(30)}`],
      ["GET", `/v2/Accounts/AC${"0".repeat(30)}/Numbers`],
    ] as [Method, string][]) {
      const res = await call(method, url, a.auth);
      expect(res.statusCode, url).toBe(404);
      expect(res.json().ResponseStatus.ErrorCode).toBe("NotFound");
    }
  });
});
