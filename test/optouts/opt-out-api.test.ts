/**
 * The opt-out list over the customer API (docs/api.md#opt-out-stop-start-help):
 * `GET|POST /v2/Accounts/{AccountSid}/OptOuts`, `DELETE …/OptOuts/{Number}`, over REST and the same
 * methods over Connect and gRPC; and the operator's consent and destination settings on the account.
 */
import type { AddressInfo } from "node:net";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { OptOutService } from "../../gen/switchboard/v2/opt_outs_pb.js";
import { addOptOut } from "../../src/optouts/opt-out-store.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, rpcRefusal, type Tenant, type TestApp } from "../support/harness.js";

let t: TestApp;
let tenant: Tenant;
let other: Tenant;
const secs = () => Math.floor(t.clock.now().getTime() / 1000);

beforeAll(async () => {
  t = await createTestApp({ engine: true });
  tenant = await createTenant(t.app);
  other = await createTenant(t.app);
});

afterAll(async () => {
  await t?.close();
});

const call = (method: "GET" | "POST" | "DELETE", url: string, who: Tenant = tenant, payload?: object) =>
  t.app.inject({ method, url, headers: { authorization: who.auth }, ...(payload ? { payload } : {}) });
const base = (who: Tenant = tenant) => `/v2/Accounts/${who.accountSid}/OptOuts`;

