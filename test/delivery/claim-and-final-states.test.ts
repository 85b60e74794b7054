/**
 * The delivery engine's one-statement writes (issue 14): the in-order claim (sb_claim_due) and a
 * report batch's final states without a transaction for the messages that need no delivery
 * receipt webhook (sb_apply_plain_final_states); and how many statements a dispatcher round and a
 * report batch send.
 */
import type { EntityManager } from "@mikro-orm/sql";
import pg from "pg";
import { beforeEach, describe, expect, it } from "vitest";
import type { Carrier, OutboundSms } from "../../src/delivery/carrier.js";
import { ManualClock } from "../../src/common/clock.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { createDispatcher } from "../../src/delivery/dispatcher.js";
import { applyReportBatch, applyReports } from "../../src/delivery/receipts.js";
import { claimFair, claimInOrder } from "../../src/messaging/message-store.js";
import { dbKind, useTestOrm } from "../support/db.js";

const T = new Date("2026-11-27T12:00:00Z");
const at = (ms: number) => new Date(T.getTime() + ms);
const MIN = 60_000;

interface Row {
  sid: string;
  sendAt: Date;
  status?: string;
  claimedUntil?: Date | null;
  deliveryReceipt?: boolean;
  drUri?: string;
}

async function insert(em: EntityManager, rows: Row[]): Promise<void> {
  for (const r of rows) {
    await executeBound(
      em,
      `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments,
                             delivery_receipt, dr_webhook_uri, dr_webhook_method, send_at, created_at, claimed_until)
       values (?, 'ACT1', 'PRT1', 'Transmit', ?, '+447700900001', '+447911000001', 'hi', 'GSM7', 1, ?, ?, 'POST', ?, ?, ?)`,
      [r.sid, r.status ?? "Scheduled", r.deliveryReceipt ?? false, r.drUri ?? "", r.sendAt, T, r.claimedUntil ?? null],
    );
  }
}

const sids = (rows: { sid: string }[]) => rows.map((r) => r.sid).sort();

