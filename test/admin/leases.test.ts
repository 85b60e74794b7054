/**
 * The operator's lease list (GET /admin/v1/Leases, AdminService.ListLeases): live leases by
 * default, newest first, with the property of the message that took each; the Number and
 * AccountSid filters, IncludeExpired, paging, and a 400 naming each bad field. Exact JSON, on the
 * manual clock.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, addPoolNumbers, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const DAY = 86_400;
const secs = (d: Date) => Math.floor(d.getTime() / 1000);
const R1 = "+14155550101";
const R2 = "+14155550102";

let t: TestApp;
let a: Tenant;
let b: Tenant;
let pool: string[];
/** The leases in the order they were taken, as the API should show them. */
const taken: Record<string, unknown>[] = [];

async function get(url: string): Promise<{ status: number; body: any }> {
  const res = await t.app.inject({ method: "GET", url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return { status: res.statusCode, body: res.json() };
}

/** A send with no From (a leased sender), and the lease it took as ListLeases shows it (Live as of now). */
async function leasedSend(who: Tenant, to: string): Promise<Record<string, unknown>> {
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Properties/${who.propertySid}/Messages`,
    headers: { authorization: who.auth },
    payload: { To: to, Text: "Reply YES" },
  });
  expect(res.statusCode, res.body).toBe(200);
  const sent = res.json();
  const [row] = await t.db.orm.em.fork().execute<{ sid: string }[]>("select sid from leases where message_sid = ?", [sent.MessageSid]);
  const created = secs(t.clock.now());
  return {
    LeaseSid: row.sid,
    Number: sent.From,
    AccountSid: who.accountSid,
    PropertySid: who.propertySid,
    Recipient: to,
    MessageSid: sent.MessageSid,
    Created: created,
    Expires: created + 30 * DAY,
    Live: true,
  };
}

const fieldError = (FieldName: string, Message: string) => ({ FieldName, ErrorCode: "InvalidParameter", Message });

describe(`GET /admin/v1/Leases (ListLeases, ${dbKind()})`, () => {
  beforeAll(async () => {
    t = await createTestApp({ now: T0, config: { sendRateLimit: 0 } });
    a = await createTenant(t.app);
    b = await createTenant(t.app);
    pool = await addPoolNumbers(t.app, 3, 60);
    // A's lease to R1, which has ended by the time the others are taken.
    taken.push(await leasedSend(a, R1));
    t.clock.set(new Date(T0.getTime() + 31 * DAY * 1000));
    taken.push(await leasedSend(a, R2));
    t.clock.advance(1000);
    taken.push(await leasedSend(b, R1));
    t.clock.advance(1000);
    taken.push(await leasedSend(a, R1));
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  it("lists the live leases, newest first, with the recipient each is leased for", async () => {
    const [ended, aR2, bR1, aR1] = taken;
    expect([ended.Number, aR2.Number, bR1.Number, aR1.Number]).toStrictEqual([pool[0], pool[0], pool[0], pool[1]]);
    expect(await get("/admin/v1/Leases")).toStrictEqual({ status: 200, body: { Leases: [aR1, bR1, aR2], TotalCount: 3 } });
  });

  it("filters by the leased number and by account, both at once", async () => {
    const [, aR2, bR1, aR1] = taken;
    expect((await get(`/admin/v1/Leases?Number=${encodeURIComponent(pool[0])}`)).body).toStrictEqual({ Leases: [bR1, aR2], TotalCount: 2 });
    expect((await get(`/admin/v1/Leases?AccountSid=${a.accountSid}`)).body).toStrictEqual({ Leases: [aR1, aR2], TotalCount: 2 });
    expect((await get(`/admin/v1/Leases?Number=${encodeURIComponent(pool[1])}&AccountSid=${b.accountSid}`)).body).toStrictEqual({
      Leases: [],
      TotalCount: 0,
    });
    expect((await get(`/admin/v1/Leases?Number=${encodeURIComponent(pool[2])}`)).body).toStrictEqual({ Leases: [], TotalCount: 0 });
  });

  it("includes the ended leases with IncludeExpired", async () => {
    const [ended, aR2, bR1, aR1] = taken;
    expect((await get(`/admin/v1/Leases?AccountSid=${a.accountSid}&IncludeExpired=true`)).body).toStrictEqual({
      Leases: [aR1, aR2, { ...ended, Live: false }],
      TotalCount: 3,
    });
    expect((await get("/admin/v1/Leases?IncludeExpired=true")).body.TotalCount).toBe(4);
    expect((await get("/admin/v1/Leases?IncludeExpired=false")).body).toStrictEqual({ Leases: [aR1, bR1, aR2], TotalCount: 3 });
  });

  it("pages with Results_Count and Results_Skip", async () => {
    const [, aR2, bR1, aR1] = taken;
    expect((await get("/admin/v1/Leases?Results_Count=2")).body).toStrictEqual({ Leases: [aR1, bR1], TotalCount: 3 });
    expect((await get("/admin/v1/Leases?Results_Count=2&Results_Skip=2")).body).toStrictEqual({ Leases: [aR2], TotalCount: 3 });
    expect((await get("/admin/v1/Leases?Results_Skip=5")).body).toStrictEqual({ Leases: [], TotalCount: 3 });
  });

  it("answers 400 naming each bad field", async () => {
    const number = fieldError("Number", 'Number "12025550060" is not an E164 number such as +14155550123.');
    expect(await get("/admin/v1/Leases?Number=12025550060")).toStrictEqual({
      status: 400,
      body: { ResponseStatus: { ErrorCode: "InvalidParameter", Message: number.Message, Errors: [number] } },
    });
    const account = fieldError("AccountSid", 'AccountSid "PR123" is not an AccountSid.');
    const count = fieldError("Results_Count", "Results_Count must be between 1 and 1000.");
    const res = await get("/admin/v1/Leases?AccountSid=PR123&Results_Count=0");
    expect(res.status).toBe(400);
    expect(res.body.ResponseStatus.Errors).toStrictEqual([account, count]);
  });

  it("is refused to an account's credentials", async () => {
    const res = await t.app.inject({ method: "GET", url: "/admin/v1/Leases", headers: { authorization: a.auth } });
    expect(res.statusCode).toBe(401);
  });
});
