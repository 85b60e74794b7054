/**
 * The charge is exact whatever the number of processes (docs/billing.md#the-charge-on-the-send):
 * two API processes on one PostgreSQL database, many clients at once against a Prepaid balance
 * that covers exactly 19 sends: 19 stored and charged, every other answered 402, the balance to
 * the micro-unit and equal to its ledger. PostgreSQL only (PGlite is one process's database).
 */
import type { MikroORM } from "@mikro-orm/sql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addBalanceEntry, balanceOf, ledgerSum } from "../../src/billing/balance-store.js";
import { formatMoney, parseMoney } from "../../src/common/money.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { dbKind } from "../support/db.js";
import { freePort } from "../support/kannel.js";
import { type Service, type ServiceDatabase, serviceDatabase, startService } from "../support/service.js";

const ADMIN = "two-process-charge-admin-token-0123456789";
const skip = dbKind() !== "postgres";

describe.skipIf(skip)("the charge across two API processes (postgres)", () => {
  let db: ServiceDatabase;
  let orm: MikroORM;
  const apis: Service[] = [];

  beforeAll(async () => {
    db = await serviceDatabase();
    const env = { DATABASE_URL: db.url, SWITCHBOARD_ADMIN_TOKEN: ADMIN, LOG_LEVEL: "warn", SEND_RATE_LIMIT: "off", SENDER_ID_REGISTRATION: "none" };
    apis.push(...(await Promise.all([startService({ port: await freePort(), env }), startService({ port: await freePort(), env })])));
    orm = await db.open();
  }, 180_000);

  afterAll(async () => {
    await Promise.all(apis.map((s) => s.kill("SIGKILL")));
    await orm?.close(true);
    await db?.drop();
  });

  const call = (base: string, method: string, path: string, auth: string, body?: object) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: auth, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });

  it("80 sends at once through both processes against a balance for exactly 19: 19 stored, 61 refused 402, not a micro-unit past it", async () => {
    const op = `Bearer ${ADMIN}`;
    const base = apis[0].base;
    expect((await call(base, "PUT", "/admin/v1/RateCards/retail", op, { Rates: [{ Prefix: "+61", PricePerSegment: "0.0525" }] })).status).toBe(200);
    const acc = (await (await call(base, "POST", "/admin/v1/Accounts", op, { Name: "Prepaid" })).json()) as { AccountSid: string; Token: string };
    const prop = (await (await call(base, "POST", `/admin/v1/Accounts/${acc.AccountSid}/Properties`, op, { Name: "Site" })).json()) as { PropertySid: string };
    await executeBound(orm.em.fork(), "update accounts set rate_card = 'retail', billing_mode = 'Prepaid' where sid = ?", [acc.AccountSid]);
    // 19 × 0.0525 = 0.9975: the twentieth does not fit.
    await orm.em.fork().transactional((tx) => addBalanceEntry(tx, acc.AccountSid, "TopUp", parseMoney("Amount", "1.00"), "test", new Date()));
    const auth = `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}`;

    const statuses = await Promise.all(
      Array.from({ length: 80 }, (_, i) =>
        call(apis[i % 2].base, "POST", `/v2/Properties/${prop.PropertySid}/Messages`, auth, {
          From: "Acme",
          To: `+614123${String(i).padStart(5, "0")}`,
          Text: "hi",
        }).then(
          async (r) => [r.status, r.status === 402 ? ((await r.json()) as { ResponseStatus: { ErrorCode: string } }).ResponseStatus.ErrorCode : ""] as const,
        ),
      ),
    );
    expect(statuses.filter(([s]) => s === 200)).toHaveLength(19);
    expect(statuses.filter(([s, code]) => s === 402 && code === "InsufficientFunds")).toHaveLength(61);
    const em = orm.em.fork();
    expect(formatMoney(await balanceOf(em, acc.AccountSid))).toBe("0.0025");
    expect(await ledgerSum(em, acc.AccountSid)).toBe(await balanceOf(em, acc.AccountSid));
    const [{ n, priced }] = await executeBound<{ n: number; priced: string }>(
      em,
      "select count(*)::int as n, sum(price)::text as priced from messages where account_sid = ?",
      [acc.AccountSid],
    );
    expect([n, formatMoney(BigInt(priced))]).toEqual([19, "0.9975"]);
  }, 60_000);
});
