/**
 * Usage statements (docs/billing.md#usage): GET /v2/Accounts/{AccountSid}/Usage by day and by
 * country, in JSON and CSV, exact to the micro-unit; UTC day boundaries at the exact second
 * (EndDate included); refunds deducted (a refunded message counts, with price 0); received
 * messages left out; every refusal a 400 naming its field; another account's Sid a 404. The
 * operator's GET /admin/v1/Usage with Cost and Margin by account and by carrier. The rollup job:
 * the same answers before and after it, idempotent, holding back a day with a queued message, and
 * the statement surviving the retention purge that deletes the messages. A generated month
 * (generate_series) answers exactly, live and rolled up.
 */
import { parseMoney } from "../../src/common/money.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUsageRollup } from "../../src/billing/usage-rollup.js";
import { createRetentionPurge } from "../../src/delivery/retention.js";
import { formatMoney } from "../../src/common/money.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const BEARER = `Bearer ${ADMIN_TOKEN}`;
const DAY = 86_400_000;

let t: TestApp;
let a: Tenant;
let b: Tenant;
let seq = 0;

beforeAll(async () => {
  t = await createTestApp({ now: new Date("2026-11-20T12:00:00Z") });
  a = await createTenant(t.app);
  b = await createTenant(t.app);
});
afterAll(async () => {
  await t?.close();
});

interface Seed {
  tenant: Tenant;
  at: string;
  to: string;
  segments?: number;
  /** Micro-units; undefined: unpriced. */
  price?: number;
  cost?: number | null;
  carrier?: string;
  direction?: "Transmit" | "Receive";
  status?: string;
  refunded?: boolean;
}

/** Stores messages as the send path would have (the columns usage reads), with their Refund entries. */
async function seed(rows: Seed[]): Promise<string[]> {
  const em = t.db.orm.em.fork();
  const sids: string[] = [];
  for (const r of rows) {
    const sid = `MG${String(++seq).padStart(30, "0")}`;
    sids.push(sid);
    const status = r.status ?? (r.direction === "Receive" ? "Received" : "Delivered");
    await em.execute(
      `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at, created_at, price, cost, carrier)
       values (?, ?, ?, ?, ?, '+61400000000', ?, 'x', 'GSM7', ?, ?, ?, ?, ?, ?)`,
      [
        sid,
        r.tenant.accountSid,
        r.tenant.propertySid,
        r.direction ?? "Transmit",
        status,
        r.to,
        r.segments ?? 1,
        r.at,
        r.at,
        r.price ?? null,
        r.cost ?? null,
        r.carrier ?? "",
      ],
    );
    if (r.refunded) {
      await em.execute(
        `insert into balance_entries (account_sid, type, amount, balance_after, message_sid, reference, created_at) values (?, 'Refund', ?, 0, ?, '', ?)`,
        [r.tenant.accountSid, r.price ?? 0, sid, r.at],
      );
    }
  }
  return sids;
}

function get(url: string, authorization: string, accept?: string) {
  return t.app.inject({ method: "GET", url, headers: { authorization, ...(accept ? { accept } : {}) } });
}

async function usage(tenant: Tenant, query: string, accept?: string) {
  const res = await get(`/v2/Accounts/${tenant.accountSid}/Usage?${query}`, tenant.auth, accept);
  expect(res.statusCode, res.body).toBe(200);
  return res;
}

async function operatorUsage(query: string, accept?: string) {
  const res = await get(`/admin/v1/Usage?${query}`, BEARER, accept);
  expect(res.statusCode, res.body).toBe(200);
  return res;
}

/** The 400 of field problems, as every wire writes it. */
function refused(...problems: [string, string, string?][]) {
  const errors = problems.map(([field, message, code]) => ({ FieldName: field, ErrorCode: code ?? "InvalidParameter", Message: message }));
  return { ResponseStatus: { ErrorCode: errors[0].ErrorCode, Message: errors.map((e) => e.Message).join(" "), Errors: errors } };
}

