/**
 * Prices and charges on the send path (issue 43, docs/billing.md): the price fixed at accept from
 * the account's rate card (longest prefix, in effect at the clock's second), a priced account's
 * destination without a rate refused, the charge taken with the insert (402 InsufficientFunds,
 * nothing stored; a batch refuses only what does not fit, in order) on the one-statement path and
 * in a transaction (an Idempotency-Key, a leased sender), and refunds, once, for a message that
 * never reaches a carrier (canceled, the account's queue canceled, a STOP while queued).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { balanceOf, ledgerSum, listBalanceEntries } from "../../src/billing/balance-store.js";
import { formatMoney } from "../../src/common/money.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, addPoolNumbers, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const AU = "+61412345678";
const AU_LANDLINE = "+61298765432";
const UK = "+447700900123";
// 161 GSM-7 characters: two segments.
const TWO_SEGMENTS = "x".repeat(161);

describe(`prices and charges on the send (${dbKind()})`, () => {
  let db: TestOrm;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestOrm();
    t = await createTestApp({ db });
    // "retail": mobiles +614 at 0.0525, the rest of Australia at 0.07; from an hour on, +614 at 0.06.
    const later = Math.floor(t.clock.now().getTime() / 1000) + 3600;
    const put = await t.app.inject({
      method: "PUT",
      url: "/admin/v1/RateCards/retail",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: {
        Rates: [
          { Prefix: "+614", PricePerSegment: "0.0525" },
          { Prefix: "+61", PricePerSegment: "0.07" },
          { Prefix: "+614", PricePerSegment: "0.06", EffectiveFrom: later },
        ],
      },
    });
    expect(put.statusCode, put.body).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  const em = () => db.orm.em.fork();

  /** A tenant on card "retail" (or none), Postpaid or Prepaid, topped up with `topUp`: set through the operator API. */
  async function tenant(billing: { card?: string | null; mode?: "Postpaid" | "Prepaid"; creditLimit?: string; topUp?: string } = {}): Promise<Tenant> {
    const tn = await createTenant(t.app);
    const op = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const set = await t.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${tn.accountSid}`,
      headers: op,
      payload: {
        RateCard: billing.card === undefined ? "retail" : (billing.card ?? ""),
        BillingMode: billing.mode ?? "Postpaid",
        CreditLimit: billing.creditLimit ?? "",
      },
    });
    expect(set.statusCode, set.body).toBe(200);
    if (billing.topUp) {
      const topUp = await t.app.inject({
        method: "POST",
        url: `/admin/v1/Accounts/${tn.accountSid}/BalanceEntries`,
        headers: op,
        payload: { Type: "TopUp", Amount: billing.topUp, Reference: "test" },
      });
      expect(topUp.statusCode, topUp.body).toBe(200);
    }
    return tn;
  }

  const send = (tn: Tenant, payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tn.propertySid}/Messages`,
      headers: { authorization: tn.auth, ...headers },
      payload: { From: tn.ownedNumber, To: AU, Text: "hello", ...payload },
    });
  const record = async (tn: Tenant, sid: string) =>
    (await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tn.auth } })).json();
  const balance = async (tn: Tenant) => {
    const b = await balanceOf(em(), tn.accountSid);
    // The balance is always the sum of its ledger.
    expect(await ledgerSum(em(), tn.accountSid)).toBe(b);
    return formatMoney(b);
  };
  const stored = async (tn: Tenant) =>
    (await executeBound<{ n: number }>(em(), "select count(*)::int as n from messages where account_sid = ?", [tn.accountSid]))[0].n;

  it('an unpriced account\'s message has Price "" and touches no balance', async () => {
    const tn = await tenant({ card: null });
    const res = await send(tn, {});
    expect(res.statusCode, res.body).toBe(200);
    const rec = await record(tn, res.json().MessageSid);
    expect([rec.Price, rec.PriceUnit]).toEqual(["", "AUD"]);
    expect((await listBalanceEntries(em(), tn.accountSid, 10, 0)).total).toBe(0);
  });

  it("a priced send is charged segments × the longest prefix's rate in effect, exactly, and its record keeps the price", async () => {
    const tn = await tenant();
    const mobile = await send(tn, { Text: TWO_SEGMENTS });
    expect(mobile.statusCode, mobile.body).toBe(200);
    const landline = await send(tn, { To: AU_LANDLINE });
    expect(landline.statusCode, landline.body).toBe(200);
    expect((await record(tn, mobile.json().MessageSid)).Price).toBe("0.105");
    expect((await record(tn, landline.json().MessageSid)).Price).toBe("0.07");
    // Postpaid without a credit limit: the balance goes below zero, every charge in the ledger.
    expect(await balance(tn)).toBe("-0.175");
    const { entries } = await listBalanceEntries(em(), tn.accountSid, 10, 0);
    expect(entries.map((e) => [e.type, formatMoney(e.amount), formatMoney(e.balanceAfter), e.messageSid])).toEqual([
      ["Charge", "-0.07", "-0.175", landline.json().MessageSid],
      ["Charge", "-0.105", "-0.105", mobile.json().MessageSid],
    ]);
  });

  it("a rate effective from a later second takes over at that second, not before", async () => {
    const tn = await tenant();
    const at = t.clock.now().getTime();
    try {
      t.clock.set(new Date(at + 3600_000 - 1000));
      const before = await send(tn, {});
      t.clock.set(new Date(at + 3600_000));
      const after = await send(tn, {});
      expect((await record(tn, before.json().MessageSid)).Price).toBe("0.0525");
      expect((await record(tn, after.json().MessageSid)).Price).toBe("0.06");
    } finally {
      t.clock.set(new Date(at));
    }
  });

  it("a priced account's destination its card has no rate for: 400 DestinationNotAllowed naming To, nothing stored or charged", async () => {
    const tn = await tenant();
    const res = await send(tn, { To: UK });
    expect(res.statusCode).toBe(400);
    const message = `To ${UK} has no price on this account's rate card, so it cannot be sent there: nothing was stored. Ask the operator to add a rate for its prefix.`;
    expect(res.json()).toEqual({
      ResponseStatus: {
        ErrorCode: "DestinationNotAllowed",
        Message: message,
        Errors: [{ FieldName: "To", ErrorCode: "DestinationNotAllowed", Message: message }],
      },
    });
    expect(await stored(tn)).toBe(0);
    expect(await balance(tn)).toBe("0.00");
  });

  it("Prepaid: a send its balance cannot cover is 402 InsufficientFunds, nothing stored or charged; to the micro-unit", async () => {
    const tn = await tenant({ mode: "Prepaid", topUp: "0.105" });
    expect((await send(tn, {})).statusCode).toBe(200);
    expect((await send(tn, {})).statusCode).toBe(200);
    expect(await balance(tn)).toBe("0.00");
    const refused = await send(tn, {});
    expect(refused.statusCode).toBe(402);
    expect(refused.json()).toEqual({
      ResponseStatus: {
        ErrorCode: "InsufficientFunds",
        Message:
          "The account's balance (with its credit limit) cannot cover this message's price of 0.0525: nothing was stored or charged. Top up the balance, then send again.",
        Errors: [],
      },
    });
    expect(await stored(tn)).toBe(2);
    expect(await balance(tn)).toBe("0.00");
  });

  it("a CreditLimit lets the balance go that far below zero, and not a micro-unit further", async () => {
    const tn = await tenant({ mode: "Prepaid", creditLimit: "0.104999" });
    expect((await send(tn, {})).statusCode).toBe(200);
    expect((await send(tn, {})).statusCode).toBe(402);
    expect(await balance(tn)).toBe("-0.0525");
  });

  it("sends of several accounts at once, one whose balance covers only some: each charged exactly, only what does not fit refused, never a deadlock", async () => {
    // The group commit puts sends of several accounts in one statement, and on PostgreSQL several
    // statements run at once: an account covered in full is charged by the statement's update, the
    // short one's sends by sb_charge in order, after the same locks in account order.
    const short = await tenant({ mode: "Prepaid", topUp: "0.2625" }); // exactly 5 sends of 0.0525
    const postpaid = await tenant({ mode: "Postpaid" });
    const rich = await tenant({ mode: "Prepaid", topUp: "100" });
    const order = Array.from({ length: 20 }, () => [short, postpaid, rich]).flat();
    const answers = await Promise.all(order.map((tn) => send(tn, {})));
    const codes = (tn: Tenant) =>
      answers.filter((_, i) => order[i] === tn).map((r) => (r.statusCode === 200 ? "200" : `${r.statusCode} ${r.json().ResponseStatus.ErrorCode}`));
    expect(
      codes(short).filter((c) => c === "200"),
      JSON.stringify(codes(short)),
    ).toHaveLength(5);
    expect(
      codes(short).filter((c) => c === "402 InsufficientFunds"),
      JSON.stringify(codes(short)),
    ).toHaveLength(15);
    expect(codes(postpaid)).toEqual(Array(20).fill("200"));
    expect(codes(rich)).toEqual(Array(20).fill("200"));
    expect(await balance(short)).toBe("0.00");
    expect(await balance(postpaid)).toBe("-1.05");
    expect(await balance(rich)).toBe("98.95");
    expect([await stored(short), await stored(postpaid), await stored(rich)]).toEqual([5, 20, 20]);
    // One ledger entry per charge, each with its own id, the balances after them stepping by the price.
    const ledger = await listBalanceEntries(em(), rich.accountSid, 100, 0);
    expect(ledger.total).toBe(21);
    const charges = ledger.entries.filter((e) => e.type === "Charge");
    expect(new Set(charges.map((e) => e.id)).size).toBe(20);
    expect(charges.map((e) => formatMoney(e.balanceAfter)).sort()).toEqual(
      Array.from({ length: 20 }, (_, k) => formatMoney(100_000_000n - 52_500n * BigInt(k + 1))).sort(),
    );
  });

  it("a batch refuses only the items that do not fit, in order", async () => {
    const tn = await tenant({ mode: "Prepaid", topUp: "0.13" });
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tn.propertySid}/BatchMessages`,
      headers: { authorization: tn.auth },
      payload: {
        Messages: [
          { From: tn.ownedNumber, To: AU, Text: "one" },
          { From: tn.ownedNumber, To: AU_LANDLINE, Text: "two" },
          { From: tn.ownedNumber, To: AU_LANDLINE, Text: "three" },
          { From: tn.ownedNumber, To: AU, Text: "four" },
        ],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const codes = res.json().Messages.map((m: { ResponseStatus?: { ErrorCode: string } }) => m.ResponseStatus?.ErrorCode || "OK");
    // 0.13 − 0.0525 − 0.07 = 0.0075: the third (0.07) and fourth (0.0525) do not fit.
    expect(codes).toEqual(["OK", "OK", "InsufficientFunds", "InsufficientFunds"]);
    expect(await balance(tn)).toBe("0.0075");
    expect(await stored(tn)).toBe(2);
  });

  it("in a transaction too: a send with an Idempotency-Key, and one from a leased sender", async () => {
    const tn = await tenant({ mode: "Prepaid", topUp: "0.06" });
    await addPoolNumbers(t.app, 2);
    const keyed = await send(tn, {}, { "idempotency-key": "bill-1" });
    expect(keyed.statusCode, keyed.body).toBe(200);
    // A repeat answers with the first message and charges nothing again.
    expect((await send(tn, {}, { "idempotency-key": "bill-1" })).json().MessageSid).toBe(keyed.json().MessageSid);
    expect(await balance(tn)).toBe("0.0075");
    const leased = await send(tn, { From: "" });
    expect(leased.statusCode).toBe(402);
    expect(leased.json().ResponseStatus.ErrorCode).toBe("InsufficientFunds");
    // No lease was taken for the refused send.
    const [{ n }] = await executeBound<{ n: number }>(em(), "select count(*)::int as n from leases where account_sid = ?", [tn.accountSid]);
    expect(n).toBe(0);
    expect(await stored(tn)).toBe(1);
  });

  it("refunds, once, what never reaches a carrier: a canceled message, the account's queue canceled, a STOP while queued", async () => {
    const tn = await tenant({ mode: "Prepaid", topUp: "1" });
    const later = Math.floor(t.clock.now().getTime() / 1000) + 600;
    const a = (await send(tn, { Schedule: later })).json().MessageSid;
    const b = (await send(tn, { Schedule: later, To: AU_LANDLINE })).json().MessageSid;
    const c = (await send(tn, { Schedule: later, To: "+61412345679" })).json().MessageSid;
    expect(await balance(tn)).toBe("0.825");
    const cancel = await t.app.inject({ method: "DELETE", url: `/v2/Messages/${a}`, headers: { authorization: tn.auth } });
    expect(cancel.statusCode, cancel.body).toBe(200);
    expect(cancel.json().Price).toBe("0.0525");
    expect(await balance(tn)).toBe("0.8775");
    // A STOP from c's recipient fails it (RecipientOptedOut) and gives its charge back.
    const optOut = await t.app.inject({
      method: "POST",
      url: `/v2/Accounts/${tn.accountSid}/OptOuts`,
      headers: { authorization: tn.auth },
      payload: { Number: "+61412345679" },
    });
    expect(optOut.statusCode, optOut.body).toBe(200);
    expect(await balance(tn)).toBe("0.93");
    // The operator cancels the account's queue: b's charge back; a and c are not refunded twice.
    const queued = await t.app.inject({
      method: "POST",
      url: `/admin/v1/Accounts/${tn.accountSid}/CancelQueued`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(queued.statusCode, queued.body).toBe(200);
    expect(await balance(tn)).toBe("1.00");
    const { entries } = await listBalanceEntries(em(), tn.accountSid, 20, 0);
    expect(entries.filter((e) => e.type === "Refund").map((e) => [e.messageSid, formatMoney(e.amount)])).toEqual([
      [b, "0.07"],
      [c, "0.0525"],
      [a, "0.0525"],
    ]);
  });

  it("DEFAULT_RATE_CARD prices an account that names no card, and PriceUnit is BILLING_CURRENCY", async () => {
    const other = await createTestApp({ db, config: { billing: { currency: "NZD", defaultRateCard: "retail" } } });
    try {
      const tn = await createTenant(other.app);
      const res = await other.app.inject({
        method: "POST",
        url: `/v2/Properties/${tn.propertySid}/Messages`,
        headers: { authorization: tn.auth },
        payload: { From: tn.ownedNumber, To: AU_LANDLINE, Text: "hello" },
      });
      expect(res.statusCode, res.body).toBe(200);
      const rec = (await other.app.inject({ method: "GET", url: `/v2/Messages/${res.json().MessageSid}`, headers: { authorization: tn.auth } })).json();
      expect([rec.Price, rec.PriceUnit]).toEqual(["0.07", "NZD"]);
      const uk = await other.app.inject({
        method: "POST",
        url: `/v2/Properties/${tn.propertySid}/Messages`,
        headers: { authorization: tn.auth },
        payload: { From: tn.ownedNumber, To: UK, Text: "hello" },
      });
      expect([uk.statusCode, uk.json().ResponseStatus.ErrorCode]).toEqual([400, "DestinationNotAllowed"]);
    } finally {
      await other.close();
    }
  });
});
