/**
 * Revoked credentials (issue 12, item 6): two API processes share one database, each with its own
 * 2-second cache of verified tokens. The operator rotates an account's token through one; within
 * the other's cache window the old token may still read there, but no write goes through with it:
 * cancel, create and delete an address, configure a number, send, and a batch (one 401).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, basic, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");

describe(`a rotated token writes nothing through a second API process (${dbKind()})`, () => {
  let one: TestApp;
  let two: TestApp;
  let urlOne = "";
  let urlTwo = "";
  let tenant: Tenant;

  beforeAll(async () => {
    one = await createTestApp({ now: T0 });
    // The second process: its own app, services and account cache, on the same database.
    two = await createTestApp({ now: T0, db: one.db });
    urlOne = await one.app.listen({ port: 0, host: "127.0.0.1" });
    urlTwo = await two.app.listen({ port: 0, host: "127.0.0.1" });
    tenant = await createTenant(one.app);
  }, 120_000);
  afterAll(async () => {
    await two?.close();
    await one?.close();
  });

  async function call(base: string, method: string, path: string, auth: string, body?: object) {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: auth, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }
  const listAddresses = (base: string, auth: string) => call(base, "GET", `/v2/Accounts/${tenant.accountSid}/Addresses`, auth);

  /**
   * Process two caches the current token (a read), process one rotates it, and `write` runs on
   * process two with the old token while two still answers reads with it from its cache (checked
   * just before). Under heavy load the window may pass first: then the cycle is tried again.
   */
  async function withinCacheWindow(write: (oldAuth: string) => Promise<{ status: number; body: any }>) {
    for (let attempt = 1; attempt <= 10; attempt++) {
      const oldAuth = tenant.auth;
      expect((await listAddresses(urlTwo, oldAuth)).status).toBe(200);
      const rotated = await call(urlOne, "POST", `/admin/v1/Accounts/${tenant.accountSid}/Token`, `Bearer ${ADMIN_TOKEN}`, {});
      expect(rotated.status).toBe(200);
      tenant.token = rotated.body.Token;
      tenant.auth = basic(tenant.accountSid, tenant.token);
      expect((await listAddresses(urlOne, oldAuth)).status).toBe(401);
      if ((await listAddresses(urlTwo, oldAuth)).status !== 200) continue; // the window passed already
      return write(oldAuth);
    }
    throw new Error("could not act within process two's cache window in 10 tries");
  }

  const unauthorized = { ResponseStatus: expect.objectContaining({ ErrorCode: "Unauthorized" }) };
  const address = { FriendlyName: "HQ", Line1: "1 Main St", City: "London", CountryCode: "GB", PostalCode: "SW1A 1AA" };

  it("create an address: 401, and no address is stored", async () => {
    const before = (await listAddresses(urlOne, tenant.auth)).body.TotalCount;
    const res = await withinCacheWindow((old) => call(urlTwo, "POST", `/v2/Accounts/${tenant.accountSid}/Addresses`, old, address));
    expect(res).toEqual({ status: 401, body: unauthorized });
    expect((await listAddresses(urlOne, tenant.auth)).body.TotalCount).toBe(before);
    // The new token writes through either process.
    expect((await call(urlTwo, "POST", `/v2/Accounts/${tenant.accountSid}/Addresses`, tenant.auth, address)).status).toBe(200);
  });

  it("delete an address: 401, and the address is still there", async () => {
    const created = await call(urlOne, "POST", `/v2/Accounts/${tenant.accountSid}/Addresses`, tenant.auth, address);
    expect(created.status).toBe(200);
    const sid = created.body.AddressSid;
    const res = await withinCacheWindow((old) => call(urlTwo, "DELETE", `/v2/Addresses/${sid}`, old));
    expect(res).toEqual({ status: 401, body: unauthorized });
    expect((await call(urlOne, "GET", `/v2/Addresses/${sid}`, tenant.auth)).status).toBe(200);
  });

  it("configure a number: 401, and the number is unchanged", async () => {
    const path = `/v2/Numbers/${tenant.ownedNumber.slice(1)}`;
    const res = await withinCacheWindow((old) => call(urlTwo, "POST", path, old, { Friendly: "taken over" }));
    expect(res).toEqual({ status: 401, body: unauthorized });
    const numbers = await call(urlOne, "GET", `/v2/Accounts/${tenant.accountSid}/Numbers`, tenant.auth);
    expect(numbers.body.Numbers.find((n: any) => n.Number === tenant.ownedNumber).Friendly).not.toBe("taken over");
  });

  it("cancel a scheduled message: 401, and it stays Scheduled", async () => {
    const sent = await call(urlOne, "POST", `/v2/Properties/${tenant.propertySid}/Messages`, tenant.auth, {
      From: tenant.ownedNumber,
      To: "+447700900777",
      Text: "later",
      Schedule: Math.floor(T0.getTime() / 1000) + 3600,
    });
    expect(sent.status).toBe(200);
    const sid = sent.body.MessageSid;
    const res = await withinCacheWindow((old) => call(urlTwo, "DELETE", `/v2/Messages/${sid}`, old));
    expect(res).toEqual({ status: 401, body: unauthorized });
    expect((await call(urlOne, "GET", `/v2/Messages/${sid}`, tenant.auth)).body.Status).toBe("Scheduled");
  });

  it("send, and a batch: 401 each, the batch as a whole, and nothing is stored", async () => {
    const body = { From: tenant.ownedNumber, To: "+447700900778", Text: "spoofed" };
    const single = await withinCacheWindow((old) => call(urlTwo, "POST", `/v2/Properties/${tenant.propertySid}/Messages`, old, body));
    expect(single).toEqual({ status: 401, body: unauthorized });
    const batch = await withinCacheWindow((old) => call(urlTwo, "POST", `/v2/Properties/${tenant.propertySid}/BatchMessages`, old, { Messages: [body, body] }));
    expect(batch).toEqual({ status: 401, body: unauthorized });
    const listed = await call(urlOne, "GET", `/v2/Properties/${tenant.propertySid}/Messages`, tenant.auth);
    expect(listed.body.Messages.filter((m: any) => m.Text === "spoofed")).toEqual([]);
  });
});