describe("an account's usage", () => {
  beforeAll(async () => {
    await seed([
      // 2026-11-01: the day's last second, an AU and a US message, one refunded.
      { tenant: a, at: "2026-11-01T00:00:00Z", to: "+61412345678", segments: 2, price: 105_000, cost: 40_000, carrier: "alpha" },
      {
        tenant: a,
        at: "2026-11-01T23:59:59.999Z",
        to: "+14155550100",
        segments: 1,
        price: 70_000,
        cost: 30_000,
        carrier: "beta",
        refunded: true,
        status: "Failed",
      },
      // 2026-11-02 at its first instant: a Canadian number (+1 416) and Jersey's (+44 7797), Guernsey's.
      { tenant: a, at: "2026-11-02T00:00:00Z", to: "+14165550100", segments: 3, price: 150_001, cost: null, carrier: "alpha" },
      { tenant: a, at: "2026-11-02T10:00:00Z", to: "+447797123456", segments: 1, price: 1, cost: 2, carrier: "alpha" },
      // Unpriced (sent before a card), and a non-geographic number: country "".
      { tenant: a, at: "2026-11-02T11:00:00Z", to: "+80012345678", segments: 1 },
      // 2026-11-03 at midnight: outside EndDate=2026-11-02.
      { tenant: a, at: "2026-11-03T00:00:00Z", to: "+61412345678", segments: 1, price: 50_000, carrier: "alpha" },
      // Received messages are not usage.
      { tenant: a, at: "2026-11-02T12:00:00Z", to: a.ownedNumber, direction: "Receive" },
      // Another account's.
      { tenant: b, at: "2026-11-02T12:00:00Z", to: "+61412345678", segments: 5, price: 500_000, cost: 100_000, carrier: "beta" },
    ]);
  });

  const byDay = {
    Usage: [
      { Date: "2026-11-01", Messages: 2, Segments: 3, Price: "0.105" },
      { Date: "2026-11-02", Messages: 3, Segments: 5, Price: "0.150002" },
    ],
    PriceUnit: "AUD",
  };
  const byCountry = {
    Usage: [
      { Country: "", Messages: 1, Segments: 1, Price: "0.00" },
      { Country: "AU", Messages: 1, Segments: 2, Price: "0.105" },
      { Country: "CA", Messages: 1, Segments: 3, Price: "0.150001" },
      { Country: "JE", Messages: 1, Segments: 1, Price: "0.000001" },
      { Country: "US", Messages: 1, Segments: 1, Price: "0.00" },
    ],
    PriceUnit: "AUD",
  };

  it("by day (the default): UTC days, EndDate included, a refunded message counted with price 0, received ones left out", async () => {
    expect((await usage(a, "StartDate=2026-11-01&EndDate=2026-11-02")).json()).toStrictEqual(byDay);
    expect((await usage(a, "StartDate=2026-11-01&EndDate=2026-11-02&GroupBy=Day")).json()).toStrictEqual(byDay);
    // One day at a time: each boundary at its exact instant.
    expect((await usage(a, "StartDate=2026-11-02&EndDate=2026-11-02")).json().Usage).toStrictEqual([byDay.Usage[1]]);
    expect((await usage(a, "StartDate=2026-11-03&EndDate=2026-11-03")).json().Usage).toStrictEqual([
      { Date: "2026-11-03", Messages: 1, Segments: 1, Price: "0.05" },
    ]);
    expect((await usage(a, "StartDate=2026-10-01&EndDate=2026-10-31")).json()).toStrictEqual({ Usage: [], PriceUnit: "AUD" });
  });

  it('by country, in code order ("" for a number of no country)', async () => {
    expect((await usage(a, "StartDate=2026-11-01&EndDate=2026-11-02&GroupBy=Country")).json()).toStrictEqual(byCountry);
  });

  it("Accept: text/csv gives the same rows as CSV, with the header of the grouping", async () => {
    const day = await usage(a, "StartDate=2026-11-01&EndDate=2026-11-02", "text/csv");
    expect(day.headers["content-type"]).toBe("text/csv; charset=utf-8");
    expect(day.headers.vary).toBe("Accept");
    expect(day.body).toBe("Date,Messages,Segments,Price\r\n2026-11-01,2,3,0.105\r\n2026-11-02,3,5,0.150002\r\n");
    const country = await usage(a, "StartDate=2026-11-01&EndDate=2026-11-02&GroupBy=Country", "text/csv;q=0.9, application/json;q=0.5");
    expect(country.body).toBe("Country,Messages,Segments,Price\r\n,1,1,0.00\r\nAU,1,2,0.105\r\nCA,1,3,0.150001\r\nJE,1,1,0.000001\r\nUS,1,1,0.00\r\n");
    const empty = await usage(a, "StartDate=2026-10-01&EndDate=2026-10-01", "text/csv");
    expect(empty.body).toBe("Date,Messages,Segments,Price\r\n");
    // JSON preferred, or no CSV asked: JSON.
    for (const accept of ["application/json, text/csv;q=0.5", "*/*", "application/json"]) {
      const res = await usage(a, "StartDate=2026-11-01&EndDate=2026-11-02", accept);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.json()).toStrictEqual(byDay);
    }
    // An error stays JSON.
    const bad = await get(`/v2/Accounts/${a.accountSid}/Usage?StartDate=x&EndDate=2026-11-02`, a.auth, "text/csv");
    expect(bad.statusCode).toBe(400);
    expect(bad.headers["content-type"]).toMatch(/^application\/json/);
  });

  it("refuses bad days and groupings with a 400 naming each field", async () => {
    const cases: [string, ReturnType<typeof refused>][] = [
      ["EndDate=2026-11-02", refused(["StartDate", "StartDate is required: a UTC day, YYYY-MM-DD.", "MissingParameter"])],
      [
        "StartDate=2026-11-31&EndDate=2026-1-2",
        refused(
          ["StartDate", 'StartDate must be a UTC day, YYYY-MM-DD; got "2026-11-31".'],
          ["EndDate", 'EndDate must be a UTC day, YYYY-MM-DD; got "2026-1-2".'],
        ),
      ],
      ["StartDate=2026-11-02&EndDate=2026-11-01", refused(["EndDate", 'EndDate must not be before StartDate (2026-11-02); got "2026-11-01".'])],
      ["StartDate=2026-01-01&EndDate=2027-01-03", refused(["EndDate", 'EndDate must be at most 366 days after StartDate; got "2027-01-03".'])],
      ["StartDate=2026-11-01&EndDate=2026-11-02&GroupBy=day", refused(["GroupBy", 'GroupBy must be Day or Country; got "day".'])],
      ["StartDate=2026-11-01&EndDate=2026-11-02&GroupBy=Account", refused(["GroupBy", 'GroupBy must be Day or Country; got "Account".'])],
    ];
    for (const [query, body] of cases) {
      const res = await get(`/v2/Accounts/${a.accountSid}/Usage?${query}`, a.auth);
      expect(res.statusCode, query).toBe(400);
      expect(res.json(), query).toStrictEqual(body);
    }
    // 366 days after is the longest.
    expect((await usage(a, "StartDate=2026-01-01&EndDate=2027-01-02")).json().Usage).toHaveLength(3);
  });

  it("another account's Sid (or an unknown one) is a 404, as on every /v2 account path", async () => {
    for (const sid of [b.accountSid, "AC000000000000000000000000000000", "nope"]) {
      const res = await get(`/v2/Accounts/${sid}/Usage?StartDate=2026-11-01&EndDate=2026-11-02`, a.auth);
      expect(res.statusCode).toBe(404);
      expect(res.json().ResponseStatus.ErrorCode).toBe("NotFound");
    }
  });

  it("the operator's usage: Cost and Margin by account and by carrier, one account or every one, as CSV too", async () => {
    const days = "StartDate=2026-11-01&EndDate=2026-11-02";
    const accounts = [
      { AccountSid: a.accountSid, Messages: 5, Segments: 8, Price: "0.255002", Cost: "0.070002", Margin: "0.185" },
      { AccountSid: b.accountSid, Messages: 1, Segments: 5, Price: "0.50", Cost: "0.10", Margin: "0.40" },
    ].sort((x, y) => (x.AccountSid < y.AccountSid ? -1 : 1));
    expect((await operatorUsage(days)).json()).toStrictEqual({ Usage: accounts, PriceUnit: "AUD" });
    expect((await operatorUsage(`${days}&GroupBy=Account&AccountSid=${b.accountSid}`)).json()).toStrictEqual({
      Usage: [accounts.find((r) => r.AccountSid === b.accountSid)],
      PriceUnit: "AUD",
    });
    expect((await operatorUsage(`${days}&GroupBy=Carrier`)).json()).toStrictEqual({
      Usage: [
        // Never handed to a carrier: "", no cost.
        { Carrier: "", Messages: 1, Segments: 1, Price: "0.00", Cost: "0.00", Margin: "0.00" },
        { Carrier: "alpha", Messages: 3, Segments: 6, Price: "0.255002", Cost: "0.040002", Margin: "0.215" },
        // A refunded message's cost is still the operator's: a negative margin is shown as it is.
        { Carrier: "beta", Messages: 2, Segments: 6, Price: "0.50", Cost: "0.13", Margin: "0.37" },
      ],
      PriceUnit: "AUD",
    });
    expect((await operatorUsage(`${days}&GroupBy=Carrier&AccountSid=${a.accountSid}`)).json().Usage.find((r: any) => r.Carrier === "beta")).toStrictEqual({
      Carrier: "beta",
      Messages: 1,
      Segments: 1,
      Price: "0.00",
      Cost: "0.03",
      Margin: "-0.03",
    });
    const csv = await operatorUsage(`${days}&GroupBy=Carrier`, "text/csv");
    expect(csv.body).toBe(
      "Carrier,Messages,Segments,Price,Cost,Margin\r\n,1,1,0.00,0.00,0.00\r\nalpha,3,6,0.255002,0.040002,0.215\r\nbeta,2,6,0.50,0.13,0.37\r\n",
    );
    const none = await operatorUsage("StartDate=2026-10-01&EndDate=2026-10-02", "text/csv");
    expect(none.body).toBe("AccountSid,Messages,Segments,Price,Cost,Margin\r\n");
    // By day (the console's chart): every account's messages per UTC day, in date order, summing to the same totals.
    const byDay = (await operatorUsage(`${days}&GroupBy=Day`)).json().Usage as {
      Date: string;
      Messages: number;
      Segments: number;
      Price: string;
      Cost: string;
    }[];
    expect(byDay.map((r) => r.Date)).toStrictEqual(["2026-11-01", "2026-11-02"].filter((d) => byDay.some((r) => r.Date === d)));
    for (const r of byDay) expect(Object.keys(r).sort()).toStrictEqual(["Cost", "Date", "Margin", "Messages", "Price", "Segments"]);
    const micros = (m: string) => parseMoney("Price", m);
    expect(byDay.reduce((n, r) => n + r.Messages, 0)).toBe(6);
    expect(byDay.reduce((n, r) => n + r.Segments, 0)).toBe(13);
    expect(byDay.reduce((n, r) => n + micros(r.Price), 0n)).toBe(755_002n);
    expect(byDay.reduce((n, r) => n + micros(r.Cost), 0n)).toBe(170_002n);
    expect((await operatorUsage(`${days}&GroupBy=Day`, "text/csv")).body.split("\r\n")[0]).toBe("Date,Messages,Segments,Price,Cost,Margin");
  });

  it("the operator's refusals name their fields; an account's token is not the operator's", async () => {
    const res = await get("/admin/v1/Usage?StartDate=2026-11-01&EndDate=2026-11-02&GroupBy=Country&AccountSid=x", BEARER);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toStrictEqual(
      refused(["GroupBy", 'GroupBy must be Account, Carrier or Day; got "Country".'], ["AccountSid", 'AccountSid "x" is not an account.']),
    );
    const unknown = await get("/admin/v1/Usage?StartDate=2026-11-01&EndDate=2026-11-02&AccountSid=AC000000000000000000000000000000", BEARER);
    expect(unknown.json()).toStrictEqual(refused(["AccountSid", 'AccountSid "AC000000000000000000000000000000" is not an account.']));
    expect((await get("/admin/v1/Usage?StartDate=2026-11-01&EndDate=2026-11-02", a.auth)).statusCode).toBe(401);
  });

  it("the rollup: the same answers after it, idempotent, and they survive the retention purge deleting the messages", async () => {
    const before = {
      day: (await usage(a, "StartDate=2026-11-01&EndDate=2026-11-03")).json(),
      country: (await usage(a, "StartDate=2026-11-01&EndDate=2026-11-03&GroupBy=Country")).json(),
      accounts: (await operatorUsage("StartDate=2026-11-01&EndDate=2026-11-03")).json(),
      carriers: (await operatorUsage("StartDate=2026-11-01&EndDate=2026-11-03&GroupBy=Carrier")).json(),
    };
    const rollup = createUsageRollup({ orm: t.db.orm, clock: t.clock, maxDays: 1 });
    expect(await rollup.pass()).toBeGreaterThanOrEqual(2);
    const rows = async () => (await t.db.orm.em.fork().execute<{ n: string }[]>("select count(*)::text as n from usage_days"))[0].n;
    const rolled = await rows();
    expect(Number(rolled)).toBeGreaterThan(0);
    // Closed hours up to the clock's (2026-11-20 12:00; an hour closes 15 minutes after its end).
    const marks = await t.db.orm.em.fork().execute<{ rolled_until: Date }[]>("select rolled_until from usage_rollups where account_sid = ?", [a.accountSid]);
    expect(new Date(marks[0].rolled_until).toISOString()).toBe("2026-11-20T11:00:00.000Z");
    // Again: nothing to do, nothing written twice.
    expect(await rollup.pass()).toBe(0);
    expect(await rows()).toBe(rolled);
    const after = {
      day: (await usage(a, "StartDate=2026-11-01&EndDate=2026-11-03")).json(),
      country: (await usage(a, "StartDate=2026-11-01&EndDate=2026-11-03&GroupBy=Country")).json(),
      accounts: (await operatorUsage("StartDate=2026-11-01&EndDate=2026-11-03")).json(),
      carriers: (await operatorUsage("StartDate=2026-11-01&EndDate=2026-11-03&GroupBy=Carrier")).json(),
    };
    expect(after).toStrictEqual(before);
    // Retention deletes every message older than a day; the statements stay.
    await admin(t.app, `/admin/v1/Accounts/${a.accountSid}`, { RetentionDays: 1 });
    await admin(t.app, `/admin/v1/Accounts/${b.accountSid}`, { RetentionDays: 1 });
    const purge = createRetentionPurge({ orm: t.db.orm, clock: t.clock, defaultDays: null, pauseMs: 0 });
    expect((await purge.pass()).purged).toBe(8);
    const left = await t.db.orm.em.fork().execute<{ n: string }[]>("select count(*)::text as n from messages where created_at < '2026-11-04'");
    expect(left[0].n).toBe("0");
    expect({
      day: (await usage(a, "StartDate=2026-11-01&EndDate=2026-11-03")).json(),
      country: (await usage(a, "StartDate=2026-11-01&EndDate=2026-11-03&GroupBy=Country")).json(),
      accounts: (await operatorUsage("StartDate=2026-11-01&EndDate=2026-11-03")).json(),
      carriers: (await operatorUsage("StartDate=2026-11-01&EndDate=2026-11-03&GroupBy=Carrier")).json(),
    }).toStrictEqual(before);
  });

  it("a message still queued when its hour is rolled up is read live, and added to its day once it leaves the queue", async () => {
    const c = await createTenant(t.app);
    await seed([
      { tenant: c, at: "2026-11-10T08:00:00Z", to: "+61412345678", price: 50_000, carrier: "alpha", cost: 10_000 },
      { tenant: c, at: "2026-11-12T08:00:00Z", to: "+61412345678", price: 50_000, status: "Scheduled" },
      { tenant: c, at: "2026-11-13T08:00:00Z", to: "+61412345678", price: 50_000, carrier: "alpha", cost: 10_000 },
    ]);
    const statement = async () => (await get(`/v2/Accounts/${c.accountSid}/Usage?StartDate=2026-11-01&EndDate=2026-11-30`, c.auth)).json();
    const charged = {
      Usage: [
        { Date: "2026-11-10", Messages: 1, Segments: 1, Price: "0.05" },
        { Date: "2026-11-12", Messages: 1, Segments: 1, Price: "0.05" },
        { Date: "2026-11-13", Messages: 1, Segments: 1, Price: "0.05" },
      ],
      PriceUnit: "AUD",
    };
    expect(await statement()).toStrictEqual(charged);
    const rollup = createUsageRollup({ orm: t.db.orm, clock: t.clock });
    expect((await rollup.rollUpAccount(c.accountSid))?.toISOString()).toBe("2026-11-20T11:00:00.000Z");
    const em = t.db.orm.em.fork();
    const pending = () => em.execute<{ message_sid: string }[]>("select message_sid from usage_pending where account_sid = ?", [c.accountSid]);
    expect(await pending()).toHaveLength(1);
    expect(await statement()).toStrictEqual(charged);
    // Retention of a day: the settled messages go; the queued one stays (as it always did).
    await admin(t.app, `/admin/v1/Accounts/${c.accountSid}`, { RetentionDays: 1 });
    const purge = createRetentionPurge({ orm: t.db.orm, clock: t.clock, defaultDays: null, pauseMs: 0, usage: rollup });
    expect((await purge.pass()).purged).toBe(2);
    expect(await statement()).toStrictEqual(charged);
    // Canceled and refunded: not yet summed, so the purge keeps it, and it is read live with price 0.
    const [queued] = await pending();
    await em.execute("update messages set status = 'Canceled' where sid = ?", [queued.message_sid]);
    await em.execute(
      "insert into balance_entries (account_sid, type, amount, balance_after, message_sid, reference, created_at) values (?, 'Refund', 50000, 0, ?, '', now())",
      [c.accountSid, queued.message_sid],
    );
    const refunded = { ...charged, Usage: [charged.Usage[0], { ...charged.Usage[1], Price: "0.00" }, charged.Usage[2]] };
    expect(await statement()).toStrictEqual(refunded);
    // The purge's rollup adds it to its day (once), then the purge deletes it.
    expect(await purge.pass()).toMatchObject({ purged: 1 });
    expect(await pending()).toHaveLength(0);
    expect(await statement()).toStrictEqual(refunded);
    await rollup.pass();
    expect(await statement()).toStrictEqual(refunded);
  });

  it("an hour closes USAGE_SETTLE_MS after its end; a day read half rolled up, half live, counts each message once", async () => {
    const d = await createTenant(t.app);
    await seed([
      { tenant: d, at: "2026-11-19T22:30:00Z", to: "+61412345678", price: 2 },
      { tenant: d, at: "2026-11-19T23:59:59Z", to: "+61412345678", price: 1 },
    ]);
    const statement = async () => (await get(`/v2/Accounts/${d.accountSid}/Usage?StartDate=2026-11-19&EndDate=2026-11-20`, d.auth)).json().Usage;
    const whole = [{ Date: "2026-11-19", Messages: 2, Segments: 2, Price: "0.000003" }];
    const rollup = createUsageRollup({ orm: t.db.orm, clock: { now: () => new Date("2026-11-20T00:14:59Z") } });
    expect((await rollup.rollUpAccount(d.accountSid))?.toISOString()).toBe("2026-11-19T23:00:00.000Z");
    expect(await statement()).toStrictEqual(whole);
    const later = createUsageRollup({ orm: t.db.orm, clock: { now: () => new Date("2026-11-20T00:15:00Z") } });
    expect((await later.rollUpAccount(d.accountSid))?.toISOString()).toBe("2026-11-20T00:00:00.000Z");
    expect(await statement()).toStrictEqual(whole);
    // Added to the day's row, hour by hour: one row.
    const rows = await t.db.orm.em
      .fork()
      .execute<{ messages: string }[]>("select messages::text as messages from usage_days where account_sid = ?", [d.accountSid]);
    expect(rows).toStrictEqual([{ messages: "2" }]);
  });
});

