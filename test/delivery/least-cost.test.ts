/**
 * LeastCost (docs/billing.md#carrier-costs-and-least-cost-routing): the ordering rule alone, then
 * the carrier router with stand-in carriers on a database holding the cost cards: the cheapest
 * carrier whose link is up takes the message, a temporary refusal moves it to the next cheapest, a
 * permanent one fails it, and a dispatcher round's costs are looked up in one statement.
 */
import { describe, expect, it, vi } from "vitest";
import { CarrierError, type Carrier, type CarrierStatusInfo, type OutboundSms } from "../../src/delivery/carrier.js";
import { carriersToTry, createCarrierRouter } from "../../src/delivery/carrier-router.js";
import { leastCostOrder } from "../../src/delivery/least-cost.js";
import { insertCarrier } from "../../src/admin/carrier-store.js";
import { replaceRoutes } from "../../src/admin/route-store.js";
import { replaceRates } from "../../src/billing/rate-card-store.js";
import { parseMoney } from "../../src/common/money.js";
import { useTestOrm } from "../support/db.js";
import { statements } from "../support/statement-counter.js";

vi.mock("../../src/db/bound-sql.js", async (original) => (await import("../support/statement-counter.js")).countingBoundSql(await original()));

describe("leastCostOrder", () => {
  const costs: Record<string, bigint | null> = { a: 30n, b: 10n, c: null, d: 20n, e: 10n, f: null };
  const order = (links: string[]) => leastCostOrder(links, (l) => costs[l]);

  it("cheapest first; ties in the route's order", () => {
    expect(order(["a", "b", "d", "e"])).toEqual(["b", "e", "d", "a"]);
    expect(order(["e", "d", "b", "a"])).toEqual(["e", "b", "d", "a"]);
  });

  it("carriers without a cost after every carrier with one, in the route's order", () => {
    expect(order(["f", "a", "c", "b"])).toEqual(["b", "a", "f", "c"]);
    expect(order(["c", "f"])).toEqual(["c", "f"]);
    // An unknown cost (undefined) is no cost.
    expect(leastCostOrder(["x", "a"], (l) => costs[l])).toEqual(["a", "x"]);
  });

  it("compares exactly: costs past 2^53 micro-units", () => {
    expect(leastCostOrder([2n ** 60n + 1n, 2n ** 60n], (c) => c)).toEqual([2n ** 60n, 2n ** 60n + 1n]);
  });
});

describe("carriersToTry with LeastCost", () => {
  const costs: Record<string, bigint | null> = { a: 30n, b: 10n, c: null, d: 20n };
  const costOf = (l: string) => costs[l];

  it("those up, cheapest first; a carrier down is skipped; none up: the cheapest alone", () => {
    const route = { links: ["c", "a", "b", "d"], strategy: "LeastCost" as const, next: 0 };
    expect(carriersToTry(route, () => true, costOf)).toEqual(["b", "d", "a", "c"]);
    expect(carriersToTry(route, (l) => l !== "b", costOf)).toEqual(["d", "a", "c"]);
    expect(carriersToTry(route, () => false, costOf)).toEqual(["b"]);
    // The same every time: LeastCost does not rotate.
    expect(carriersToTry(route, () => true, costOf)).toEqual(["b", "d", "a", "c"]);
  });

  it("without any cost, the route's order (as Failover)", () => {
    expect(carriersToTry({ links: ["c", "a"], strategy: "LeastCost", next: 0 }, () => true)).toEqual(["c", "a"]);
  });
});

interface Fake extends Carrier {
  got: string[];
  link: CarrierStatusInfo["link"];
  answer: (sms: OutboundSms) => Promise<{ carrierRef: string }>;
}

function fake(): Fake {
  const f: Fake = {
    name: "fake",
    got: [],
    link: "Bound",
    answer: async () => ({ carrierRef: "ref" }),
    async submit(sms) {
      f.got.push(sms.messageSid);
      return f.answer(sms);
    },
    status: () => ({ link: f.link, since: null, lastError: "", inFlight: 0, window: 10, tps: 0, queued: 0 }),
    async start() {},
    async stop() {},
  };
  return f;
}

const noEvents = { deliveryReport: async () => undefined, inbound: async () => ({ messageSid: "", inReplyTo: "" }) };
let n = 0;
const sms = (to: string): OutboundSms => ({ messageSid: `MG${++n}`, from: "+1", to, text: "x", deliveryReceipt: true, accountSid: "AC1" });

