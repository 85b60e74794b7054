/**
 * MessagesPerSecond and ValidityPeriod in the dispatcher (docs/limits.md), on the injectable clock
 * with the dispatcher ticked by hand: an account capped at 20 segments per second that queues 400
 * has exactly 20 handed to the carrier per second of the clock, none refused, while another
 * account's messages go out in the first round; a message still queued after its ValidityPeriod
 * ends Failed with QueueTimeout, not sent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Message } from "../../src/messaging/message.entity.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

let t: TestApp;
let seq = 0;
const recipient = () => `+447911${String(++seq).padStart(6, "0")}`;

async function sendBatch(tenant: Tenant, n: number, extra: object = {}): Promise<string[]> {
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/BatchMessages`,
    headers: { authorization: tenant.auth },
    payload: { Messages: Array.from({ length: n }, () => ({ From: "Acme", To: recipient(), Text: "hi", ...extra })) },
  });
  expect(res.statusCode, res.body).toBe(200);
  const sids = res.json().Messages.map((m: { MessageSid?: string }) => m.MessageSid);
  expect(sids.every((s: unknown) => typeof s === "string")).toBe(true);
  return sids;
}

async function setLimits(tenant: Tenant, body: object): Promise<void> {
  const res = await t.app.inject({
    method: "POST",
    url: `/admin/v1/Accounts/${tenant.accountSid}`,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(200);
}

/** Messages of the account the carrier has taken. */
function submitted(tenant: Tenant): Promise<number> {
  return t.db.orm.em.fork().count(Message, { accountSid: tenant.accountSid, submittedAt: { $ne: null } });
}

/** GET /metrics as name{labels} → value. */
async function scrape(): Promise<Map<string, number>> {
  const res = await t.app.inject({ method: "GET", url: "/metrics" });
  expect(res.statusCode).toBe(200);
  const out = new Map<string, number>();
  for (const line of res.body.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** Ticks the dispatcher until a round claims nothing, then writes the submissions it holds for their reports. */
async function drain(): Promise<void> {
  while ((await t.engine!.dispatcher.tick()) > 0);
  await t.engine!.dispatcher.held.flush();
}

beforeAll(async () => {
  t = await createTestApp({ engine: true, config: { sendRateLimit: 0 } });
});

afterAll(async () => {
  await t?.close();
});

describe(`MessagesPerSecond and ValidityPeriod (${dbKind()})`, () => {
  it("400 queued at 20 per second: 20 handed to the carrier per second over 20 s, none refused; another account's go out at once", async () => {
    const capped = await createTenant(t.app);
    const other = await createTenant(t.app);
    await setLimits(capped, { MessagesPerSecond: 20 });
    for (let i = 0; i < 4; i++) await sendBatch(capped, 100);
    await sendBatch(other, 5);
    await drain();
    expect([await submitted(capped), await submitted(other)]).toEqual([20, 5]);
    // Per account: 380 given back to the queue, and waiting there.
    const m = await scrape();
    expect([
      m.get(`switchboard_account_throttled{account="${capped.accountSid}"}`),
      m.get(`switchboard_account_queued{account="${capped.accountSid}"}`),
    ]).toEqual([380, 380]);
    expect(m.get(`switchboard_account_throttled{account="${other.accountSid}"}`)).toBeUndefined();
    for (let second = 1; second < 20; second++) {
      t.clock.advance(1000);
      await drain();
      expect(await submitted(capped)).toBe(20 * (second + 1));
    }
    t.clock.advance(60_000);
    await drain();
    expect(await submitted(capped)).toBe(400);
    expect(await t.db.orm.em.fork().count(Message, { accountSid: capped.accountSid, status: "Failed" })).toBe(0);
  });

  it("a message still queued after its ValidityPeriod ends Failed with QueueTimeout, not sent", async () => {
    const a = await createTenant(t.app);
    await setLimits(a, { MessagesPerSecond: 1 });
    const sids = await sendBatch(a, 3, { ValidityPeriod: 2 });
    await drain();
    expect(await submitted(a)).toBe(1);
    t.clock.advance(3000);
    await drain();
    expect(await submitted(a)).toBe(1);
    expect((await scrape()).get(`switchboard_account_queue_timeouts{account="${a.accountSid}"}`)).toBe(2);
    // Which of the three went first is the claim's choice (they are due at the same moment).
    const records = [];
    for (const sid of sids) {
      const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: a.auth } });
      expect(res.statusCode, res.body).toBe(200);
      const m = res.json();
      records.push([m.Status, m.ErrorCode, m.Submitted > 0]);
    }
    expect(records.filter(([, , submitted]) => submitted)).toHaveLength(1);
    expect(records.filter(([, , submitted]) => !submitted)).toEqual([
      ["Failed", "QueueTimeout", false],
      ["Failed", "QueueTimeout", false],
    ]);
  });
});
