/**
 * The charge is exact whatever the number of processes (docs/billing.md#the-charge-on-the-send):
 * two API processes on one PostgreSQL database, many clients at once, alternating between them,
 * against a Prepaid balance that covers exactly 50 sends: single sends, batch sends and
 * Idempotency-Key replays each store and charge exactly 50, answer every other send 402
 * InsufficientFunds, and leave the balance at exactly 0.00 and equal to its ledger. PostgreSQL only
 * (PGlite is one process's database). The two processes are started once for all three.
 */
import type { MikroORM } from "@mikro-orm/sql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addBalanceEntry, balanceOf, ledgerSum } from "../../src/billing/balance-store.js";
import { formatMoney } from "../../src/common/money.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { dbKind } from "../support/db.js";
import { freePort } from "../support/kannel.js";
import { type Service, type ServiceDatabase, serviceDatabase, startService } from "../support/service.js";

const ADMIN = "two-process-charge-admin-token-0123456789";
const skip = dbKind() !== "postgres";
/** The card's one rate: every send below is one segment to +61, so costs exactly this. */
const PRICE = 52_500n;
/** The balance each account starts with: exactly 50 sends. */
const FOR_50 = 50n * PRICE;

type Answer = { status: number; body: Record<string, unknown> };
type Item = { MessageSid?: string; ResponseStatus?: { ErrorCode: string } };

