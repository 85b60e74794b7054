/**
 * Credential guessing (issue 27, defect 8): failed authentications are limited per client address
 * (20 a minute) and per account named in HTTP Basic (10 a minute, from addresses not known good
 * for it). Past the limit: 429 RateLimited with Retry-After, the credential not even checked; a
 * right credential from another address, or from an address the account has used, still works.
 * The same limit on every wire (REST here; Connect and gRPC at the end).
 */
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, basic, createTenant, createTestApp, type Tenant, type TestApp, rpcRefusal } from "../support/harness.js";

// A whole minute: the first window ends 60 s later.
const T0 = new Date("2026-11-22T12:00:00Z");
const WRONG_OPERATOR = {
  ResponseStatus: { ErrorCode: "Unauthorized", Message: "Operator calls need `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`.", Errors: [] },
};
const WRONG_ACCOUNT = { ResponseStatus: { ErrorCode: "Unauthorized", Message: "The AccountSid or token is wrong.", Errors: [] } };
const fromAddress = (seconds: number) => ({
  ResponseStatus: { ErrorCode: "RateLimited", Message: `Too many failed authentications from your address. Retry after ${seconds} seconds.`, Errors: [] },
});
const forAccount = (sid: string, seconds: number) => ({
  ResponseStatus: { ErrorCode: "RateLimited", Message: `Too many failed authentications for account ${sid}. Retry after ${seconds} seconds.`, Errors: [] },
});

describe(`failed authentications are limited per address and per account (${dbKind()})`, () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ now: T0 });
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  const operator = (remoteAddress: string, token: string) =>
    t.app.inject({ method: "GET", url: "/admin/v1/Accounts", remoteAddress, headers: { authorization: `Bearer ${token}` } });
  const addresses = (remoteAddress: string, tenant: Tenant, token: string) =>
    t.app.inject({
      method: "GET",
      url: `/v2/Accounts/${tenant.accountSid}/Addresses`,
      remoteAddress,
      headers: { authorization: basic(tenant.accountSid, token) },
    });

  it("20 wrong operator tokens from one address are 401; the 21st attempt is 429 unchecked; another address still gets in; the next window checks again", async () => {
    t.clock.set(T0);
    for (let i = 0; i < 20; i++) {
      const res = await operator("203.0.113.1", `wrong-token-${i}`);
      expect(res.statusCode, `attempt ${i + 1}`).toBe(401);
      expect(res.json()).toEqual(WRONG_OPERATOR);
    }
    t.clock.advance(15_000);
    // Even the right token: the credential is not checked.
    const blocked = await operator("203.0.113.1", ADMIN_TOKEN);
    expect(blocked.statusCode).toBe(429);
    expect(blocked.headers["retry-after"]).toBe("45");
    expect(blocked.json()).toEqual(fromAddress(45));
    expect((await operator("203.0.113.1", "another-guess")).statusCode).toBe(429);

    expect((await operator("203.0.113.2", ADMIN_TOKEN)).statusCode).toBe(200);

    t.clock.set(T0.getTime() + 60_000);
    expect((await operator("203.0.113.1", ADMIN_TOKEN)).statusCode).toBe(200);
    expect((await operator("203.0.113.1", "wrong-again")).statusCode).toBe(401);
  });

  it("a right credential does not count: 19 failures, successes, then the 20th failure is still 401 and only the 21st attempt 429", async () => {
    t.clock.set(T0.getTime() + 120_000);
    for (let i = 0; i < 19; i++) expect((await operator("203.0.113.3", `nope-${i}`)).statusCode).toBe(401);
    for (let i = 0; i < 5; i++) expect((await operator("203.0.113.3", ADMIN_TOKEN)).statusCode).toBe(200);
    expect((await operator("203.0.113.3", "nope-last")).statusCode).toBe(401);
    const res = await operator("203.0.113.3", ADMIN_TOKEN);
    expect(res.statusCode).toBe(429);
    expect(res.headers["retry-after"]).toBe("60");
  });

  it("a request without credentials is 401 and not counted as a guess", async () => {
    t.clock.set(T0.getTime() + 180_000);
    for (let i = 0; i < 30; i++) {
      const res = await t.app.inject({ method: "GET", url: "/admin/v1/Accounts", remoteAddress: "203.0.113.4" });
      expect(res.statusCode).toBe(401);
    }
    expect((await operator("203.0.113.4", ADMIN_TOKEN)).statusCode).toBe(200);
  });

  it("10 wrong tokens for one account from 10 addresses: the 11th attempt from a new address is 429; an address the account used before and other accounts still get in", async () => {
    t.clock.set(T0.getTime() + 240_000);
    const victim = await createTenant(t.app);
    const other = await createTenant(t.app);
    // The tenant's own client, before the attack.
    expect((await addresses("198.51.100.7", victim, victim.token)).statusCode).toBe(200);
    for (let i = 0; i < 10; i++) {
      const res = await addresses(`203.0.113.${100 + i}`, victim, `guess-${i}`);
      expect(res.statusCode, `attempt ${i + 1}`).toBe(401);
      expect(res.json()).toEqual(WRONG_ACCOUNT);
    }
    const blocked = await addresses("203.0.113.200", victim, victim.token);
    expect(blocked.statusCode).toBe(429);
    expect(blocked.headers["retry-after"]).toBe("60");
    expect(blocked.json()).toEqual(forAccount(victim.accountSid, 60));

    // The attacker cannot lock the tenant's known client out, nor anyone else.
    expect((await addresses("198.51.100.7", victim, victim.token)).statusCode).toBe(200);
    expect((await addresses("198.51.100.7", victim, "typo")).statusCode).toBe(401);
    expect((await addresses("203.0.113.200", other, other.token)).statusCode).toBe(200);

    t.clock.advance(60_000);
    expect((await addresses("203.0.113.201", victim, victim.token)).statusCode).toBe(200);
  });

  it("wrong Basic tokens count per address too, whatever account they name", async () => {
    t.clock.set(T0.getTime() + 360_000);
    const tenants = await Promise.all([createTenant(t.app), createTenant(t.app), createTenant(t.app)]);
    for (let i = 0; i < 20; i++) expect((await addresses("203.0.113.50", tenants[i % 3], `guess-${i}`)).statusCode).toBe(401);
    const res = await addresses("203.0.113.50", tenants[0], tenants[0].token);
    expect(res.statusCode).toBe(429);
    expect(res.json()).toEqual(fromAddress(60));
  });
});

