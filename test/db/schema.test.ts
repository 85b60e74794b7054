import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { CheckConstraintViolationException, DriverException, UniqueConstraintViolationException, type SqlEntityManager } from "@mikro-orm/sql";
import { dbKind, useTestOrm } from "../support/db.js";
import { createOrm, isDatabaseReady, migrateUp, migrations } from "../../src/db/orm.js";
import { entities } from "../../src/entities.js";
import { constraintViolation } from "../../src/common/pg-errors.js";
import { newSid } from "../../src/common/sid.js";
import { Account } from "../../src/accounts/account.entity.js";
import { Property } from "../../src/accounts/property.entity.js";
import { Address } from "../../src/addresses/address.entity.js";
import { PhoneNumber } from "../../src/numbers/phone-number.entity.js";
import { Message } from "../../src/messaging/message.entity.js";
import { Lease } from "../../src/leases/lease.entity.js";
import { IdempotencyKey } from "../../src/messaging/idempotency-key.entity.js";
import { CarrierSegment } from "../../src/delivery/carrier-segment.entity.js";
import { InboundPart } from "../../src/delivery/inbound-part.entity.js";
import { PendingReceipt } from "../../src/delivery/pending-receipt.entity.js";

const T0 = new Date("2026-01-01T00:00:00.123Z");

