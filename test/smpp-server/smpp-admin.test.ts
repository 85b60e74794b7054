/**
 * The operator's SMPP methods (issue 44, docs/smpp-server.md): an account's credentials (the
 * password hashed, never answered), a SystemId unique across accounts, and the live binds.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { passwordMatches } from "../../src/accounts/password-hash.js";
import { openSmppBind } from "../../src/accounts/smpp-store.js";

let t: TestApp;
let a: Tenant;
let b: Tenant;
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` };

beforeAll(async () => {
  t = await createTestApp();
  a = await createTenant(t.app);
  b = await createTenant(t.app);
});
afterAll(() => t.close());

function put(accountSid: string, body: object) {
  return t.app.inject({ method: "PUT", url: `/admin/v1/Accounts/${accountSid}/Smpp`, headers: bearer, payload: body });
}

describe("SMPP credentials", () => {
  it("are set with PUT and read with GET, without the password; MaxBinds defaults to 4; the password stored as a salted scrypt hash", async () => {
    const res = await put(a.accountSid, { SystemId: "acme", Password: "s3cret", PropertySid: a.propertySid, AllowedAddresses: ["127.0.0.1", "10.0.0.0/8"] });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toStrictEqual({
      AccountSid: a.accountSid,
      SystemId: "acme",
      PropertySid: a.propertySid,
      MaxBinds: 4,
      AllowedAddresses: ["127.0.0.1/32", "10.0.0.0/8"],
      DeliverReplies: false,
      Updated: Math.floor(t.clock.now().getTime() / 1000),
    });
    expect(res.body).not.toContain("s3cret");
    const got = await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${a.accountSid}/Smpp`, headers: bearer });
    expect(got.statusCode).toBe(200);
    expect(got.json()).toStrictEqual(body);
    const rows = await executeBound<{ password_hash: string }>(t.db.orm.em.fork(), "select password_hash from smpp_credentials where account_sid = ?", [
      a.accountSid,
    ]);
    // A salted scrypt hash (accounts/password-hash.ts): never the password, and it checks.
    expect(rows).toHaveLength(1);
    expect(rows[0].password_hash).toMatch(/^scrypt\$16384\$[\w-]{22}\$[\w-]{43}$/);
    expect(rows[0].password_hash).not.toContain("s3cret");
    expect(await passwordMatches("s3cret", rows[0].password_hash)).toBe(true);
    expect(await passwordMatches("s3cre", rows[0].password_hash)).toBe(false);
  });

  it("a PUT replaces them (DeliverReplies, MaxBinds)", async () => {
    const res = await put(a.accountSid, { SystemId: "acme", Password: "n3w", PropertySid: a.propertySid, MaxBinds: 2, DeliverReplies: true });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ SystemId: "acme", MaxBinds: 2, AllowedAddresses: [], DeliverReplies: true });
  });

  it("a SystemId another account holds is 409 SmppSystemIdTaken", async () => {
    const res = await put(b.accountSid, { SystemId: "acme", Password: "pw", PropertySid: b.propertySid });
    expect(res.statusCode).toBe(409);
    expect(res.json().ResponseStatus.ErrorCode).toBe("SmppSystemIdTaken");
    expect(res.json().ResponseStatus.Errors).toStrictEqual([
      { FieldName: "SystemId", ErrorCode: "SmppSystemIdTaken", Message: `SystemId "acme" is another account's; each account's SMPP SystemId is its own.` },
    ]);
  });

  it("bad fields are one 400 naming each, and the password is never echoed", async () => {
    const res = await put(b.accountSid, {
      SystemId: "a-system-id-too-long",
      Password: "toolongpassword",
      PropertySid: a.propertySid,
      MaxBinds: 0,
      AllowedAddresses: ["10.0.0.0/33", "example.com"],
    });
    expect(res.statusCode).toBe(400);
    const errors = res.json().ResponseStatus.Errors as { FieldName: string; ErrorCode: string }[];
    expect(errors.map((e) => [e.FieldName, e.ErrorCode])).toStrictEqual([
      ["SystemId", "InvalidParameter"],
      ["Password", "InvalidParameter"],
      ["PropertySid", "InvalidParameter"],
      ["MaxBinds", "InvalidParameter"],
      ["AllowedAddresses[0]", "InvalidParameter"],
      ["AllowedAddresses[1]", "InvalidParameter"],
    ]);
    expect(res.body).not.toContain("toolongpassword");
    const missing = await put(b.accountSid, {});
    expect(missing.json().ResponseStatus.Errors.map((e: { FieldName: string }) => e.FieldName)).toStrictEqual(["SystemId", "Password", "PropertySid"]);
  });

  it("GET of an account without credentials is 404", async () => {
    const res = await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${b.accountSid}/Smpp`, headers: bearer });
    expect(res.statusCode).toBe(404);
    expect(res.json().ResponseStatus.ErrorCode).toBe("NotFound");
  });

  it("an account's token does not reach them", async () => {
    const res = await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${a.accountSid}/Smpp`, headers: { authorization: a.auth } });
    expect(res.statusCode).toBe(401);
  });
});

describe("SMPP binds", () => {
  it("MaxBinds holds across processes (the table), stale binds stop counting, and ListSmppBinds lists the live ones", async () => {
    const em = t.db.orm.em.fork();
    const now = t.clock.now();
    const bind = (id: string) => ({
      bindId: id,
      accountSid: a.accountSid,
      systemId: "acme",
      address: "127.0.0.1:5000",
      mode: "Transceiver",
      since: now,
      inFlight: 0,
    });
    const liveSince = new Date(now.getTime() - 30_000);
    expect(await openSmppBind(em, bind("SB1"), now, liveSince)).toBe(true);
    expect(await openSmppBind(em, bind("SB2"), now, liveSince)).toBe(true);
    expect(await openSmppBind(em, bind("SB3"), now, liveSince)).toBe(false);
    const res = await t.app.inject({ method: "GET", url: `/admin/v1/SmppBinds?AccountSid=${a.accountSid}`, headers: bearer });
    expect(res.json()).toStrictEqual({
      Binds: ["SB1", "SB2"].map(() => ({
        AccountSid: a.accountSid,
        SystemId: "acme",
        Address: "127.0.0.1:5000",
        Mode: "Transceiver",
        Since: Math.floor(now.getTime() / 1000),
        InFlight: 0,
      })),
    });
    // 31 s without a heartbeat: gone, and a new bind takes the place.
    t.clock.advance(31_000);
    const later = t.clock.now();
    expect(await openSmppBind(em, bind("SB4"), later, new Date(later.getTime() - 30_000))).toBe(true);
    const after = await t.app.inject({ method: "GET", url: "/admin/v1/SmppBinds", headers: bearer });
    expect(after.json().Binds).toHaveLength(1);
    const junk = await t.app.inject({ method: "GET", url: "/admin/v1/SmppBinds?AccountSid=nope", headers: bearer });
    expect(junk.json()).toStrictEqual({ Binds: [] });
  });
});
