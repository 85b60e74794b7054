/**
 * The BalanceLow webhook is sent once per crossing whatever the number of processes
 * (docs/billing.md#low-balance): two API processes on one PostgreSQL database, each running its
 * own low-balance job and webhook sender, charge one account at once across its threshold; a real
 * HTTP receiver gets exactly one signed BalanceLow. PostgreSQL only (PGlite is one process's database).
 */
import type { MikroORM } from "@mikro-orm/sql";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addBalanceEntry, balanceOf, ledgerSum, lowBalanceStateOf } from "../../src/billing/balance-store.js";
import { parseMoney } from "../../src/common/money.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { dbKind } from "../support/db.js";
import { freePort } from "../support/kannel.js";
import { type Service, type ServiceDatabase, serviceDatabase, startService } from "../support/service.js";
import { startReceiver, type Receiver } from "../support/webhook-receiver.js";

const ADMIN = "low-balance-two-process-admin-token-0123";
const skip = dbKind() !== "postgres";

describe.skipIf(skip)("the BalanceLow webhook across two API processes (postgres)", () => {
  let db: ServiceDatabase;
  let orm: MikroORM;
  let rx: Receiver;
  const apis: Service[] = [];

  beforeAll(async () => {
    rx = await startReceiver();
    db = await serviceDatabase();
    // The receiver listens on 127.0.0.1: private targets allowed.
    const env = {
      DATABASE_URL: db.url,
      SWITCHBOARD_ADMIN_TOKEN: ADMIN,
      LOG_LEVEL: "warn",
      SEND_RATE_LIMIT: "off",
      SENDER_ID_REGISTRATION: "none",
      WEBHOOK_ALLOW_PRIVATE: "true",
    };
    apis.push(...(await Promise.all([startService({ port: await freePort(), env }), startService({ port: await freePort(), env })])));
    orm = await db.open();
  }, 180_000);

  afterAll(async () => {
    await Promise.all(apis.map((s) => s.kill("SIGKILL")));
    await orm?.close(true);
    await db?.drop();
    await rx?.close();
  });

  const call = (base: string, method: string, path: string, auth: string, body?: object) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: auth, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });

  it("60 sends at once through both processes across the threshold: one BalanceLow, signed, with a balance below it", async () => {
    const op = `Bearer ${ADMIN}`;
    const base = apis[0].base;
    expect((await call(base, "PUT", "/admin/v1/RateCards/retail", op, { Rates: [{ Prefix: "+61", PricePerSegment: "0.05" }] })).status).toBe(200);
    const acc = (await (await call(base, "POST", "/admin/v1/Accounts", op, { Name: "Low" })).json()) as {
      AccountSid: string;
      Token: string;
      WebhookSecret: string;
    };
    const prop = (await (await call(base, "POST", `/admin/v1/Accounts/${acc.AccountSid}/Properties`, op, { Name: "Site" })).json()) as { PropertySid: string };
    const set = await call(base, "POST", `/admin/v1/Accounts/${acc.AccountSid}`, op, {
      RateCard: "retail",
      LowBalanceThreshold: "1.00",
      LowBalanceWebhookUri: rx.url("/low"),
    });
    expect(set.status, await set.text()).toBe(200);
    await orm.em.fork().transactional((tx) => addBalanceEntry(tx, acc.AccountSid, "TopUp", parseMoney("Amount", "2.00"), "test", new Date()));
    const auth = `Basic ${Buffer.from(`${acc.AccountSid}:${acc.Token}`).toString("base64")}`;

    // Postpaid without a limit: all 60 are charged, 2.00 − 3.00 = −1.00; the threshold is crossed once.
    const statuses = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        call(apis[i % 2].base, "POST", `/v2/Properties/${prop.PropertySid}/Messages`, auth, {
          From: "Acme",
          To: `+614123${String(i).padStart(5, "0")}`,
          Text: "hi",
        }).then((r) => r.status),
      ),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(60);
    const em = orm.em.fork();
    expect(await balanceOf(em, acc.AccountSid)).toBe(parseMoney("Balance", "-1.00", { signed: true }));
    expect(await ledgerSum(em, acc.AccountSid)).toBe(await balanceOf(em, acc.AccountSid));

    // Both processes' jobs look every second: wait for the call, then long enough for a second one to show.
    for (const until = Date.now() + 15_000; rx.requests.filter((r) => r.url === "/low").length === 0 && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 3000));
    const got = rx.requests.filter((r) => r.url === "/low");
    expect(got).toHaveLength(1);
    const payload = new Webhook(acc.WebhookSecret).verify(got[0].body, got[0].headers) as Record<string, unknown>;
    expect(Object.keys(payload).sort()).toStrictEqual(["AccountSid", "Balance", "LowBalanceThreshold", "PriceUnit", "Timestamp", "Type"]);
    expect(payload).toMatchObject({ Type: "BalanceLow", AccountSid: acc.AccountSid, LowBalanceThreshold: "1.00", PriceUnit: "AUD" });
    // The balance right after the charge that crossed: one of the ledger's, below the threshold.
    const balance = parseMoney("Balance", String(payload.Balance), { signed: true });
    expect(balance < parseMoney("Threshold", "1.00")).toBe(true);
    const [{ n }] = await executeBound<{ n: number }>(
      em,
      "select count(*)::int as n from balance_ledger where account_sid = ? and type = 'Charge' and balance_after = ?::bigint",
      [acc.AccountSid, balance.toString()],
    );
    expect(n).toBe(1);
    expect(await lowBalanceStateOf(em, acc.AccountSid)).toBe("Sent");
    const [{ calls }] = await executeBound<{ calls: number }>(em, "select count(*)::int as calls from webhook_deliveries where event_type = 'BalanceLow'", []);
    expect(calls).toBe(1);
  }, 90_000);
});