describe("the router's LeastCost", () => {
  const db = useTestOrm();
  const now = new Date("2026-11-25T12:00:00Z");

  /** Carriers X (card x), Y (card y) and Z (no card), routed LeastCost in that order. */
  async function setUp() {
    const em = db.orm.em.fork();
    await em.execute("delete from routes");
    await em.execute("delete from carriers");
    const rate = (prefix: string, price: string) => ({ prefix, pricePerSegment: parseMoney("Price", price), effectiveFrom: 0 });
    await em.transactional(async (tx) => {
      await replaceRates(tx, "x", [rate("+61", "0.03"), rate("+614", "0.01")], now);
      await replaceRates(tx, "y", [rate("+61", "0.02")], now);
    });
    const fakes = new Map<string, Fake>();
    const sids: string[] = [];
    for (const [name, costCard] of [
      ["Z", null],
      ["X", "x"],
      ["Y", "y"],
    ] as const) {
      const sid = `CR${String(++n).padStart(30, "0")}`;
      await insertCarrier(em, { sid, name, kind: "simulator", url: "", tps: 0, window: 10, systemType: "", costCard, createdAt: now, updatedAt: now });
      sids.push(sid);
      fakes.set(name, fake());
    }
    await em.transactional((tx) => replaceRoutes(tx, [{ prefix: null, accountSid: null, carriers: sids, strategy: "LeastCost" }], now));
    const router = createCarrierRouter({ orm: db.orm, fallback: fake(), build: async (row) => fakes.get(row.name)!, pollMs: 60_000, watchMs: 10 });
    await router.start(noEvents);
    return { router, x: fakes.get("X")!, y: fakes.get("Y")!, z: fakes.get("Z")! };
  }

  it("the cheapest for each destination; without a cost for it, the route's order", async () => {
    const { router } = await setUp();
    expect((await router.submit(sms("+61412345678"))).carrier).toBe("X");
    expect((await router.submit(sms("+61212345678"))).carrier).toBe("Y");
    expect((await router.submit(sms("+447700900001"))).carrier).toBe("Z");
    await router.stop();
  });

  it("skips a carrier whose link is down; a temporary refusal moves on to the next cheapest, a permanent one fails the message", async () => {
    const { router, x, y, z } = await setUp();
    x.link = "Down";
    expect((await router.submit(sms("+61412345678"))).carrier).toBe("Y");
    x.link = "Bound";
    x.answer = async () => {
      throw new CarrierError("busy", "CarrierUnavailable", false);
    };
    const moved = sms("+61412345678");
    expect((await router.submit(moved)).carrier).toBe("Y");
    y.answer = x.answer;
    const last = sms("+61412345678");
    expect((await router.submit(last)).carrier).toBe("Z");
    expect([x.got.includes(last.messageSid), y.got.includes(last.messageSid), z.got.includes(last.messageSid)]).toEqual([true, true, true]);
    x.answer = async () => {
      throw new CarrierError("no such number", "CarrierRejected", true);
    };
    const refused = sms("+61412345678");
    await expect(router.submit(refused)).rejects.toMatchObject({ errorCode: "CarrierRejected", permanent: true });
    expect(y.got).not.toContain(refused.messageSid);
    await router.stop();
  });

  it("a dispatcher round's costs are one statement (prepare), none per message; a message no round prepared is looked up alone", async () => {
    const { router } = await setUp();
    const round = Array.from({ length: 50 }, (_, i) =>
      sms(i % 2 === 0 ? `+614123456${String(i).padStart(2, "0")}` : `+612123456${String(i).padStart(2, "0")}`),
    );
    const lookups = () => [...statements].filter(([k]) => k.includes("rates.ord")).reduce((s, [, v]) => s + v, 0);
    const before = lookups();
    await router.prepare!(round, now);
    const carriers = await Promise.all(round.map((m) => router.submit(m)));
    expect(lookups() - before).toBe(1);
    expect(carriers.map((c) => c.carrier)).toEqual(round.map((_, i) => (i % 2 === 0 ? "X" : "Y")));
    await router.submit(sms("+61412345678"));
    expect(lookups() - before).toBe(2);
    // A round with no LeastCost route needs no statement.
    await db.orm.em.fork().transactional((tx) => replaceRoutes(tx, [{ prefix: null, accountSid: null, carriers: [], strategy: "Failover" }], now));
    await router.refresh();
    await router.prepare!([sms("+61412345678")], now);
    expect(lookups() - before).toBe(2);
    await router.stop();
  });
});