describe(`the delivery engine's one-statement writes (${dbKind()})`, () => {
  const db = useTestOrm();

  beforeEach(async () => {
    const em = db.orm.em.fork();
    await executeBound(em, "delete from webhook_deliveries", []);
    await executeBound(em, "delete from messages", []);
    await executeBound(em, "insert into accounts (sid, token_hash, webhook_secret) values ('ACT1', 'x', 'y') on conflict do nothing", []);
    await executeBound(em, "insert into properties (sid, account_sid) values ('PRT1', 'ACT1') on conflict do nothing", []);
  });

  it("the in-order claim takes the oldest due messages, at most the limit, none not yet due", async () => {
    const em = db.orm.em.fork();
    // Inserted out of order: the claim goes by send_at.
    await insert(em, [
      { sid: "M3", sendAt: at(-3 * MIN) },
      { sid: "M6", sendAt: at(-6 * MIN) },
      { sid: "M1", sendAt: at(-1 * MIN) },
      { sid: "M5", sendAt: at(-5 * MIN) },
      { sid: "M2", sendAt: at(-2 * MIN) },
      { sid: "M4", sendAt: at(-4 * MIN) },
      { sid: "MF", sendAt: at(1) },
    ]);
    const until = at(MIN);
    const first = await claimInOrder(em, false, until, T, 4);
    expect(sids(first)).toEqual(["M3", "M4", "M5", "M6"]);
    expect(first.every((r) => r.attempts === 1 && r.account_sid === "ACT1" && r.text === "hi" && r.delivery_receipt === false)).toBe(true);
    const [row] = await executeBound<{ status: string; claimed_until: Date | string }>(em, "select status, claimed_until from messages where sid = 'M6'", []);
    expect(row.status).toBe("Processing");
    expect(new Date(row.claimed_until).getTime()).toBe(until.getTime());
    expect(sids(await claimInOrder(em, false, until, T, 10))).toEqual(["M1", "M2"]);
    expect(await claimInOrder(em, false, until, T, 10)).toEqual([]);
    // Due once the clock reaches its send_at (inclusive).
    expect(sids(await claimInOrder(em, false, until, at(1), 10))).toEqual(["MF"]);
  });

  for (const [claim, confirmed] of [
    ["in order", false],
    ["in order", true],
    ["round-robin", false],
    ["round-robin", true],
  ] as const) {
    it(`an expired claim is taken again only when claims expire (${claim}, confirming carrier: ${confirmed})`, async () => {
      const em = db.orm.em.fork();
      await insert(em, [
        { sid: "EXPIRED", sendAt: at(-3 * MIN), status: "Processing", claimedUntil: at(-1) },
        { sid: "LIVE", sendAt: at(-2 * MIN), status: "Processing", claimedUntil: at(1) },
        { sid: "FRESH", sendAt: at(-1 * MIN) },
        { sid: "LATER", sendAt: at(1) },
      ]);
      const claimed =
        claim === "in order" ? await claimInOrder(em, confirmed, at(MIN), T, 10) : await claimFair(em, confirmed, at(MIN), ["ACT1", "NOBODY"], T, 10);
      expect(sids(claimed)).toEqual(confirmed ? ["FRESH"] : ["EXPIRED", "FRESH"]);
      if (!confirmed) expect(claimed.find((r) => r.sid === "EXPIRED")!.attempts).toBe(1);
    });
  }

  it.runIf(dbKind() === "postgres")("two concurrent claims skip each other's locked rows and never take the same message", async () => {
    const em = db.orm.em.fork();
    await insert(
      em,
      Array.from({ length: 10 }, (_, i) => ({ sid: `C${i}`, sendAt: at(-(i + 1) * 1000) })),
    );
    let other: { sid: string }[] = [];
    const mine = await db.orm.em.fork().transactional(async (tx) => {
      const rows = await claimInOrder(tx, false, at(MIN), T, 4);
      // Another connection while this transaction holds its claimed rows' locks: it must not wait for them.
      other = [...(await claimFair(db.orm.em.fork(), false, at(MIN), ["ACT1"], T, 2)), ...(await claimInOrder(db.orm.em.fork(), false, at(MIN), T, 10))];
      return rows;
    });
    expect(sids(mine)).toEqual(["C6", "C7", "C8", "C9"]);
    expect(sids(other)).toEqual(["C0", "C1", "C2", "C3", "C4", "C5"]);
  });

  /** Reports of a batch in which some messages need a delivery receipt webhook, some repeated, some final or unknown. */
  async function mixedBatch(em: EntityManager, p: string) {
    await insert(em, [
      { sid: `${p}P1`, sendAt: at(-MIN), status: "Submitted" },
      { sid: `${p}P2`, sendAt: at(-MIN), status: "Processing", deliveryReceipt: true, drUri: "" },
      { sid: `${p}P3`, sendAt: at(-MIN), status: "Submitted", deliveryReceipt: false, drUri: "https://example.com/dr" },
      { sid: `${p}W1`, sendAt: at(-MIN), status: "Submitted", deliveryReceipt: true, drUri: "https://example.com/dr" },
      { sid: `${p}W2`, sendAt: at(-MIN), status: "Processing", deliveryReceipt: true, drUri: "https://example.com/dr" },
      { sid: `${p}F1`, sendAt: at(-MIN), status: "Delivered" },
      { sid: `${p}F2`, sendAt: at(-MIN), status: "Failed", deliveryReceipt: true, drUri: "https://example.com/dr" },
    ]);
    const r = (sid: string, status: "Delivered" | "Failed") => ({
      messageSid: `${p}${sid}`,
      status,
      at: T,
      errorCode: status === "Failed" ? "E1" : "",
      now: T,
    });
    return [
      r("P1", "Delivered"),
      r("W1", "Delivered"),
      r("P1", "Failed"),
      r("W1", "Failed"),
      r("P2", "Failed"),
      r("P3", "Delivered"),
      r("W2", "Failed"),
      r("W2", "Delivered"),
      r("F1", "Delivered"),
      r("F2", "Delivered"),
      r("UNKNOWN", "Delivered"),
    ];
  }

  it("a report batch mixing messages with and without a delivery receipt webhook: each changed once, the webhook queued exactly for those that ask, the answers of applyReports", async () => {
    const em = db.orm.em.fork();
    const outcomes = await applyReportBatch(em, await mixedBatch(em, "A"));
    const expected = await em.fork().transactional(async (tx) => applyReports(tx, await mixedBatch(tx, "B")));
    expect(outcomes).toEqual(expected);
    expect(outcomes).toEqual([
      { changed: true, webhook: false },
      { changed: true, webhook: true },
      { changed: false, webhook: false },
      { changed: false, webhook: false },
      { changed: true, webhook: false },
      { changed: true, webhook: false },
      { changed: true, webhook: true },
      { changed: false, webhook: false },
      { changed: false, webhook: false },
      { changed: false, webhook: false },
      { changed: false, webhook: false },
    ]);
    const rows = await executeBound<{ sid: string; status: string; error_code: string; claimed_until: unknown }>(
      em,
      "select sid, status, error_code, claimed_until from messages where sid like 'A%' order by sid",
      [],
    );
    expect(rows.map((m) => [m.sid, m.status, m.error_code, m.claimed_until])).toEqual([
      ["AF1", "Delivered", "", null],
      ["AF2", "Failed", "", null],
      ["AP1", "Delivered", "", null],
      ["AP2", "Failed", "E1", null],
      ["AP3", "Delivered", "", null],
      ["AW1", "Delivered", "", null],
      ["AW2", "Failed", "E1", null],
    ]);
    const hooks = await executeBound<{ message_sid: string; payload: unknown }>(
      em,
      "select message_sid, payload from webhook_deliveries where message_sid like 'A%' order by message_sid",
      [],
    );
    expect(hooks.map((h) => [h.message_sid, (typeof h.payload === "string" ? JSON.parse(h.payload) : h.payload).Status])).toEqual([
      ["AW1", "Delivered"],
      ["AW2", "Failed"],
    ]);
  });

  it.runIf(dbKind() === "postgres")(
    "statements sent: a dispatcher round is its claim and its record (a backlog round's claim a transaction); a report batch is one statement unless a message needs a webhook",
    async () => {
      const em = db.orm.em.fork();
      await insert(em, [
        { sid: "S1", sendAt: at(-2000) },
        { sid: "S2", sendAt: at(-1000) },
      ]);
      const carrier: Carrier = {
        name: "accepting",
        submit: async (sms: OutboundSms) => ({ carrierRef: `ref-${sms.messageSid}` }),
        start: async () => undefined,
        stop: async () => undefined,
      };
      const dispatcher = createDispatcher({ orm: db.orm, clock: new ManualClock(T), carrier });
      const sent: string[] = [];
      const query = pg.Client.prototype.query;
      const counting = function (this: unknown, ...args: unknown[]) {
        const q = args[0] as string | { text: string };
        sent.push(typeof q === "string" ? q : q.text);
        return (query as (...a: unknown[]) => unknown).apply(this, args);
      };
      pg.Client.prototype.query = counting as typeof query;
      try {
        expect(await dispatcher.tick()).toBe(2);
        expect(sent.map((s) => s.slice(0, 40))).toEqual(["select * from sb_claim_due($1::timestamp", "select sid from sb_record_submissions($1"]);
        sent.length = 0;
        expect(await dispatcher.tick()).toBe(0);
        expect(sent).toHaveLength(1);

        // A full round, then a backlog round: the round-robin claim in a transaction.
        await insert(em, [
          { sid: "B1", sendAt: at(-3000) },
          { sid: "B2", sendAt: at(-2000) },
        ]);
        const small = createDispatcher({ orm: db.orm, clock: new ManualClock(T), carrier, batchSize: 1 });
        expect(await small.tick()).toBe(1);
        sent.length = 0;
        expect(await small.tick()).toBe(1);
        expect(sent.map((s) => s.slice(0, 30).toLowerCase())).toEqual([
          "begin",
          "select account_sid from sb_due",
          "select * from sb_claim_fair($1",
          "commit",
          "select sid from sb_record_subm",
        ]);

        sent.length = 0;
        await applyReportBatch(db.orm.em.fork(), [{ messageSid: "S1", status: "Delivered", at: T, errorCode: "", now: T }]);
        expect(sent.map((s) => s.slice(0, 45))).toEqual(["select * from sb_apply_plain_final_states($1:"]);

        await insert(em, [{ sid: "S3", sendAt: at(-1000), status: "Submitted", deliveryReceipt: true, drUri: "https://example.com/dr" }]);
        sent.length = 0;
        await applyReportBatch(db.orm.em.fork(), [
          { messageSid: "S2", status: "Delivered", at: T, errorCode: "", now: T },
          { messageSid: "S3", status: "Delivered", at: T, errorCode: "", now: T },
        ]);
        // The plain statement, then the transaction for the one message whose webhook is queued with its final state.
        expect(sent.map((s) => s.slice(0, 30).toLowerCase())).toEqual([
          "select * from sb_apply_plain_f",
          "begin",
          "select * from sb_apply_final_s",
          "insert into webhook_deliveries",
          "commit",
        ]);
      } finally {
        pg.Client.prototype.query = query;
      }
    },
  );
});