describe(`OptOuts over REST (${dbKind()})`, () => {
  it("adds (twice: idempotent, the first Source and Created stay), lists newest first with TotalCount, and deletes", async () => {
    expect((await call("GET", base())).json()).toStrictEqual({ OptOuts: [], TotalCount: 0 });
    const first = await call("POST", base(), tenant, { Number: "+61412000001" });
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toStrictEqual({ Number: "+61412000001", Source: "Api", Created: secs() });
    t.clock.advance(5000);
    const again = await call("POST", base(), tenant, { Number: " +61412000001 " });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toStrictEqual(first.json());
    await call("POST", base(), tenant, { Number: "+61412000002" });

    expect((await call("GET", base())).json()).toStrictEqual({
      OptOuts: [
        { Number: "+61412000002", Source: "Api", Created: secs() },
        { Number: "+61412000001", Source: "Api", Created: secs() - 5 },
      ],
      TotalCount: 2,
    });
    expect((await call("GET", `${base()}?Results_Count=1&Results_Skip=1`)).json()).toStrictEqual({
      OptOuts: [{ Number: "+61412000001", Source: "Api", Created: secs() - 5 }],
      TotalCount: 2,
    });
    expect((await call("GET", `${base()}?Results_Skip=5`)).json()).toStrictEqual({ OptOuts: [], TotalCount: 2 });

    const del = await call("DELETE", `${base()}/61412000001`);
    expect(del.statusCode, del.body).toBe(200);
    expect(del.json()).toStrictEqual({ Number: "+61412000001" });
    const gone = await call("DELETE", `${base()}/61412000001`);
    expect(gone.statusCode).toBe(404);
    expect(gone.json().ResponseStatus).toMatchObject({ ErrorCode: "NotFound", Message: "+61412000001 is not on the account's opt-out list." });
    expect((await call("GET", base())).json().TotalCount).toBe(1);
    // Another account's list is its own.
    expect((await call("GET", base(other), other)).json()).toStrictEqual({ OptOuts: [], TotalCount: 0 });
  });

  it("deletes any entry the list shows: one from an alphanumeric sender (a STOP texted from 'Shop') too", async () => {
    // What a keyword from an alphanumeric sender puts on the list (delivery/inbound-keywords.ts).
    for (const number of ["Shop", "My Shop"])
      await addOptOut(t.db.orm.em.fork(), { accountSid: tenant.accountSid, number, source: "Keyword", createdAt: t.clock.now() });
    const listed = (await call("GET", base())).json().OptOuts.map((o: { Number: string }) => o.Number);
    expect(listed).toEqual(expect.arrayContaining(["Shop", "My Shop"]));
    for (const number of ["Shop", "My Shop"]) {
      const del = await call("DELETE", `${base()}/${encodeURIComponent(number)}`);
      expect(del.statusCode, del.body).toBe(200);
      expect(del.json()).toStrictEqual({ Number: number });
      // Gone: no longer on the list, and not a number either.
      const again = await call("DELETE", `${base()}/${encodeURIComponent(number)}`);
      expect(again.statusCode, again.body).toBe(400);
      expect(again.json().ResponseStatus.Errors[0].FieldName).toBe("Number");
    }
    const after = (await call("GET", base())).json().OptOuts.map((o: { Number: string }) => o.Number);
    expect(after).not.toContain("Shop");
    expect(after).not.toContain("My Shop");
    // An E164 entry is still named with or without its +.
    await call("POST", base(), tenant, { Number: "+61412000021" });
    expect((await call("DELETE", `${base()}/%2B61412000021`)).json()).toStrictEqual({ Number: "+61412000021" });
  });

  it("refuses a bad Number with a 400 naming Number, and a bad page with one naming the field", async () => {
    const bad = await call("POST", base(), tenant, { Number: "0412 345 678" });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toStrictEqual({
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: 'Number "0412 345 678" is not a valid E164 number such as +61412345678.',
        Errors: [{ FieldName: "Number", ErrorCode: "InvalidParameter", Message: 'Number "0412 345 678" is not a valid E164 number such as +61412345678.' }],
      },
    });
    const missing = await call("POST", base(), tenant, {});
    expect(missing.statusCode).toBe(400);
    expect(missing.json().ResponseStatus.Errors).toEqual([
      { FieldName: "Number", ErrorCode: "MissingParameter", Message: expect.stringContaining("Number is required") },
    ]);
    const badDelete = await call("DELETE", `${base()}/abc`);
    expect(badDelete.statusCode).toBe(400);
    expect(badDelete.json().ResponseStatus.Errors[0].FieldName).toBe("Number");
    const page = await call("GET", `${base()}?Results_Count=0`);
    expect(page.statusCode).toBe(400);
    expect(page.json().ResponseStatus.Errors[0].FieldName).toBe("Results_Count");
  });

  it("answers another account's path 404 and a call without credentials 401", async () => {
    for (const [method, url] of [
      ["GET", base(other)],
      ["POST", base(other)],
      ["DELETE", `${base(other)}/61412000009`],
    ] as const) {
      const res = await call(method, url, tenant, method === "POST" ? { Number: "+61412000009" } : undefined);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json().ResponseStatus.ErrorCode).toBe("NotFound");
    }
    expect((await call("GET", base(other), other)).json().TotalCount).toBe(0);
    expect((await t.app.inject({ method: "GET", url: base() })).statusCode).toBe(401);
  });

  it("an opt-out added through the API also fails what is still queued to the number (RecipientOptedOut)", async () => {
    const to = "+61412000010";
    const send = await call("POST", `/v2/Properties/${tenant.propertySid}/Messages`, tenant, {
      From: tenant.ownedNumber,
      To: to,
      Text: "Tomorrow's reminder",
      Schedule: secs() + 3600,
    });
    expect(send.statusCode, send.body).toBe(200);
    const sid = send.json().MessageSid;
    expect((await call("POST", base(), tenant, { Number: to })).statusCode).toBe(200);
    const record = (await call("GET", `/v2/Messages/${sid}`)).json();
    expect(record).toMatchObject({ Status: "Failed", ErrorCode: "RecipientOptedOut" });
  });
});

describe(`OptOuts over Connect and gRPC (${dbKind()})`, () => {
  let sessions: Http2SessionManager;
  const clients = {} as Record<"connect" | "grpc", Client<typeof OptOutService>>;

  beforeAll(async () => {
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    const baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    sessions = new Http2SessionManager(baseUrl);
    clients.connect = createClient(OptOutService, createConnectTransport({ baseUrl, httpVersion: "1.1" }));
    clients.grpc = createClient(OptOutService, createGrpcTransport({ baseUrl, sessionManager: sessions }));
  });

  afterAll(() => {
    sessions?.abort();
  });

  for (const name of ["connect", "grpc"] as const) {
    it(`${name}: the same methods, and their refusals with ErrorInfo (and BadRequest for a field)`, async () => {
      const client = clients[name];
      const headers = { authorization: other.auth };
      const number = name === "connect" ? "+61412000021" : "+61412000022";
      const added = await client.createOptOut({ accountSid: other.accountSid, number }, { headers });
      expect(added).toMatchObject({ number, source: "Api", created: BigInt(secs()) });
      const listed = await client.listOptOuts({ accountSid: other.accountSid }, { headers });
      expect(listed.optOuts.map((o) => o.number)).toContain(number);
      expect(await client.deleteOptOut({ accountSid: other.accountSid, number: number.slice(1) }, { headers })).toMatchObject({ number });

      const notFound = await rpcRefusal(() => client.deleteOptOut({ accountSid: other.accountSid, number: number.slice(1) }, { headers }));
      expect(notFound.code).toBe(Code.NotFound);
      expect(notFound.findDetails(ErrorInfoSchema).map((d) => [d.reason, d.domain])).toEqual([["NotFound", "switchboard"]]);

      const bad = await rpcRefusal(() => client.createOptOut({ accountSid: other.accountSid, number: "12" }, { headers }));
      expect(bad.code).toBe(Code.InvalidArgument);
      expect(bad.findDetails(ErrorInfoSchema).map((d) => d.reason)).toEqual(["InvalidParameter"]);
      expect(bad.findDetails(BadRequestSchema)[0].fieldViolations.map((v) => v.field)).toEqual(["Number"]);
    });
  }
});

