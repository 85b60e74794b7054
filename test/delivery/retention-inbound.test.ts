/**
 * Retention covers the inbound texts no message owns (issue 41, defect 11): an SMS kept in
 * `unmatched_inbound` (to an account's own number, or a reply after its lease ended) and the parts
 * of an unfinished inbound SMS (`inbound_parts`) follow the account's RetentionDays and
 * RedactAfterDays; those of no account follow MESSAGE_RETENTION_DAYS. ManualClock, both databases.
 */
import { afterAll, describe, expect, it } from "vitest";
import { newSid } from "../../src/common/sid.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { addPoolNumbers, admin, createTenant, createTestApp, sendOk, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const DAY = 86_400_000;

async function rig(defaultDays: number | null): Promise<TestApp> {
  return createTestApp({ now: T0, engine: { retention: { defaultDays, batch: 2, pauseMs: 0 } } });
}

async function rows(t: TestApp, table: "unmatched_inbound" | "inbound_parts", recipient: string): Promise<{ sender: string; text: string }[]> {
  return t.db.orm.em.fork().execute(`select sender, text from ${table} where recipient = ? order by id`, [recipient]);
}

/** An SMS to `to` that matches no live lease, and the first of two parts of another (never completed). */
async function inboundTo(t: TestApp, from: string, to: string, text: string): Promise<void> {
  const r = await t.engine!.events.inbound({ from, to, text, at: t.clock.now() });
  expect(r.messageSid).toBe("");
  await t.engine!.events.inboundPart!({ from, to, text: `${text} (part 1 of 2)`, at: t.clock.now(), ref: 9, total: 2, part: 1 });
}

describe(`retention of unmatched inbound SMS and inbound parts (${dbKind()})`, () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it(
    "RetentionDays=1: an SMS to an owned number kept 3 days, and a late reply to an ended lease, are deleted; another account's stay",
    { timeout: 60_000 },
    async () => {
      t = await rig(null);
      const tenant = await createTenant(t.app);
      const other = await createTenant(t.app);
      const [pool] = await addPoolNumbers(t.app, 1, 70);
      // A lease of the tenant's from the pool number to +447700900611, ended.
      const sent = await sendOk(t.app, tenant, { To: "+447700900611" });
      await t.db.orm.em
        .fork()
        .execute(
          `insert into leases (sid, pool_number, recipient, account_sid, message_sid, slot, created_at, expires_at, released) values (?, ?, ?, ?, ?, 1, ?, ?, true)`,
          [newSid("LS"), pool, "+447700900611", tenant.accountSid, sent, T0, T0],
        );
      await inboundTo(t, "+447700900601", tenant.ownedNumber, "Owned number, no lease");
      await inboundTo(t, "+447700900611", pool!, "Late reply");
      await inboundTo(t, "+447700900602", other.ownedNumber, "To the other account");
      expect(await rows(t, "unmatched_inbound", tenant.ownedNumber)).toHaveLength(1);
      expect(await rows(t, "inbound_parts", pool!)).toHaveLength(1);

      await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { RetentionDays: 1 });
      t.clock.advance(3 * DAY);
      await t.engine!.retention.pass();

      expect(await rows(t, "unmatched_inbound", tenant.ownedNumber)).toEqual([]);
      expect(await rows(t, "inbound_parts", tenant.ownedNumber)).toEqual([]);
      expect(await rows(t, "unmatched_inbound", pool!)).toEqual([]);
      expect(await rows(t, "inbound_parts", pool!)).toEqual([]);
      // The other account sets nothing, and the deployment no default: its texts stay.
      expect(await rows(t, "unmatched_inbound", other.ownedNumber)).toEqual([{ sender: "+447700900602", text: "To the other account" }]);
      expect(await rows(t, "inbound_parts", other.ownedNumber)).toHaveLength(1);
    },
  );

  it("RedactAfterDays=1: the unmatched SMS's text is emptied and the unfinished parts deleted; younger ones stay", { timeout: 60_000 }, async () => {
    const tenant: Tenant = await createTenant(t.app);
    await inboundTo(t, "+447700900621", tenant.ownedNumber, "Old text");
    t.clock.advance(2 * DAY);
    await inboundTo(t, "+447700900622", tenant.ownedNumber, "New text");
    await admin(t.app, `/admin/v1/Accounts/${tenant.accountSid}`, { RedactAfterDays: 1 });
    await t.engine!.retention.pass();
    expect(await rows(t, "unmatched_inbound", tenant.ownedNumber)).toEqual([
      { sender: "+447700900621", text: "" },
      { sender: "+447700900622", text: "New text" },
    ]);
    expect(await rows(t, "inbound_parts", tenant.ownedNumber)).toEqual([{ sender: "+447700900622", text: "New text (part 1 of 2)" }]);
  });
});

describe(`MESSAGE_RETENTION_DAYS and inbound texts (${dbKind()})`, () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it("deletes those of no account after the default; an account's own RetentionDays wins for its numbers", { timeout: 60_000 }, async () => {
    t = await rig(2);
    const longer = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${longer.accountSid}`, { RetentionDays: 30 });
    const plain = await createTenant(t.app);
    const nobodys = "+447700900699";
    await inboundTo(t, "+447700900631", nobodys, "To no account's number");
    await inboundTo(t, "+447700900632", longer.ownedNumber, "Kept 30 days");
    await inboundTo(t, "+447700900633", plain.ownedNumber, "Default 2 days");
    t.clock.advance(DAY);
    await t.engine!.retention.pass();
    expect(await rows(t, "unmatched_inbound", nobodys)).toHaveLength(1);
    t.clock.advance(2 * DAY);
    await t.engine!.retention.pass();
    expect(await rows(t, "unmatched_inbound", nobodys)).toEqual([]);
    expect(await rows(t, "inbound_parts", nobodys)).toEqual([]);
    expect(await rows(t, "unmatched_inbound", plain.ownedNumber)).toEqual([]);
    expect(await rows(t, "inbound_parts", plain.ownedNumber)).toEqual([]);
    expect(await rows(t, "unmatched_inbound", longer.ownedNumber)).toEqual([{ sender: "+447700900632", text: "Kept 30 days" }]);
    expect(await rows(t, "inbound_parts", longer.ownedNumber)).toHaveLength(1);
  });
});

describe(`the tables holding message text (${dbKind()})`, () => {
  let db: TestOrm;
  afterAll(() => db?.close());

  it("are the ones retention covers (docs/configuration.md#retention): a new one must be added there and to the purge", { timeout: 90_000 }, async () => {
    db = await createTestOrm();
    const cols = await db.orm.em.fork().execute<{ t: string }[]>(
      `select table_name || '.' || column_name as t from information_schema.columns
          where table_schema = current_schema() and column_name in ('text', 'body', 'payload', 'response', 'message_text', 'content') order by 1`,
    );
    expect(cols.map((c) => c.t)).toEqual([
      "emails.body",
      "idempotency_keys.response",
      "inbound_parts.text",
      "messages.text",
      // Not the purge's: deleted when its message is stored, or by the delivery engine's sweep after 24 h (service-send-sweep.ts).
      "service_send_outbox.payload",
      "unmatched_inbound.text",
      "webhook_deliveries.payload",
    ]);
  });
});