describe("a generated month", () => {
  // USAGE_SEED_MESSAGES raises it; the documented 10-million figure is scripts/usage-month.ts's (docs/billing.md#usage).
  const n = Number(process.env.USAGE_SEED_MESSAGES ?? 30_000);
  const recipients = ["+61412345678", "+14155550100", "+14165550100", "+447400123456", "+447797123456", "+33612345678"];
  const countries = ["AU", "US", "CA", "GB", "JE", "FR"];
  const start = Date.parse("2026-10-01T00:00:00Z");
  // Spread evenly over October: message i at start + i * step.
  const step = Math.floor((31 * DAY) / n);

  it(`answers ${n} messages exactly, live and rolled up`, async () => {
    const m = await createTenant(t.app);
    const em = t.db.orm.em.fork();
    let began = Date.now();
    // Message i: recipient i % 6, 1 + i % 3 segments, price 10000 * segments micro-units, cost 3000,
    // refunded when i % 10 == 0.
    await executeBound(
      em,
      `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at, created_at, price, cost, carrier)
       select 'MG' || lpad(i::text, 30, 'G'), ?, ?, 'Transmit', 'Delivered', '+61400000000', (?::text[])[1 + i % 6], 'x', 'GSM7', 1 + i % 3,
              at, at, 10000 * (1 + i % 3), 3000, 'alpha'
         from generate_series(0, ?::int - 1) i,
              lateral (select ?::timestamptz + (i::bigint * ?::bigint) * interval '1 millisecond' as at) t`,
      [m.accountSid, m.propertySid, recipients, n, new Date(start), step],
    );
    await executeBound(
      em,
      `insert into balance_entries (account_sid, type, amount, balance_after, message_sid, reference, created_at)
       select ?, 'Refund', 10000 * (1 + i % 3), 0, 'MG' || lpad(i::text, 30, 'G'), '', now() from generate_series(0, ?::int - 1, 10) i`,
      [m.accountSid, n],
    );
    const seeded = Date.now() - began;
    // The expected sums, message by message.
    const days = new Map<string, { Messages: number; Segments: number; price: bigint }>();
    const byCountry = new Map<string, { Messages: number; Segments: number; price: bigint }>();
    for (let i = 0; i < n; i++) {
      const day = new Date(start + i * step).toISOString().slice(0, 10);
      const segments = 1 + (i % 3);
      const price = i % 10 === 0 ? 0n : BigInt(10000 * segments);
      for (const [map, key] of [
        [days, day],
        [byCountry, countries[i % 6]],
      ] as const) {
        const s = map.get(key) ?? { Messages: 0, Segments: 0, price: 0n };
        s.Messages++;
        s.Segments += segments;
        s.price += price;
        map.set(key, s);
      }
    }
    const rows = (map: Map<string, { Messages: number; Segments: number; price: bigint }>, key: string) =>
      [...map].sort(([x], [y]) => (x < y ? -1 : 1)).map(([k, s]) => ({ [key]: k, Messages: s.Messages, Segments: s.Segments, Price: formatMoney(s.price) }));
    const expected = { day: { Usage: rows(days, "Date"), PriceUnit: "AUD" }, country: { Usage: rows(byCountry, "Country"), PriceUnit: "AUD" } };
    const statement = async () => {
      const t0 = Date.now();
      const day = (await usage(m, "StartDate=2026-10-01&EndDate=2026-10-31")).json();
      const t1 = Date.now();
      const country = (await usage(m, "StartDate=2026-10-01&EndDate=2026-10-31&GroupBy=Country")).json();
      return { got: { day, country }, ms: [t1 - t0, Date.now() - t1] };
    };
    // Read live, a month of messages is a scan of them all: checked up to a million (what the rollup
    // leaves live is an hour or two).
    const live = n <= 1_000_000 ? await statement() : { got: expected, ms: [NaN, NaN] };
    expect(live.got).toStrictEqual(expected);
    began = Date.now();
    await createUsageRollup({ orm: t.db.orm, clock: t.clock }).rollUpAccount(m.accountSid);
    const rolledMs = Date.now() - began;
    const rolled = await statement();
    expect(rolled.got).toStrictEqual(expected);
    console.log(
      `usage of ${n} messages: seeded in ${seeded} ms; live by day ${live.ms[0]} ms, by country ${live.ms[1]} ms; rollup ${rolledMs} ms; rolled up by day ${rolled.ms[0]} ms, by country ${rolled.ms[1]} ms`,
    );
  }, 3_600_000);
});