describe(`database schema (${dbKind()})`, () => {
  const db = useTestOrm();

  async function account(em: SqlEntityManager): Promise<Account> {
    const a = em.create(Account, { sid: newSid("AC"), name: "Acme", tokenHash: "a".repeat(64), webhookSecret: "whsec_x", createdAt: T0 });
    await em.flush();
    return a;
  }

  async function poolNumbers(em: SqlEntityManager, n: number): Promise<string[]> {
    const numbers: string[] = [];
    for (let i = 0; i < n; i++) {
      const number = `+1555${String(Math.floor(Math.random() * 1e7)).padStart(7, "0")}`;
      em.create(PhoneNumber, { sid: newSid("PN"), number, accountSid: null, addressSid: null, createdAt: T0 });
      numbers.push(number);
    }
    await em.flush();
    return numbers;
  }

  function insertLease(em: SqlEntityManager, l: { poolNumber: string; recipient: string; accountSid: string; slot: number; released?: boolean }) {
    return em.execute(
      `insert into leases (sid, pool_number, recipient, account_sid, message_sid, slot, created_at, expires_at, released)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [newSid("LS"), l.poolNumber, l.recipient, l.accountSid, newSid("MG"), l.slot, T0, new Date(T0.getTime() + 30 * 86_400_000), l.released ?? false],
    );
  }

  it("migrations create every table, and running them again changes nothing", async () => {
    const rows = await db.orm.em
      .fork()
      .execute<{ table_name: string }[]>("select table_name from information_schema.tables where table_schema = 'public' order by table_name");
    expect(rows.map((r) => r.table_name)).toEqual(
      expect.arrayContaining([
        "accounts",
        "addresses",
        "carrier_pending_receipts",
        "carrier_segments",
        "idempotency_keys",
        "inbound_parts",
        "leases",
        "messages",
        "mikro_orm_migrations",
        "numbers",
        "properties",
        "service_send_outbox",
      ]),
    );
    expect(await migrateUp(db.orm)).toEqual([]);
    expect(await isDatabaseReady(db.orm)).toBe(true);
  });

  it("indexes no message column the delivery updates change, except the queue flag that flips once when a message leaves the queue and the submission time set by that same update", async () => {
    // What lets PostgreSQL make the claim and the final-state updates heap-only (docs/benchmarks.md).
    const em = db.orm.em.fork();
    const indexes = await em.execute<{ indexname: string; indexdef: string }[]>(
      "select indexname, indexdef from pg_indexes where schemaname = 'public' and tablename = 'messages' order by indexname",
    );
    expect(indexes.map((i) => `${i.indexname}: ${i.indexdef.replace(/^.* USING btree /, "")}`)).toEqual([
      "messages_account_queue_idx: (account_sid, send_at) WHERE queued",
      // A leased send's lease (issue 41): written by the insert only, so no delivery update touches it.
      "messages_lease_sid_idx: (lease_sid) WHERE (lease_sid IS NOT NULL)",
      "messages_pkey: (sid)",
      "messages_property_sid_created_at_idx: (property_sid, created_at DESC)",
      "messages_queue_idx: (send_at) WHERE queued",
      // The receipt-timeout sweep's walk (issue 27): submitted_at is written by the submission
      // update, which already writes index entries (queued flips); claims and final states never change it.
      "messages_submitted_at_idx: (submitted_at, sid) WHERE (submitted_at IS NOT NULL)",
    ]);
    const acc = await account(em);
    const property = newSid("PR");
    await em.execute("insert into properties (sid, account_sid, name, sms_enabled, created_at) values (?, ?, 'p', true, now())", [property, acc.sid]);
    const statuses = ["Scheduled", "Processing", "Submitted", "Delivered", "Failed", "Canceled"];
    for (const status of statuses) {
      await em.execute(
        `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at)
         values (?, ?, ?, 'Transmit', ?, '+447700900001', '+447700900002', 't', 'GSM7', 1, now())`,
        [`MGQ${status}`, acc.sid, property, status],
      );
    }
    const rows = await em.execute<{ status: string; queued: boolean }[]>("select status, queued from messages where sid like 'MGQ%' order by sid");
    expect(Object.fromEntries(rows.map((r) => [r.status, r.queued]))).toEqual({
      Scheduled: true,
      Processing: true,
      Submitted: false,
      Delivered: false,
      Failed: false,
      Canceled: false,
    });
  });

  it("indexes the webhook outbox for the due-time walk, the round-robin claim per (account, host), and per message", async () => {
    const indexes = await db.orm.em
      .fork()
      .execute<{ indexname: string; indexdef: string }[]>(
        "select indexname, indexdef from pg_indexes where schemaname = 'public' and tablename = 'webhook_deliveries' order by indexname",
      );
    expect(indexes.map((i) => `${i.indexname}: ${i.indexdef.replace(/^.* USING btree /, "")}`)).toEqual([
      "webhook_deliveries_due_idx: (next_attempt_at) WHERE ((status)::text = 'Pending'::text)",
      "webhook_deliveries_message_idx: (message_sid)",
      "webhook_deliveries_pkey: (id)",
      "webhook_deliveries_target_idx: (account_sid, target_host, next_attempt_at) WHERE ((status)::text = 'Pending'::text)",
    ]);
  });

  it("stores every timestamp as timestamptz", async () => {
    const rows = await db.orm.em
      .fork()
      .execute<{ table_name: string; column_name: string; data_type: string }[]>(
        "select table_name, column_name, data_type from information_schema.columns where table_schema = 'public' and column_name like '%\\_at' and table_name <> 'mikro_orm_migrations'",
      );
    expect(rows.length).toBeGreaterThanOrEqual(12);
    for (const r of rows) expect(`${r.table_name}.${r.column_name}: ${r.data_type}`).toMatch(/timestamp with time zone$/);
  });

  it("caps an account's live leases per recipient at 5 and lends a pool number once per recipient; released leases do not count", async () => {
    const em = db.orm.em.fork();
    const acc = await account(em);
    const pool = await poolNumbers(em, 7);
    const recipient = "+447700900123";
    for (let slot = 1; slot <= 5; slot++) await insertLease(em, { poolNumber: pool[slot - 1], recipient, accountSid: acc.sid, slot });

    // A 6th live lease has no slot left: 6 breaks the CHECK, any of 1..5 the (account_sid, recipient, slot) index.
    await expect(insertLease(em, { poolNumber: pool[5], recipient, accountSid: acc.sid, slot: 6 })).rejects.toBeInstanceOf(CheckConstraintViolationException);
    const taken = insertLease(em, { poolNumber: pool[5], recipient, accountSid: acc.sid, slot: 3 });
    await expect(taken).rejects.toBeInstanceOf(UniqueConstraintViolationException);
    await expect(taken).rejects.toMatchObject({ code: "23505", constraint: "leases_live_account_recipient_slot_uniq" });
    // Another account has slots of its own for the recipient (issue 27), but not a pool number already lent to it.
    const other = await account(em);
    const lent = insertLease(em, { poolNumber: pool[0], recipient, accountSid: other.sid, slot: 1 });
    await expect(lent).rejects.toMatchObject({ code: "23505", constraint: "leases_live_pool_number_recipient_uniq" });
    await insertLease(em, { poolNumber: pool[5], recipient, accountSid: other.sid, slot: 3 });
    await em.execute("update leases set released = true where account_sid = ?", [other.sid]);

    // The same pool number twice to one recipient, even in a free slot, breaks (pool_number, recipient).
    await em.execute("update leases set released = true where recipient = ? and slot = 5", [recipient]);
    const dup = insertLease(em, { poolNumber: pool[0], recipient, accountSid: acc.sid, slot: 5 });
    await expect(dup).rejects.toBeInstanceOf(UniqueConstraintViolationException);
    await expect(dup).rejects.toMatchObject({ code: "23505", constraint: "leases_live_pool_number_recipient_uniq" });

    // Once released, slot 5 and its pool number are free again, and other recipients are unaffected.
    await insertLease(em, { poolNumber: pool[4], recipient, accountSid: acc.sid, slot: 5 });
    await insertLease(em, { poolNumber: pool[0], recipient: "+447700900999", accountSid: acc.sid, slot: 1 });
    const live = await em.execute<{ n: string | number }[]>("select count(*) as n from leases where recipient = ? and not released", [recipient]);
    expect(Number(live[0].n)).toBe(5);
  });

  it("rolls back raw SQL and entity changes together in em.transactional", async () => {
    const em = db.orm.em.fork();
    const acc = await account(em);
    const [number] = await poolNumbers(em, 1);
    await expect(
      em.transactional(async (tx) => {
        await insertLease(tx, { poolNumber: number, recipient: "+447700900555", accountSid: acc.sid, slot: 1 });
        tx.create(Property, { sid: newSid("PR"), accountSid: acc.sid, createdAt: T0 });
        await tx.flush();
        await insertLease(tx, { poolNumber: number, recipient: "+447700900555", accountSid: acc.sid, slot: 2 });
      }),
    ).rejects.toBeInstanceOf(UniqueConstraintViolationException);
    const check = db.orm.em.fork();
    expect(await check.count(Lease, { recipient: "+447700900555" })).toBe(0);
    expect(await check.count(Property, { accountSid: acc.sid })).toBe(0);
  });

  it("refuses to delete an address that a number uses", async () => {
    const em = db.orm.em.fork();
    const acc = await account(em);
    const address = em.create(Address, {
      sid: newSid("AD"),
      accountSid: acc.sid,
      line1: "1 High St",
      city: "London",
      countryCode: "GB",
      postalCode: "SW1A 1AA",
      status: "Active",
      createdAt: T0,
    });
    em.create(PhoneNumber, { sid: newSid("PN"), number: "+447700900001", accountSid: acc.sid, addressSid: address.sid, createdAt: T0 });
    await em.flush();

    // RESTRICT fails the DELETE itself, though the key is deferrable. The SQLSTATE differs by engine
    // (23503 on PostgreSQL 15, 23001 on PGlite), which constraintViolation() hides.
    const direct = await db.orm.em
      .fork()
      .nativeDelete(Address, { sid: address.sid })
      .catch((e: unknown) => e);
    expect(direct).toBeInstanceOf(DriverException);
    // The referenced end: what toConnectError answers with AddressInUse.
    const restricted = { kind: "foreign-key", constraint: "numbers_address_sid_fkey", side: "referenced", key: address.sid };
    expect(constraintViolation(direct)).toEqual(restricted);
    const viaUnitOfWork = db.orm.em.fork();
    viaUnitOfWork.remove(await viaUnitOfWork.findOneOrFail(Address, address.sid));
    expect(constraintViolation(await viaUnitOfWork.flush().catch((e: unknown) => e))).toEqual(restricted);
    expect(await db.orm.em.fork().count(Address, { sid: address.sid })).toBe(1);

    await db.orm.em.fork().nativeUpdate(PhoneNumber, { addressSid: address.sid }, { addressSid: null });
    expect(await db.orm.em.fork().nativeDelete(Address, { sid: address.sid })).toBe(1);
  });

  it("persists and reads back every entity through forked EntityManagers", async () => {
    const em = db.orm.em.fork();
    const acc = em.create(Account, { sid: newSid("AC"), tokenHash: "b".repeat(64), webhookSecret: "whsec_y", createdAt: T0 });
    const prop = em.create(Property, { sid: newSid("PR"), accountSid: acc.sid, name: "Shop", smsEnabled: false, createdAt: T0 });
    const addr = em.create(Address, {
      sid: newSid("AD"),
      accountSid: acc.sid,
      friendly: "HQ",
      line1: "1 Main St",
      city: "Springfield",
      countryCode: "US",
      status: "Pending",
      createdAt: T0,
    });
    const num = em.create(PhoneNumber, { sid: newSid("PN"), number: "+15550000001", accountSid: null, addressSid: null, createdAt: T0 });
    // Created before its message on purpose: scalar references give the unit of work no insert order.
    const key = em.create(IdempotencyKey, { accountSid: acc.sid, key: "retry-1", messageSid: newSid("MG"), createdAt: T0 });
    const msg = em.create(Message, {
      sid: key.messageSid,
      accountSid: acc.sid,
      propertySid: prop.sid,
      direction: "Transmit",
      status: "Scheduled",
      senderKind: "Leased",
      sender: num.number,
      recipient: "+447700900456",
      text: "Hello ☃",
      encoding: "UCS2",
      numSegments: 1,
      scheduledAt: new Date(T0.getTime() + 3_600_000),
      sendAt: new Date(T0.getTime() + 3_600_000),
      createdAt: T0,
    });
    const lease = em.create(Lease, {
      sid: newSid("LS"),
      poolNumber: num.number,
      recipient: "+447700900456",
      accountSid: acc.sid,
      messageSid: msg.sid,
      slot: 1,
      createdAt: T0,
      expiresAt: new Date(T0.getTime() + 30 * 86_400_000),
    });
    await em.flush();

    const read = db.orm.em.fork();
    const acc2 = await read.findOneOrFail(Account, acc.sid);
    expect(acc2).toMatchObject({ name: "", smsEnabled: true, tokenHash: "b".repeat(64), webhookSecret: "whsec_y" });
    expect(acc2.createdAt).toBeInstanceOf(Date);
    expect(acc2.createdAt.getTime()).toBe(T0.getTime());
    expect(await read.findOneOrFail(Property, prop.sid)).toMatchObject({ accountSid: acc.sid, name: "Shop", smsEnabled: false });
    expect(await read.findOneOrFail(Address, addr.sid)).toMatchObject({
      friendly: "HQ",
      reference: "",
      line2: "",
      region: "",
      postalCode: "",
      countryCode: "US",
      status: "Pending",
    });
    expect(await read.findOneOrFail(PhoneNumber, { number: "+15550000001" })).toMatchObject({ sid: num.sid, accountSid: null, friendly: "", addressSid: null });
    const msg2 = await read.findOneOrFail(Message, msg.sid);
    expect(msg2).toMatchObject({
      text: "Hello ☃",
      deliveryReceipt: true,
      drWebhookUri: "",
      webhookMethod: "",
      errorCode: "",
      attempts: 0,
      leaseSid: null,
      inReplyTo: null,
      submittedAt: null,
      carrierRef: null,
      carrierError: "",
    });
    expect(msg2.sendAt.getTime()).toBe(T0.getTime() + 3_600_000);
    const lease2 = await read.findOneOrFail(Lease, lease.sid);
    expect(lease2).toMatchObject({ slot: 1, released: false });
    expect(lease2.expiresAt.getTime()).toBe(T0.getTime() + 30 * 86_400_000);
    const key2 = await read.findOneOrFail(IdempotencyKey, { accountSid: acc.sid, key: "retry-1" });
    expect(key2.messageSid).toBe(msg.sid);

    // The SMPP carrier's tables: a segment with its id forms, a kept receipt, an inbound part.
    const seg = em.create(CarrierSegment, { messageSid: msg.sid, seq: 1, carrierId: "001A2B", idKey: "1a2b", idAlt: "6699", createdAt: T0 });
    const kept = em.create(PendingReceipt, {
      carrierId: "6699",
      idKey: "6699",
      idHexValue: "26265",
      status: "Failed",
      carrierError: "stat:UNDELIV err:034",
      receivedAt: T0,
    });
    const part = em.create(InboundPart, { sender: "+447700900456", recipient: num.number, ref: 7, total: 2, part: 1, text: "Hello", receivedAt: T0 });
    await em.flush();
    const seg2 = await db.orm.em.fork().findOneOrFail(CarrierSegment, { messageSid: seg.messageSid, seq: 1 });
    expect(seg2).toMatchObject({ carrierId: "001A2B", idKey: "1a2b", idAlt: "6699", status: "Submitted", carrierError: "" });
    expect(await db.orm.em.fork().findOneOrFail(PendingReceipt, { id: kept.id })).toMatchObject({
      idHexValue: "26265",
      status: "Failed",
      carrierError: "stat:UNDELIV err:034",
    });
    expect(await db.orm.em.fork().findOneOrFail(InboundPart, { id: part.id })).toMatchObject({ ref: 7, total: 2, part: 1, text: "Hello" });

    // Updates go through the unit of work too.
    msg2.status = "Submitted";
    msg2.attempts += 1;
    msg2.submittedAt = new Date(T0.getTime() + 3_700_000);
    await read.flush();
    const msg3 = await db.orm.em.fork().findOneOrFail(Message, msg.sid);
    expect(msg3).toMatchObject({ status: "Submitted", attempts: 1 });
    expect(msg3.submittedAt?.getTime()).toBe(T0.getTime() + 3_700_000);
  });

  it("checks foreign keys at commit, so a dangling reference fails the flush or transaction", async () => {
    const em = db.orm.em.fork();
    const missing = newSid("AC");
    em.create(Property, { sid: newSid("PR"), accountSid: missing, createdAt: T0 });
    // Raised by COMMIT, so MikroORM hands over the driver's own error (not a DriverException).
    const flushError = await em.flush().catch((e: unknown) => e);
    expect(flushError).not.toBeInstanceOf(DriverException);
    // The referencing end, with the missing key: what toConnectError maps (for numbers.address_sid, InvalidParameter).
    expect(constraintViolation(flushError)).toEqual({ kind: "foreign-key", constraint: "properties_account_sid_fkey", side: "referencing", key: missing });
    const txError = await db.orm.em
      .fork()
      .transactional((tx) => insertLease(tx, { poolNumber: "+19999999999", recipient: "+447700900777", accountSid: newSid("AC"), slot: 1 }))
      .catch((e: unknown) => e);
    expect(constraintViolation(txError)).toEqual({ kind: "foreign-key", constraint: "leases_pool_number_fkey", side: "referencing", key: "+19999999999" });
    expect(await db.orm.em.fork().count(Lease, { recipient: "+447700900777" })).toBe(0);
  });

  it("reports a duplicate pool number as a unique violation", async () => {
    const em = db.orm.em.fork();
    em.create(PhoneNumber, { sid: newSid("PN"), number: "+15550000002", createdAt: T0 });
    await em.flush();
    const again = db.orm.em.fork();
    again.create(PhoneNumber, { sid: newSid("PN"), number: "+15550000002", createdAt: T0 });
    const duplicate = await again.flush().catch((e: unknown) => e);
    expect(duplicate).toBeInstanceOf(UniqueConstraintViolationException);
    expect(constraintViolation(duplicate)).toEqual({ kind: "unique", constraint: "numbers_number_key", key: "+15550000002" });
  });

  it("remembers an Idempotency-Key's request fingerprint, and either a single send's message or a batch's response", async () => {
    const em = db.orm.em.fork();
    const acc = await account(em);
    const response = Buffer.from([8, 1, 0, 255, 10]);
    em.create(IdempotencyKey, { accountSid: acc.sid, key: "batch-1", messageSid: null, requestHash: "f".repeat(64), response, createdAt: T0 });
    await em.flush();
    const read = await db.orm.em.fork().findOneOrFail(IdempotencyKey, { accountSid: acc.sid, key: "batch-1" });
    expect(read).toMatchObject({ messageSid: null, requestHash: "f".repeat(64) });
    expect(Buffer.from(read.response!).equals(response)).toBe(true);
    // Exactly one of the two answers.
    for (const both of [
      { messageSid: null, response: null },
      { messageSid: newSid("MG"), response },
    ]) {
      const bad = db.orm.em.fork();
      bad.create(IdempotencyKey, { accountSid: acc.sid, key: `bad-${both.response ? 2 : 1}`, requestHash: null, createdAt: T0, ...both });
      expect(constraintViolation(await bad.flush().catch((e: unknown) => e))).toEqual({ kind: "check", constraint: "idempotency_keys_answer_check" });
    }
  });
});

describe("createOrm and migrateUp", () => {
  it("reports an unreachable database as not ready", async () => {
    // Init does not connect, so an unreachable server only shows in the probe.
    const down = await createOrm({ entities, databaseUrl: "postgres://postgres@127.0.0.1:1/postgres" });
    expect(await isDatabaseReady(down, 1000)).toBe(false);
    await down.close(true);
  });

  it.runIf(dbKind() === "pglite")("keeps a PGlite data folder across restarts", async () => {
    const root = mkdtempSync(join(tmpdir(), "sb-pglite-"));
    const dir = join(root, "nested", "data");
    try {
      const first = await createOrm({ entities, databaseUrl: dir });
      expect(await migrateUp(first)).toEqual(migrations.map((m) => m.name));
      await first.em.fork().execute("insert into accounts (sid, token_hash, webhook_secret) values ('AC1', 'h', 's')");
      await first.close();
      const second = await createOrm({ entities, databaseUrl: dir });
      expect(await migrateUp(second)).toEqual([]);
      expect(await second.em.fork().execute("select sid from accounts")).toEqual([{ sid: "AC1" }]);
      await second.close();
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it.runIf(dbKind() === "postgres")("lets concurrent starters migrate one PostgreSQL database exactly once", async () => {
    const server = process.env.DATABASE_URL!;
    const name = `sb_test_migrate_${randomBytes(6).toString("hex")}`;
    const admin = await createOrm({ entities, databaseUrl: server });
    await admin.em.fork().execute(`create database "${name}"`);
    const url = new URL(server);
    url.pathname = `/${name}`;
    const orms = await Promise.all([1, 2, 3].map(() => createOrm({ entities, databaseUrl: url.toString(), poolMax: 2 })));
    try {
      const applied = await Promise.all(orms.map((o) => migrateUp(o)));
      // Each migration ran once, all in the one starter that got the lock first.
      expect(applied.filter((names) => names.length > 0)).toEqual([migrations.map((m) => m.name)]);
    } finally {
      for (const o of orms) await o.close(true);
      await admin.em.fork().execute(`drop database if exists "${name}" with (force)`);
      await admin.close(true);
    }
  });
});
