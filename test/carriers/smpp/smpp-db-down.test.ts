/**
 * A deliver_sm is answered only once what it carries is committed: with the database down, a
 * receipt and an MO are answered ESME_RX_T_APPN (0x00000064, a temporary error), the Net::SMPP
 * SMSC (test/carriers/smpp/smsc.pl, `redeliver`) sends them again, and once the database is back each is
 * applied exactly once.
 *
 * The outage on the PostgreSQL pass is real: a private cluster (test/support/private-postgres.ts,
 * never the shared server) stopped with `pg_ctl stop -m immediate` and started again. PGlite is
 * embedded in the process and cannot go away by itself, so on the PGlite pass every query fails
 * at the driver (PGlite's `query`, inside and outside transactions) while the outage lasts: the
 * ORM, the transactions and the carrier above it are the same code.
 */
import type { MikroORM } from "@mikro-orm/sql";
import type { PgliteConnection } from "@mikro-orm/pglite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOrm, migrateUp } from "../../../src/db/orm.js";
import { entities } from "../../../src/entities.js";
import { createTestOrm, dbKind } from "../../support/db.js";
import { type PrivatePostgres, startPrivatePostgres } from "../../support/private-postgres.js";
import { without } from "../../support/system-packages.js";
import { acceptedSubmits, startSmsc, type TestSmsc } from "./smsc.js";
import { gsmHex, type SmppWorld, startSmppWorld, waitFor } from "./world.js";

