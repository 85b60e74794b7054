/**
 * The ledger sums exactly, on the database (docs/billing.md#balances-and-the-ledger): random
 * sequences of priced sends (single, with an Idempotency-Key, in batches), cancels, top-ups and
 * adjustments against one Prepaid account with a CreditLimit, through the app, checked against a
 * model in bigint micro-units. After each step the answer is the model's (200 or 402
 * InsufficientFunds per send, in order in a batch; a cancel refunded once); at the end the balance
 * equals the model, the sum of the ledger, and top-ups + adjustments − charges + refunds; every
 * entry's BalanceAfter is the running sum; each stored message has one Charge of its price, each
 * canceled one exactly one Refund of it. test/common/money.test.ts checks the money functions alone.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatMoney } from "../../src/common/money.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

/** Destinations and their rates on the card: a mobile, a landline. */
const DESTINATIONS = [
  { to: "+61412345678", rate: 52_500n },
  { to: "+61298765432", rate: 70_000n },
] as const;
/** Texts of one, two and three GSM-7 segments. */
const TEXTS = ["x", "x".repeat(161), "x".repeat(307)] as const;
const CREDIT = 150_000n;

const send = fc.record({ dest: fc.integer({ min: 0, max: 1 }), segments: fc.integer({ min: 1, max: 3 }) });
const step = fc.oneof(
  fc.record({ op: fc.constant("send" as const), item: send, keyed: fc.boolean() }),
  fc.record({ op: fc.constant("batch" as const), items: fc.array(send, { minLength: 1, maxLength: 4 }) }),
  fc.record({ op: fc.constant("cancel" as const), pick: fc.nat() }),
  // Often exactly some sends' prices, so that a balance lands on the credit limit's edge.
  fc.record({
    op: fc.constant("topUp" as const),
    micros: fc.oneof(fc.bigInt({ min: 1n, max: 1_000_000n }), fc.constantFrom(52_500n, 70_000n, 105_000n, 210_000n)),
  }),
  fc.record({
    op: fc.constant("adjust" as const),
    micros: fc.bigInt({ min: -400_000n, max: 400_000n }).filter((n) => n !== 0n),
  }),
);

