/**
 * The console's sessions (src/console/): sign-in with the operator token for an HttpOnly,
 * SameSite=Strict cookie and a CSRF token; the operator service taking the cookie only with that
 * token in X-CSRF-Token (Connect and REST alike, a state change included); a wrong token answered
 * as the operator API answers it; expiry on the clock; sign-out; the page and its assets with a
 * strict Content-Security-Policy. Over app.inject; the browser test is test/e2e/console.test.ts.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CSRF_REFUSAL } from "../../src/accounts/auth.js";
import { CONSOLE_CSP } from "../../src/console/console-plugin.js";
import { SESSION_TTL_MS } from "../../src/console/console-sessions.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

let t: TestApp;
let tenant: Tenant;
let dir: string;

const COOKIE = /^sb_console=([A-Za-z0-9_-]{43}); Path=\/; Max-Age=43200; HttpOnly; SameSite=Strict$/;

async function signIn(token = ADMIN_TOKEN, headers: Record<string, string> = {}) {
  return t.app.inject({ method: "POST", url: "/console/session", headers, payload: { Token: token } });
}

/** A signed-in session: the Cookie header to send and the CSRF token. */
async function session(): Promise<{ cookie: string; csrf: string }> {
  const res = await signIn();
  expect(res.statusCode, res.body).toBe(200);
  const id = COOKIE.exec(String(res.headers["set-cookie"]))![1];
  return { cookie: `other=1; sb_console=${id}`, csrf: res.json().CsrfToken };
}

/** An operator call over Connect (JSON), as the console's client makes it. */
function connect(method: string, body: object, headers: Record<string, string>) {
  return t.app.inject({
    method: "POST",
    url: `/switchboard.admin.v1.AdminService/${method}`,
    headers: { "content-type": "application/json", ...headers },
    payload: body,
  });
}

/** Whether the tenant's token still authenticates on the customer API. */
async function tokenWorks(token: string): Promise<boolean> {
  const res = await t.app.inject({
    method: "GET",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: `Basic ${Buffer.from(`${tenant.accountSid}:${token}`).toString("base64")}` },
  });
  return res.statusCode === 200;
}