/** A database the test can take down and bring back. */
interface OutageDb {
  orm: MikroORM;
  readonly isDown: boolean;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

/** PostgreSQL: a private cluster, stopped as in a crash. */
async function privateClusterDb(): Promise<OutageDb> {
  const pg: PrivatePostgres = await startPrivatePostgres({ noFsync: true });
  try {
    const admin = await createOrm({ entities, databaseUrl: pg.url(), poolMax: 2 });
    await admin.em.fork().execute(`create database switchboard`);
    await admin.close(true);
    // A short connect timeout: during the outage each attempt fails at once anyway (refused).
    const orm = await createOrm({ entities, databaseUrl: pg.url("switchboard"), poolMax: 4, connectTimeoutMs: 2000 });
    await migrateUp(orm);
    let isDown = false;
    return {
      orm,
      get isDown() {
        return isDown;
      },
      async down() {
        isDown = true;
        await pg.stop("immediate");
      },
      async up() {
        await pg.start();
        isDown = false;
      },
      async close() {
        // Bounded: a pooled connection left over from the outage must not hold the test up; the
        // cluster is thrown away (an immediate stop needs no shutdown checkpoint).
        await Promise.race([orm.close(true), new Promise((r) => setTimeout(r, 10_000))]);
        await pg.stop("immediate").catch(() => undefined);
        await pg.dispose();
      },
    };
  } catch (e) {
    await pg.dispose();
    throw e;
  }
}

type Query = (...args: unknown[]) => Promise<unknown>;

/** PGlite: every query fails while down, as a connection to a stopped server would. */
async function failingPgliteDb(): Promise<OutageDb> {
  const db = await createTestOrm();
  const pglite = (await (db.orm.driver.getConnection() as unknown as PgliteConnection).getNativeClient()) as unknown as {
    query: Query;
    transaction(fn: (tx: { query: Query }) => Promise<unknown>): Promise<unknown>;
  };
  let isDown = false;
  const guard =
    (query: Query): Query =>
    (...args) =>
      isDown ? Promise.reject(Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" })) : query(...args);
  const query = pglite.query.bind(pglite);
  const transaction = pglite.transaction.bind(pglite);
  pglite.query = guard(query);
  // Kysely runs a transaction's statements through the `tx` PGlite hands it; BEGIN, COMMIT and
  // ROLLBACK are PGlite's own, so a failed transaction is still rolled back cleanly.
  pglite.transaction = (fn) => transaction((tx) => fn(new Proxy(tx, { get: (t, k) => (k === "query" ? guard(t.query.bind(t)) : Reflect.get(t, k)) })));
  return {
    orm: db.orm,
    get isDown() {
      return isDown;
    },
    down: async () => void (isDown = true),
    up: async () => void (isDown = false),
    close: () => db.close(),
  };
}

describe.skipIf(dbKind() === "postgres" && without("postgresServer"))(`SMPP deliver_sm with the database down (${dbKind()})`, { timeout: 180_000 }, () => {
  let smsc: TestSmsc;
  let db: OutageDb;
  let world: SmppWorld;

  beforeAll(async () => {
    smsc = await startSmsc();
    db = dbKind() === "postgres" ? await privateClusterDb() : await failingPgliteDb();
    world = await startSmppWorld(db.orm, smsc, { tps: 0 });
  }, 180_000);

  afterAll(async () => {
    if (db?.isDown) await db.up().catch(() => undefined);
    await world?.close();
    await smsc?.stop();
    await db?.close();
  }, 120_000);

  it("answers a receipt and an MO ESME_RX_T_APPN (0x00000064) while the database is down; the SMSC's retries afterwards are applied once each", async () => {
    const { send, record, tenant, hooks, hookBase } = world;
    // A message submitted, to get a receipt for; a leased one, for the MO reply to reach its lease.
    const to = "+447700900301";
    const sid = await send({ From: tenant.ownedNumber, To: to, Text: "Receipt while down", DeliveryReceiptWebhookUri: `${hookBase}/dr` });
    const recipient = "+447700900302";
    const leased = await send({ From: "", To: recipient, Text: "Reply while down", WebhookUri: `${hookBase}/responses` });
    await waitFor("both Submitted", async () => (await record(sid)).Status === "Submitted" && (await record(leased)).Status === "Submitted");
    const submit = acceptedSubmits(smsc.events).find((e) => e.f.destination_addr === to.slice(1))!;
    const leasedFrom = (await record(leased)).From as string;

    await db.down();
    smsc.send("redeliver 700");
    const sentAt = smsc.events.length;
    smsc.send(`deliver esm_class=4 source_addr=${to.slice(1)} destination_addr=${tenant.ownedNumber.slice(1)} tlv_rmi=${submit.f.id} tlv_state=2`);
    smsc.send(
      `deliver esm_class=0 source_addr_ton=1 source_addr=${recipient.slice(1)} destination_addr=${leasedFrom.slice(1)} sm=${gsmHex("Yes, while down")}`,
    );
    // Each answered with the temporary error, then sent again by the SMSC and refused again.
    await smsc.waitFor("two refusals of each", (ev) => ev.slice(sentAt).filter((e) => e.kind === "deliver_resp" && e.f.status === "100").length >= 4, 30_000);
    expect(
      smsc.events
        .slice(sentAt)
        .filter((e) => e.kind === "deliver_resp")
        .every((e) => e.f.status === "100"),
    ).toBe(true);
    expect(smsc.events.slice(sentAt).some((e) => e.kind === "redelivered")).toBe(true);

    await db.up();
    await smsc.waitFor("both accepted", (ev) => ev.slice(sentAt).filter((e) => e.kind === "deliver_resp" && e.f.status === "0").length >= 2, 60_000);
    const delivered = await waitFor("Delivered", async () => ((await record(sid)).Status === "Delivered" ? record(sid) : undefined));
    expect(delivered).toMatchObject({ ErrorCode: "", CarrierError: "" });
    await waitFor("the receipt webhook", () => hooks.some((h) => h.path === "/dr" && h.body.MessageSid === sid));
    await waitFor("the reply webhook", () => hooks.some((h) => h.path === "/responses" && h.body.Text === "Yes, while down"));

    // Exactly once: the SMSC stops once each is answered 0, and nothing was recorded twice.
    await new Promise((r) => setTimeout(r, 1500));
    const after = smsc.events.slice(sentAt);
    expect(after.filter((e) => e.kind === "deliver_resp" && e.f.status === "0")).toHaveLength(2);
    expect(hooks.filter((h) => h.path === "/dr" && h.body.MessageSid === sid)).toHaveLength(1);
    const replies = hooks.filter((h) => h.path === "/responses" && h.body.Text === "Yes, while down");
    expect(replies).toHaveLength(1);
    expect(replies[0]!.body).toMatchObject({ Type: "Response", InReplyTo: leased, From: recipient, To: leasedFrom });
    const em = db.orm.em.fork();
    const inbound = await em.execute<{ n: string | number }[]>(`select count(*) as n from messages where direction = 'Receive' and text = ?`, [
      "Yes, while down",
    ]);
    expect(Number(inbound[0]!.n)).toBe(1);
    const kept = await em.execute<{ n: string | number }[]>(`select count(*) as n from carrier_pending_receipts`);
    expect(Number(kept[0]!.n)).toBe(0);
    const segments = await em.execute<{ status: string }[]>(`select status from carrier_segments where message_sid = ?`, [sid]);
    expect(segments).toEqual([{ status: "Delivered" }]);
  });
});