describe(`the operator's consent and destination settings (${dbKind()})`, () => {
  const adminCall = (method: "GET" | "POST", url: string, payload?: object) =>
    t.app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, ...(payload ? { payload } : {}) });

  it("GET shows the defaults; POST sets, trims, upper-cases and restores them", async () => {
    const url = `/admin/v1/Accounts/${tenant.accountSid}`;
    expect((await adminCall("GET", url)).json()).toMatchObject({ OptOutText: "", OptInText: "", HelpText: "", OptOutKeywords: true, AllowedCountries: [] });
    const set = await admin(t.app, url, {
      OptOutText: " Bye. Reply START to rejoin. ",
      OptInText: "Welcome back.",
      HelpText: "Call 1300 000 000.",
      OptOutKeywords: false,
      AllowedCountries: ["au", "NZ", "AU"],
    });
    expect(set).toMatchObject({
      OptOutText: "Bye. Reply START to rejoin.",
      OptInText: "Welcome back.",
      HelpText: "Call 1300 000 000.",
      OptOutKeywords: false,
      AllowedCountries: ["AU", "NZ"],
    });
    expect((await adminCall("GET", url)).json()).toMatchObject({ AllowedCountries: ["AU", "NZ"], OptOutKeywords: false });
    // Omitted fields stay; [] and "" restore the defaults.
    expect(await admin(t.app, url, { Name: "Tenant" })).toMatchObject({ AllowedCountries: ["AU", "NZ"], HelpText: "Call 1300 000 000." });
    expect(await admin(t.app, url, { AllowedCountries: [], HelpText: "", OptOutKeywords: true })).toMatchObject({
      AllowedCountries: [],
      HelpText: "",
      OptOutKeywords: true,
    });
  });

  it("refuses a bad country code or an overlong text with a 400 naming the field, and changes nothing", async () => {
    const url = `/admin/v1/Accounts/${tenant.accountSid}`;
    const bad = await adminCall("POST", url, { AllowedCountries: ["AU", "UK"], OptInText: "changed" });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().ResponseStatus).toStrictEqual({
      ErrorCode: "InvalidCountryCode",
      Message: 'AllowedCountries: "UK" is not an ISO 3166-1 alpha-2 country code (e.g. GB, AU, US).',
      Errors: [
        {
          FieldName: "AllowedCountries",
          ErrorCode: "InvalidCountryCode",
          Message: 'AllowedCountries: "UK" is not an ISO 3166-1 alpha-2 country code (e.g. GB, AU, US).',
        },
      ],
    });
    const notStrings = await adminCall("POST", url, { AllowedCountries: [61] });
    expect(notStrings.statusCode).toBe(400);
    expect(notStrings.json().ResponseStatus.Errors[0].FieldName).toBe("AllowedCountries");
    const long = await adminCall("POST", url, { HelpText: "x".repeat(1601) });
    expect(long.statusCode).toBe(400);
    expect(long.json().ResponseStatus.Errors[0]).toStrictEqual({
      FieldName: "HelpText",
      ErrorCode: "InvalidParameter",
      Message: "HelpText is 1601 characters long; the limit is 1600.",
    });
    expect((await adminCall("GET", url)).json()).toMatchObject({ OptInText: "Welcome back.", AllowedCountries: [] });
  });
});