describe(`console sessions (${dbKind()})`, () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "sb-console-"));
    mkdirSync(join(dir, "assets"));
    writeFileSync(join(dir, "index.html"), '<!DOCTYPE html><html lang="en"><script type="module" src="./assets/index-abc.js"></script></html>');
    writeFileSync(join(dir, "assets", "index-abc.js"), "console.log(1)");
    t = await createTestApp({ consoleDir: dir, config: { authFailures: { perAddress: 0, perAccount: 0, windowMs: 60_000 } } });
    tenant = await createTenant(t.app);
  });
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers a wrong token exactly as the operator API answers a wrong bearer token", async () => {
    const api = await t.app.inject({ method: "GET", url: "/admin/v1/Accounts", headers: { authorization: "Bearer wrong" } });
    const res = await signIn("wrong");
    expect(res.statusCode).toBe(401);
    expect(res.json()).toStrictEqual(api.json());
    expect(res.json()).toStrictEqual({
      ResponseStatus: { ErrorCode: "Unauthorized", Message: "Operator calls need `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`.", Errors: [] },
    });
    expect(res.headers["www-authenticate"]).toBe(api.headers["www-authenticate"]);
    expect(res.headers["set-cookie"]).toBeUndefined();
  });

  it("names Token when it is missing", async () => {
    const res = await t.app.inject({ method: "POST", url: "/console/session", payload: {} });
    expect(res.statusCode).toBe(400);
    expect(res.json().ResponseStatus.Errors).toStrictEqual([
      { FieldName: "Token", ErrorCode: "MissingParameter", Message: "Token is required: the operator token (SWITCHBOARD_ADMIN_TOKEN)." },
    ]);
  });

  it("signs in: an HttpOnly SameSite=Strict cookie (Secure behind https) and the CSRF token, expiring in 12 hours", async () => {
    const res = await signIn();
    expect(res.statusCode).toBe(200);
    expect(String(res.headers["set-cookie"])).toMatch(COOKIE);
    expect(res.headers["cache-control"]).toBe("no-store");
    expect(res.headers["content-security-policy"]).toBe(CONSOLE_CSP);
    const body = res.json();
    expect(Object.keys(body).sort()).toStrictEqual(["CsrfToken", "Expires"]);
    expect(body.CsrfToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(body.Expires).toBe(Math.floor((t.clock.now().getTime() + SESSION_TTL_MS) / 1000));
    const https = await signIn(ADMIN_TOKEN, { "x-forwarded-proto": "https" });
    expect(String(https.headers["set-cookie"])).toMatch(/; HttpOnly; SameSite=Strict; Secure$/);
  });

  it("lets the session call the operator service only with its CSRF token, on Connect and REST", async () => {
    const s = await session();
    const ok = await connect("ListAccounts", {}, { cookie: s.cookie, "x-csrf-token": s.csrf });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json().Accounts.map((a: any) => a.AccountSid)).toContain(tenant.accountSid);

    for (const headers of [{ cookie: s.cookie }, { cookie: s.cookie, "x-csrf-token": "wrong" }] as Record<string, string>[]) {
      // A state change another site could make the browser send: refused, and nothing changes.
      const refused = await connect("RotateToken", { AccountSid: tenant.accountSid }, headers);
      expect(refused.statusCode).toBe(401);
      expect(refused.json()).toMatchObject({ code: "unauthenticated", message: CSRF_REFUSAL });
      const rest = await t.app.inject({ method: "POST", url: `/admin/v1/Accounts/${tenant.accountSid}/Token`, headers, payload: {} });
      expect(rest.statusCode).toBe(401);
      expect(rest.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "Unauthorized", Message: CSRF_REFUSAL, Errors: [] } });
    }
    expect(await tokenWorks(tenant.token)).toBe(true);

    // With the token, the same change is made.
    const rotated = await connect("RotateToken", { AccountSid: tenant.accountSid }, { cookie: s.cookie, "x-csrf-token": s.csrf });
    expect(rotated.statusCode, rotated.body).toBe(200);
    expect(await tokenWorks(tenant.token)).toBe(false);
    expect(await tokenWorks(rotated.json().Token)).toBe(true);
    tenant.token = rotated.json().Token;
  });

  it("refuses a CSRF token without its cookie, and an unknown cookie, as calls without credentials", async () => {
    const s = await session();
    for (const headers of [{ "x-csrf-token": s.csrf }, { cookie: "sb_console=forged", "x-csrf-token": s.csrf }] as Record<string, string>[]) {
      const res = await connect("ListAccounts", {}, headers);
      expect(res.statusCode).toBe(401);
      expect(res.json().message).toBe("Operator calls need `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`.");
    }
  });

  it("gives the page its session back after a reload, and ends it after 12 hours", async () => {
    const s = await session();
    const again = await t.app.inject({ method: "GET", url: "/console/session", headers: { cookie: s.cookie } });
    expect(again.statusCode).toBe(200);
    expect(again.json().CsrfToken).toBe(s.csrf);
    t.clock.advance(SESSION_TTL_MS - 1);
    expect((await connect("ListAccounts", {}, { cookie: s.cookie, "x-csrf-token": s.csrf })).statusCode).toBe(200);
    t.clock.advance(1);
    expect((await connect("ListAccounts", {}, { cookie: s.cookie, "x-csrf-token": s.csrf })).statusCode).toBe(401);
    expect((await t.app.inject({ method: "GET", url: "/console/session", headers: { cookie: s.cookie } })).statusCode).toBe(401);
  });

  it("signs out only with the CSRF token; the session is then gone", async () => {
    const s = await session();
    const forged = await t.app.inject({ method: "DELETE", url: "/console/session", headers: { cookie: s.cookie } });
    expect(forged.statusCode).toBe(401);
    expect(forged.json().ResponseStatus.Message).toBe(CSRF_REFUSAL);
    const out = await t.app.inject({ method: "DELETE", url: "/console/session", headers: { cookie: s.cookie, "x-csrf-token": s.csrf } });
    expect(out.statusCode).toBe(204);
    expect(out.headers["set-cookie"]).toBe("sb_console=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict");
    expect((await connect("ListAccounts", {}, { cookie: s.cookie, "x-csrf-token": s.csrf })).statusCode).toBe(401);
  });

  it("serves the page and its assets with the Content-Security-Policy, and 404 for anything else", async () => {
    const bare = await t.app.inject({ method: "GET", url: "/console" });
    expect(bare.statusCode).toBe(302);
    expect(bare.headers.location).toBe("console/");
    const page = await t.app.inject({ method: "GET", url: "/console/" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.headers["content-security-policy"]).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    );
    expect(page.headers["x-content-type-options"]).toBe("nosniff");
    const js = await t.app.inject({ method: "GET", url: "/console/assets/index-abc.js" });
    expect(js.statusCode).toBe(200);
    expect(js.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(js.headers["content-security-policy"]).toBe(CONSOLE_CSP);
    expect(js.body).toBe("console.log(1)");
    for (const url of ["/console/assets/nope.js", "/console/assets/..%2Findex.html", "/console/index.html"]) {
      expect((await t.app.inject({ method: "GET", url })).statusCode, url).toBe(404);
    }
  });
});