describe(`the ledger sums exactly, whatever the sequence (${dbKind()})`, () => {
  let t: TestApp;
  let keys = 0;
  const op = { authorization: `Bearer ${ADMIN_TOKEN}` };

  beforeAll(async () => {
    t = await createTestApp({ config: { sendRateLimit: 0 } });
    const card = await t.app.inject({
      method: "PUT",
      url: "/admin/v1/RateCards/retail",
      headers: op,
      payload: { Rates: DESTINATIONS.map((d) => ({ Prefix: d.to.slice(0, 4), PricePerSegment: formatMoney(d.rate) })) },
    });
    expect(card.statusCode, card.body).toBe(200);
  });
  afterAll(() => t?.close());

  it("sends, batches, cancels, top-ups and adjustments in any order: balance = model = sum of the ledger, to the micro-unit", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 10 }), async (steps) => {
        const tn: Tenant = await createTenant(t.app);
        await admin(t.app, `/admin/v1/Accounts/${tn.accountSid}`, { RateCard: "retail", BillingMode: "Prepaid", CreditLimit: formatMoney(CREDIT) });
        // Scheduled a day ahead, so that every stored message may be canceled.
        const schedule = Math.floor(t.clock.now().getTime() / 1000) + 86_400;
        const body = (s: { dest: number; segments: number }) => ({
          From: tn.ownedNumber,
          To: DESTINATIONS[s.dest].to,
          Text: TEXTS[s.segments - 1],
          Schedule: schedule,
        });
        const price = (s: { dest: number; segments: number }) => DESTINATIONS[s.dest].rate * BigInt(s.segments);
        let balance = 0n;
        let credits = 0n;
        let charged = 0n;
        let refunded = 0n;
        const stored: { sid: string; price: bigint; canceled: boolean }[] = [];
        /** The model's charge: taken where the balance with the credit covers it. */
        const charge = (p: bigint) => {
          if (balance - p < -CREDIT) return false;
          balance -= p;
          charged += p;
          return true;
        };

        for (const s of steps) {
          if (s.op === "send") {
            const headers = { authorization: tn.auth, ...(s.keyed ? { "idempotency-key": `k${++keys}` } : {}) };
            const res = await t.app.inject({ method: "POST", url: `/v2/Properties/${tn.propertySid}/Messages`, headers, payload: body(s.item) });
            const fits = charge(price(s.item));
            expect(res.statusCode, res.body).toBe(fits ? 200 : 402);
            if (fits) stored.push({ sid: res.json().MessageSid, price: price(s.item), canceled: false });
          } else if (s.op === "batch") {
            const res = await t.app.inject({
              method: "POST",
              url: `/v2/Properties/${tn.propertySid}/BatchMessages`,
              headers: { authorization: tn.auth },
              payload: { Messages: s.items.map(body) },
            });
            expect(res.statusCode, res.body).toBe(200);
            const answers = res.json().Messages as { MessageSid?: string; ResponseStatus?: { ErrorCode: string } }[];
            s.items.forEach((item, i) => {
              // In order: an item that does not fit is refused, the ones after it are still tried.
              const fits = charge(price(item));
              expect(answers[i].MessageSid ? "OK" : answers[i].ResponseStatus!.ErrorCode).toBe(fits ? "OK" : "InsufficientFunds");
              if (fits) stored.push({ sid: answers[i].MessageSid!, price: price(item), canceled: false });
            });
          } else if (s.op === "cancel") {
            if (stored.length === 0) continue;
            const m = stored[s.pick % stored.length];
            const res = await t.app.inject({ method: "DELETE", url: `/v2/Messages/${m.sid}`, headers: { authorization: tn.auth } });
            expect(res.statusCode, res.body).toBe(m.canceled ? 400 : 200);
            if (!m.canceled) {
              m.canceled = true;
              balance += m.price;
              refunded += m.price;
            }
          } else {
            const amount = s.micros;
            const res = await t.app.inject({
              method: "POST",
              url: `/admin/v1/Accounts/${tn.accountSid}/BalanceEntries`,
              headers: op,
              payload: { Type: s.op === "topUp" ? "TopUp" : "Adjustment", Amount: formatMoney(amount) },
            });
            expect(res.statusCode, res.body).toBe(200);
            balance += amount;
            credits += amount;
            expect(res.json().BalanceAfter).toBe(formatMoney(balance));
          }
        }

        const account = (await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${tn.accountSid}`, headers: op })).json();
        expect(account.Balance).toBe(formatMoney(balance));
        expect(balance).toBe(credits - charged + refunded);
        const entries = await executeBound<{ type: string; amount: string; balance_after: string; message_sid: string | null }>(
          t.db.orm.em.fork(),
          "select type, amount::text as amount, balance_after::text as balance_after, message_sid from balance_ledger where account_sid = ? order by row_id, id",
          [tn.accountSid],
        );
        let running = 0n;
        for (const e of entries) {
          running += BigInt(e.amount);
          expect(BigInt(e.balance_after)).toBe(running);
        }
        expect(running).toBe(balance);
        const sum = (type: string) => entries.filter((e) => e.type === type).reduce((n, e) => n + BigInt(e.amount), 0n);
        expect([sum("TopUp") + sum("Adjustment"), -sum("Charge"), sum("Refund")]).toEqual([credits, charged, refunded]);
        const byMessage = (type: string) =>
          entries
            .filter((e) => e.type === type)
            .map((e) => `${e.message_sid} ${BigInt(e.amount)}`)
            .sort();
        expect(byMessage("Charge")).toEqual(stored.map((m) => `${m.sid} ${-m.price}`).sort());
        expect(byMessage("Refund")).toEqual(
          stored
            .filter((m) => m.canceled)
            .map((m) => `${m.sid} ${m.price}`)
            .sort(),
        );
      }),
      { numRuns: dbKind() === "postgres" ? 20 : 10 },
    );
  }, 180_000);
});
