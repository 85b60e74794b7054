/**
 * Balances and the ledger (docs/billing.md) on the database: the conditional charge in order,
 * exact to the micro-unit, with Prepaid, Postpaid and CreditLimit; refunds once; top-ups and
 * adjustments; the balance always the sum of the ledger; and 200 concurrent charges against a
 * balance for exactly 50 (truly concurrent on PostgreSQL, through the pool's connections; PGlite
 * has one connection and runs them in turn, which must come out the same).
 */
import { describe, expect, it } from "vitest";
import { dbKind, useTestOrm } from "../support/db.js";
import { addAccount } from "../../src/accounts/account-store.js";
import type { BillingMode } from "../../src/accounts/account.entity.js";
import { newSid } from "../../src/common/sid.js";
import { parseMoney, formatMoney } from "../../src/common/money.js";
import { addBalanceEntry, balanceOf, chargeSends, ledgerSum, listBalanceEntries, refundMessage } from "../../src/billing/balance-store.js";

const NOW = new Date("2026-12-04T00:00:00Z");
const m = (s: string) => parseMoney("Amount", s, { signed: true });

describe(`balances (${dbKind()})`, () => {
  const db = useTestOrm();
  const em = () => db.orm.em.fork();

  async function account(billingMode: BillingMode, creditLimit: string | null = null): Promise<string> {
    const e = em();
    const sid = newSid("AC");
    addAccount(e, {
      sid,
      name: "billing",
      tokenHash: "0".repeat(64),
      webhookSecret: "whsec_x",
      createdAt: NOW,
      billingMode,
      creditLimit: creditLimit === null ? null : m(creditLimit),
    });
    await e.flush();
    return sid;
  }

  async function consistent(sid: string): Promise<string> {
    const balance = await balanceOf(em(), sid);
    expect(await ledgerSum(em(), sid)).toBe(balance);
    return formatMoney(balance);
  }

  it("charges a prepaid batch in order, refusing only the items that do not fit", async () => {
    const sid = await account("Prepaid");
    await em().transactional((tx) => addBalanceEntry(tx, sid, "TopUp", m("0.20"), "invoice 1", NOW));
    const results = await em().transactional((tx) =>
      chargeSends(
        tx,
        [m("0.0525"), m("0.10"), m("0.0525"), m("0.05"), m("0.000001")].map((amount, i) => ({
          accountSid: sid,
          amount,
          messageSid: `MG${String(i).padStart(30, "0")}`,
        })),
        NOW,
      ),
    );
    // 0.20 − 0.0525 − 0.10 = 0.0475: the third (0.0525) does not fit, the fourth (0.05) neither, the fifth does.
    expect(results).toEqual([
      { accepted: true, balanceAfter: m("0.1475") },
      { accepted: true, balanceAfter: m("0.0475") },
      { accepted: false },
      { accepted: false },
      { accepted: true, balanceAfter: m("0.047499") },
    ]);
    expect(await consistent(sid)).toBe("0.047499");
    const { entries, total } = await listBalanceEntries(em(), sid, 10, 0);
    expect(total).toBe(4);
    expect(entries.map((e) => [e.type, formatMoney(e.amount), formatMoney(e.balanceAfter), e.messageSid, e.reference])).toEqual([
      ["Charge", "-0.000001", "0.047499", `MG${"4".padStart(30, "0")}`, ""],
      ["Charge", "-0.10", "0.0475", `MG${"1".padStart(30, "0")}`, ""],
      ["Charge", "-0.0525", "0.1475", `MG${"0".padStart(30, "0")}`, ""],
      ["TopUp", "0.20", "0.20", null, "invoice 1"],
    ]);
    // The batch's three charges are one Charges row; each is still an entry with an id of its own,
    // newest first, and a page may start or end inside the row.
    const ids = entries.map((e) => BigInt(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? 1 : -1)));
    expect(new Set(ids).size).toBe(4);
    const page = await listBalanceEntries(em(), sid, 2, 1);
    expect(page.total).toBe(4);
    expect(page.entries.map((e) => e.id)).toEqual([entries[1].id, entries[2].id]);
    const rows = await em()
      .getConnection()
      .execute<{ type: string; n: number }[]>(
        "select type, coalesce(cardinality(charge_ids), 1)::int as n from balance_entries where account_sid = ? order by id",
        [sid],
      );
    expect(rows.map((r) => [r.type, r.n])).toEqual([
      ["TopUp", 1],
      ["Charges", 3],
    ]);
  });

  it("charges exactly to zero, then refuses a single micro-unit", async () => {
    const sid = await account("Prepaid");
    await em().transactional((tx) => addBalanceEntry(tx, sid, "TopUp", m("0.105"), "", NOW));
    const r = await em().transactional((tx) =>
      chargeSends(
        tx,
        [m("0.0525"), m("0.0525"), m("0.000001")].map((amount) => ({ accountSid: sid, amount, messageSid: newSid("MG") })),
        NOW,
      ),
    );
    expect(r).toEqual([{ accepted: true, balanceAfter: m("0.0525") }, { accepted: true, balanceAfter: 0n }, { accepted: false }]);
    expect(await consistent(sid)).toBe("0.00");
  });

  it("lets a CreditLimit take a prepaid or postpaid balance that far below zero, exactly", async () => {
    for (const mode of ["Prepaid", "Postpaid"] as const) {
      const sid = await account(mode, "1.00");
      const r = await em().transactional((tx) =>
        chargeSends(
          tx,
          [m("0.60"), m("0.40"), m("0.000001")].map((amount) => ({ accountSid: sid, amount, messageSid: newSid("MG") })),
          NOW,
        ),
      );
      expect(r).toEqual([{ accepted: true, balanceAfter: m("-0.60") }, { accepted: true, balanceAfter: m("-1.00") }, { accepted: false }]);
      expect(await consistent(sid)).toBe("-1.00");
    }
  });

  it("never refuses a postpaid account without a CreditLimit", async () => {
    const sid = await account("Postpaid");
    const r = await em().transactional((tx) => chargeSends(tx, [{ accountSid: sid, amount: m("999999.50"), messageSid: newSid("MG") }], NOW));
    expect(r).toEqual([{ accepted: true, balanceAfter: m("-999999.50") }]);
    expect(await consistent(sid)).toBe("-999999.50");
  });

  it("charges the accounts of one batch each against its own balance, and zero amounts write nothing", async () => {
    const a = await account("Prepaid");
    const b = await account("Prepaid");
    await em().transactional((tx) => addBalanceEntry(tx, a, "TopUp", m("1"), "", NOW));
    const r = await em().transactional((tx) =>
      chargeSends(
        tx,
        [
          { accountSid: b, amount: m("0.01"), messageSid: newSid("MG") },
          { accountSid: a, amount: m("0.01"), messageSid: newSid("MG") },
          { accountSid: a, amount: 0n, messageSid: newSid("MG") },
        ],
        NOW,
      ),
    );
    expect(r).toEqual([{ accepted: false }, { accepted: true, balanceAfter: m("0.99") }, { accepted: true, balanceAfter: m("0.99") }]);
    expect((await listBalanceEntries(em(), a, 10, 0)).total).toBe(2);
    expect((await listBalanceEntries(em(), b, 10, 0)).total).toBe(0);
  });

  it("refunds a message's charge once; a message never charged is not refunded", async () => {
    const sid = await account("Prepaid");
    await em().transactional((tx) => addBalanceEntry(tx, sid, "TopUp", m("1"), "", NOW));
    const msg = newSid("MG");
    await em().transactional((tx) => chargeSends(tx, [{ accountSid: sid, amount: m("0.21"), messageSid: msg }], NOW));
    const refund = await em().transactional((tx) => refundMessage(tx, sid, msg, NOW));
    expect(refund && [refund.type, formatMoney(refund.amount), formatMoney(refund.balanceAfter), refund.messageSid]).toEqual(["Refund", "0.21", "1.00", msg]);
    expect(await em().transactional((tx) => refundMessage(tx, sid, msg, NOW))).toBeNull();
    expect(await em().transactional((tx) => refundMessage(tx, sid, newSid("MG"), NOW))).toBeNull();
    await em().transactional((tx) => addBalanceEntry(tx, sid, "Adjustment", m("-0.5"), "goodwill reversed", NOW));
    expect(await consistent(sid)).toBe("0.50");
  });

  it("200 concurrent charges against a balance for exactly 50: 50 accepted, balance 0, 50 charges in the ledger", { timeout: 60_000 }, async () => {
    const sid = await account("Prepaid");
    const price = m("0.0525");
    await em().transactional((tx) => addBalanceEntry(tx, sid, "TopUp", price * 50n, "", NOW));
    const results = await Promise.all(
      Array.from({ length: 200 }, () => em().transactional((tx) => chargeSends(tx, [{ accountSid: sid, amount: price, messageSid: newSid("MG") }], NOW))),
    );
    expect(results.filter((r) => r[0].accepted).length).toBe(50);
    expect(await consistent(sid)).toBe("0.00");
    const { entries, total } = await listBalanceEntries(em(), sid, 1000, 0);
    expect(total).toBe(51);
    expect(entries.filter((e) => e.type === "Charge").length).toBe(50);

    // Concurrent refunds of one message: exactly one.
    const charged = entries.find((e) => e.type === "Charge")!;
    const refunds = await Promise.all(Array.from({ length: 20 }, () => em().transactional((tx) => refundMessage(tx, sid, charged.messageSid!, NOW))));
    expect(refunds.filter((r) => r !== null).length).toBe(1);
    expect(await consistent(sid)).toBe("0.0525");
  });

  it("concurrent batches over the same accounts in different orders never deadlock and stay exact", { timeout: 60_000 }, async () => {
    const a = await account("Prepaid");
    const b = await account("Prepaid");
    for (const s of [a, b]) await em().transactional((tx) => addBalanceEntry(tx, s, "TopUp", m("1"), "", NOW));
    const batch = (first: string, second: string) =>
      em().transactional((tx) =>
        chargeSends(
          tx,
          [
            { accountSid: first, amount: m("0.01"), messageSid: newSid("MG") },
            { accountSid: second, amount: m("0.01"), messageSid: newSid("MG") },
          ],
          NOW,
        ),
      );
    const results = await Promise.all(Array.from({ length: 120 }, (_, i) => (i % 2 === 0 ? batch(a, b) : batch(b, a))));
    const accepted = results.flat().filter((r) => r.accepted).length;
    // 100 charges of 0.01 fit each balance of 1.00; 240 tried.
    expect(accepted).toBe(200);
    expect(await consistent(a)).toBe("0.00");
    expect(await consistent(b)).toBe("0.00");
  });
});