describe.skipIf(skip)("the charge across two API processes (postgres)", () => {
  let db: ServiceDatabase;
  let orm: MikroORM;
  const apis: Service[] = [];
  const op = `Bearer ${ADMIN}`;

  beforeAll(async () => {
    db = await serviceDatabase();
    const env = { DATABASE_URL: db.url, SWITCHBOARD_ADMIN_TOKEN: ADMIN, LOG_LEVEL: "warn", SEND_RATE_LIMIT: "off", SENDER_ID_REGISTRATION: "none" };
    apis.push(...(await Promise.all([startService({ port: await freePort(), env }), startService({ port: await freePort(), env })])));
    orm = await db.open();
    expect((await call(apis[0].base, "PUT", "/admin/v1/RateCards/retail", op, { Rates: [{ Prefix: "+61", PricePerSegment: "0.0525" }] })).status).toBe(200);
  }, 180_000);

  afterAll(async () => {
    await Promise.all(apis.map((s) => s.kill("SIGKILL")));
    await orm?.close(true);
    await db?.drop();
  });

  const call = (base: string, method: string, path: string, auth: string, body?: object, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: auth, ...(body ? { "content-type": "application/json" } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
    });
  const answer = async (r: Response): Promise<Answer> => ({ status: r.status, body: (await r.json()) as Record<string, unknown> });

  /** A new Prepaid account on card "retail" with a balance for exactly 50 sends: its auth and property. */
  async function prepaidFor50(): Promise<{ accountSid: string; auth: string; propertySid: string }> {
    const acc = (await (await call(apis[0].base, "POST", "/admin/v1/Accounts", op, { Name: "Prepaid" })).json()) as { AccountSid: string; Token: string };
    const prop = (await (await call(apis[1].base, "POST", `/admin/v1/Accounts/${acc.AccountSid}/Properties`, op, { Name: "Site" })).json()) as {
      PropertySid: string;
    };
    const set = await call(apis[0].base, "POST", `/admin/v1/Accounts/${acc.AccountSid}`, op, { RateCard: "retail", BillingMode: "Prepaid" });
    expect(set.status).toBe(200);
    await orm.em.fork().transactional((tx) => addBalanceEntry(tx, acc.AccountSid, "TopUp", FOR_50, "test", new Date()));
    return { accountSid: acc.AccountSid, auth: `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}`, propertySid: prop.PropertySid };
  }

  /**
   * After a race: the balance exactly 0.00 and the sum of its ledger; exactly `sids` stored, each
   * charged once, exactly the price; no other entry than the top-up and those charges.
   */
  async function expectExactly50(accountSid: string, sids: string[]): Promise<void> {
    expect(new Set(sids).size).toBe(50);
    const em = orm.em.fork();
    expect(formatMoney(await balanceOf(em, accountSid))).toBe("0.00");
    expect(await ledgerSum(em, accountSid)).toBe(0n);
    const stored = await executeBound<{ sid: string; price: string }>(em, "select sid, price::text as price from messages where account_sid = ?", [accountSid]);
    expect(stored.map((m) => m.sid).sort()).toEqual([...sids].sort());
    expect(stored.every((m) => BigInt(m.price) === PRICE)).toBe(true);
    const entries = await executeBound<{ type: string; amount: string; message_sid: string | null }>(
      em,
      "select type, amount::text as amount, message_sid from balance_ledger where account_sid = ?",
      [accountSid],
    );
    const charges = entries.filter((e) => e.type === "Charge");
    expect(charges).toHaveLength(50);
    expect(charges.every((e) => BigInt(e.amount) === -PRICE)).toBe(true);
    expect(charges.map((e) => e.message_sid).sort()).toEqual([...sids].sort());
    expect(entries.filter((e) => e.type !== "Charge").map((e) => [e.type, formatMoney(BigInt(e.amount))])).toEqual([["TopUp", formatMoney(FOR_50)]]);
  }

  it("200 sends at once, alternating between the processes, against a balance for exactly 50: 50 stored and charged, 150 refused 402, balance 0.00", async () => {
    const a = await prepaidFor50();
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        call(apis[i % 2].base, "POST", `/v2/Properties/${a.propertySid}/Messages`, a.auth, {
          From: "Acme",
          To: `+614123${String(i).padStart(5, "0")}`,
          Text: "hi",
        }).then(answer),
      ),
    );
    const ok = answers.filter((r) => r.status === 200);
    expect(ok).toHaveLength(50);
    expect(answers.filter((r) => r.status === 402 && (r.body.ResponseStatus as { ErrorCode: string }).ErrorCode === "InsufficientFunds")).toHaveLength(150);
    await expectExactly50(
      a.accountSid,
      ok.map((r) => r.body.MessageSid as string),
    );
  }, 60_000);

  it("40 batches of 6 at once, alternating: 50 items stored in all; each batch refuses only its items that did not fit, in order", async () => {
    const a = await prepaidFor50();
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, b) =>
        call(apis[b % 2].base, "POST", `/v2/Properties/${a.propertySid}/BatchMessages`, a.auth, {
          Messages: Array.from({ length: 6 }, (_, i) => ({ From: "Acme", To: `+614124${String(b * 6 + i).padStart(5, "0")}`, Text: "hi" })),
        }).then(answer),
      ),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(40).fill(200));
    const batches = answers.map((r) => r.body.Messages as Item[]);
    const codes = batches.map((items) => items.map((m) => (m.MessageSid ? "OK" : m.ResponseStatus!.ErrorCode)));
    // The batches take the balance row's lock one at a time: 8 found room for all six (48 sends),
    // the ninth for its first two only (the equal prices make its refusals a suffix), the others for none.
    const accepted = codes.map((c) => c.filter((x) => x === "OK").length).sort((x, y) => y - x);
    expect(accepted).toEqual([...Array(8).fill(6), 2, ...Array(31).fill(0)]);
    for (const c of codes) {
      const n = c.filter((x) => x === "OK").length;
      expect(c).toEqual([...Array(n).fill("OK"), ...Array(6 - n).fill("InsufficientFunds")]);
    }
    await expectExactly50(
      a.accountSid,
      batches.flat().flatMap((m) => (m.MessageSid ? [m.MessageSid] : [])),
    );
  }, 60_000);

  it("100 Idempotency-Keys each sent twice at once, once through each process: 50 charged once each, a replay never charged, both answers the same", async () => {
    const a = await prepaidFor50();
    const sendKeyed = (k: number, api: number) =>
      call(
        apis[api].base,
        "POST",
        `/v2/Properties/${a.propertySid}/Messages`,
        a.auth,
        { From: "Acme", To: `+614125${String(k).padStart(5, "0")}`, Text: "hi" },
        { "idempotency-key": `race-${k}` },
      ).then(answer);
    const pairs = await Promise.all(Array.from({ length: 100 }, (_, k) => Promise.all([sendKeyed(k, k % 2), sendKeyed(k, (k + 1) % 2)])));
    const outcome = (r: Answer) =>
      r.status === 200 ? `200 ${r.body.MessageSid}` : `${r.status} ${(r.body.ResponseStatus as { ErrorCode: string }).ErrorCode}`;
    // Each key answered the same both times: the same Message, or (never stored) 402 both times.
    for (const [first, second] of pairs) expect(outcome(second)).toBe(outcome(first));
    const ok = pairs.filter(([first]) => first.status === 200);
    expect(ok).toHaveLength(50);
    expect(pairs.filter(([first]) => first.status === 402 && outcome(first) === "402 InsufficientFunds")).toHaveLength(50);
    await expectExactly50(
      a.accountSid,
      ok.map(([first]) => first.body.MessageSid as string),
    );
    const [{ n }] = await executeBound<{ n: number }>(orm.em.fork(), "select count(*)::int as n from idempotency_keys where account_sid = ?", [a.accountSid]);
    expect(n).toBe(50);
  }, 60_000);
});
