/**
 * Issue 41, defect 4 (docs/api.md#replies-to-leased-senders, docs/limits.md): the forward of a
 * reply by SMS is a send of the lease's account, so the send pipeline's admit step applies to it:
 * the account's request rate and daily quota, counted in the same shared buckets as its API sends.
 * A forward refused there is not sent; it is kept as a Failed message with RateLimited or
 * QuotaExceeded. Replies come in through the simulator's inbound injection; the workers are driven
 * by hand.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, addPoolNumbers, admin, createTenant, createTestApp, type TestApp, simulatorInbound, drainDeliveries } from "../support/harness.js";

let t: TestApp;
let pool: string;

beforeAll(async () => {
  t = await createTestApp({ engine: true });
  [pool] = await addPoolNumbers(t.app, 1);
});

afterAll(async () => {
  await t?.close();
});

/** Submits every due message and waits for the simulator's reports (it delivers to the handset then). */
async function drain(): Promise<void> {
  await drainDeliveries(t);
}

/** What the simulated network delivered to the handset, texts in order. */
async function delivered(number: string): Promise<string[]> {
  const res = await t.app.inject({
    method: "GET",
    url: `/admin/v1/Simulator/Handsets/${number.slice(1)}/Messages`,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  return (res.json().Messages as { Text: string }[]).map((m) => m.Text);
}

describe(`a forwarded reply is a send of the account: its rate and quota apply (${dbKind()})`, () => {
  it("quota 3 segments, rate 1/s burst 1: 30 replies at once forward one; the day's segments stop at the quota", async () => {
    const tenant = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { SendRatePerSecond: 1, SendRateBurst: 1, DailySegmentQuota: 3 });
    const handset = "+61412000041";
    const staff = "+61412000042";
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { To: handset, Text: "Your table is booked", ForwardToSms: staff },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().From).toBe(pool);
    await drain();

    // The send took the one token of the burst: a second later, 30 replies at the same instant.
    t.clock.advance(1000);
    for (let i = 0; i < 30; i++) await simulatorInbound(t.app, handset, pool, `reply ${i}`);
    await drain();
    const forwards = async () =>
      t.db.orm.em
        .fork()
        .execute<{ status: string; error_code: string }[]>(
          "select status, error_code from messages where account_sid = ? and direction = 'Transmit' and recipient = ? order by created_at, text",
          [tenant.accountSid, staff],
        );
    const first = await forwards();
    expect(first).toHaveLength(30);
    expect(first.filter((f) => f.error_code === "").length).toBe(1);
    expect(first.filter((f) => f.status === "Failed" && f.error_code === "RateLimited").length).toBe(29);
    expect(await delivered(staff)).toHaveLength(1);

    // A second later the rate allows one more: the quota's third segment. Then the quota refuses.
    t.clock.advance(1000);
    await simulatorInbound(t.app, handset, pool, "one more");
    await drain();
    t.clock.advance(1000);
    await simulatorInbound(t.app, handset, pool, "and another");
    await drain();
    expect(await delivered(staff)).toHaveLength(2);
    const all = await forwards();
    expect(all.filter((f) => f.error_code === "").length).toBe(2);
    expect(all.filter((f) => f.error_code === "QuotaExceeded").length).toBe(1);
    const account = await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${tenant.accountSid}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(account.json().SegmentsToday).toBe(3);
    // Every reply itself is stored, forwarded or not.
    const [{ n }] = await t.db.orm.em
      .fork()
      .execute<{ n: number | string }[]>("select count(*) as n from messages where account_sid = ? and direction = 'Receive'", [tenant.accountSid]);
    expect(Number(n)).toBe(32);
  });
});