describe(`the limit on failed authentications holds over Connect and gRPC (${dbKind()})`, () => {
  let t: TestApp;
  let baseUrl = "";
  let sessions: Http2SessionManager;

  beforeAll(async () => {
    t = await createTestApp({ now: T0 });
    baseUrl = await t.app.listen({ port: 0, host: "127.0.0.1" });
    sessions = new Http2SessionManager(baseUrl);
  }, 120_000);
  afterAll(async () => {
    sessions?.abort();
    await t?.close();
  });

  for (const [name, minute] of [
    ["connect", 0],
    ["grpc", 1],
  ] as const) {
    it(`${name}: 20 wrong operator tokens are Unauthenticated, the 21st attempt ResourceExhausted with ErrorInfo RateLimited and retry-after`, async () => {
      t.clock.set(T0.getTime() + minute * 60_000);
      const transport =
        name === "connect" ? createConnectTransport({ baseUrl, httpVersion: "1.1" }) : createGrpcTransport({ baseUrl, sessionManager: sessions });
      const client = createClient(AdminService, transport);
      const as = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
      for (let i = 0; i < 20; i++) {
        const err = await rpcRefusal(() => client.listAccounts({}, as(`wrong-${i}`)));
        expect(err.code, `attempt ${i + 1}`).toBe(Code.Unauthenticated);
      }
      t.clock.advance(30_000);
      const err = await rpcRefusal(() => client.listAccounts({}, as(ADMIN_TOKEN)));
      expect(err.code).toBe(Code.ResourceExhausted);
      expect(err.rawMessage).toBe("Too many failed authentications from your address. Retry after 30 seconds.");
      expect(err.findDetails(ErrorInfoSchema).map((d) => [d.reason, d.domain])).toEqual([["RateLimited", "switchboard"]]);
      expect(err.metadata.get("retry-after")).toBe("30");
    });
  }
});
