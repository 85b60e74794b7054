/**
 * The carrier router's choices with stand-in carriers whose answers and links the test sets:
 * a temporary refusal moves the message on, a permanent one does not, a link down gets nothing,
 * RoundRobin alternates, none up hands the message to the route's first carrier, no route is
 * NoRoute, and a removed carrier's link closes only once its submissions are answered.
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { CarrierError, type Carrier, type CarrierStatusInfo, type OutboundSms } from "../../src/delivery/carrier.js";
import { carriersToTry, createCarrierRouter } from "../../src/delivery/carrier-router.js";
import { insertCarrier, type CarrierRecord } from "../../src/admin/carrier-store.js";
import { replaceRoutes, type RouteRecord } from "../../src/admin/route-store.js";
import { useTestOrm } from "../support/db.js";

interface Fake extends Carrier {
  got: string[];
  link: CarrierStatusInfo["link"];
  answer: (sms: OutboundSms) => Promise<{ carrierRef: string }>;
  stopped: boolean;
}

function fake(): Fake {
  const f: Fake = {
    name: "fake",
    got: [],
    link: "Bound",
    stopped: false,
    answer: async () => ({ carrierRef: "ref" }),
    async submit(sms) {
      f.got.push(sms.messageSid);
      return f.answer(sms);
    },
    status: () => ({ link: f.link, since: null, lastError: "", inFlight: 0, window: 10, tps: 0, queued: 0 }),
    async start() {
      f.stopped = false;
    },
    async stop() {
      f.stopped = true;
    },
  };
  return f;
}

const sms = (n: number, to = "+61400000001", accountSid = "AC1"): OutboundSms => ({
  messageSid: `MG${n}`,
  from: "+1",
  to,
  text: "x",
  deliveryReceipt: true,
  accountSid,
});
const noEvents = { deliveryReport: async () => undefined, inbound: async () => ({ messageSid: "", inReplyTo: "" }) };

describe("carriersToTry", () => {
  it("Failover: those up in order; RoundRobin: those up from one further along each time; none up: the first alone", () => {
    const up = new Set(["a", "c"]);
    expect(carriersToTry({ links: ["a", "b", "c"], strategy: "Failover", next: 0 }, (l) => up.has(l))).toEqual(["a", "c"]);
    const rr = { links: ["a", "b", "c"], strategy: "RoundRobin" as const, next: 0 };
    expect([1, 2, 3].map(() => carriersToTry(rr, (l) => up.has(l)))).toEqual([
      ["a", "c"],
      ["c", "a"],
      ["a", "c"],
    ]);
    expect(carriersToTry({ links: ["a", "b"], strategy: "RoundRobin", next: 0 }, () => false)).toEqual(["a"]);
  });
});

describe("the carrier router", () => {
  const db = useTestOrm();
  const now = new Date("2026-11-25T12:00:00Z");
  let n = 0;

  async function setUp(names: string[], routes: (sids: string[]) => RouteRecord[]) {
    const em = db.orm.em.fork();
    await em.execute("delete from routes");
    await em.execute("delete from carriers");
    const fakes = new Map<string, Fake>();
    const sids: string[] = [];
    for (const name of names) {
      const rec: CarrierRecord = {
        sid: `CR${String(++n).padStart(30, "0")}`,
        name,
        kind: "simulator",
        url: "",
        tps: 0,
        window: 10,
        systemType: "",
        costCard: null,
        createdAt: now,
        updatedAt: now,
      };
      await insertCarrier(em, rec);
      sids.push(rec.sid);
      fakes.set(name, fake());
    }
    await em.transactional((tx) => replaceRoutes(tx, routes(sids), now));
    const fallback = fake();
    const router = createCarrierRouter({ orm: db.orm, fallback, build: async (row) => fakes.get(row.name)!, pollMs: 60_000, watchMs: 10 });
    await router.start(noEvents);
    return { router, fakes, fallback, sids };
  }

  it("without carrier rows the environment's carrier takes everything as 'default'", async () => {
    const em = db.orm.em.fork();
    await em.execute("delete from routes");
    await em.execute("delete from carriers");
    const fallback = fake();
    const router = createCarrierRouter({ orm: db.orm, fallback, build: async () => fake() });
    await router.start(noEvents);
    expect(await router.submit(sms(1))).toEqual({ carrierRef: "ref", carrier: "default" });
    expect(fallback.got).toEqual(["MG1"]);
    await router.stop();
  });

  it("a temporary refusal moves the message to the next carrier; a permanent one fails it there", async () => {
    const { router, fakes } = await setUp(["A", "B"], (s) => [{ prefix: null, accountSid: null, carriers: s, strategy: "Failover" }]);
    const [a, b] = [fakes.get("A")!, fakes.get("B")!];
    a.answer = async () => {
      throw new CarrierError("busy", "CarrierUnavailable", false);
    };
    expect(await router.submit(sms(2))).toEqual({ carrierRef: "ref", carrier: "B" });
    a.answer = async () => {
      throw new CarrierError("no such number", "CarrierRejected", true);
    };
    await expect(router.submit(sms(3))).rejects.toMatchObject({ errorCode: "CarrierRejected", permanent: true });
    expect([a.got, b.got]).toEqual([["MG2", "MG3"], ["MG2"]]);
    expect(router.links().map((l) => [l.name, l.submitted, l.failed])).toEqual([
      ["A", 0, 2],
      ["B", 1, 0],
    ]);
    await router.stop();
  });

  it("a carrier whose link is down gets nothing; with all down the first holds it; no matching route is NoRoute", async () => {
    const { router, fakes } = await setUp(["A", "B"], (s) => [{ prefix: "+61", accountSid: null, carriers: s, strategy: "Failover" }]);
    const [a, b] = [fakes.get("A")!, fakes.get("B")!];
    a.link = "Down";
    expect((await router.submit(sms(4))).carrier).toBe("B");
    b.link = "Connecting";
    expect((await router.submit(sms(5))).carrier).toBe("A");
    expect([a.got, b.got]).toEqual([["MG5"], ["MG4"]]);
    await expect(router.submit(sms(6, "+64210000001"))).rejects.toMatchObject({ errorCode: "NoRoute", permanent: true });
    await router.stop();
  });

  it("moves a submission waiting on a link that drops to the next carrier", async () => {
    const { router, fakes } = await setUp(["A", "B"], (s) => [{ prefix: null, accountSid: null, carriers: s, strategy: "Failover" }]);
    const a = fakes.get("A")!;
    // A holds the submission until its signal aborts, as the SMPP carrier waiting for its bind.
    a.answer = (m) =>
      new Promise((_, reject) => m.signal!.addEventListener("abort", () => reject(new CarrierError("link lost", "CarrierUnavailable", false)), { once: true }));
    const pending = router.submit(sms(7));
    await new Promise((r) => setTimeout(r, 50));
    a.link = "Down";
    expect(await pending).toEqual({ carrierRef: "ref", carrier: "B" });
    await router.stop();
  });

  it("a row whose carrier cannot be built is skipped (logged without its password); the others route", async () => {
    const em = db.orm.em.fork();
    await em.execute("delete from routes");
    await em.execute("delete from carriers");
    const lines: string[] = [];
    const log = pino({ level: "info" }, { write: (l: string) => lines.push(l) });
    const rows = ["bad", "good"].map((name) => ({
      sid: `CR${String(++n).padStart(30, "0")}`,
      name,
      kind: "smpp" as const,
      url: `smpp://sys:pw-${name}-0123@127.0.0.1:1`,
      tps: 0,
      window: 10,
      systemType: "",
      costCard: null,
      createdAt: now,
      updatedAt: now,
    }));
    for (const r of rows) await insertCarrier(em, r);
    await em.transactional((tx) => replaceRoutes(tx, [{ prefix: null, accountSid: null, carriers: rows.map((r) => r.sid), strategy: "Failover" }], now));
    const good = fake();
    const router = createCarrierRouter({
      orm: db.orm,
      log,
      fallback: fake(),
      build: async (row) => {
        if (row.name === "bad") throw new Error(`cannot read ${row.url}`);
        return good;
      },
    });
    await router.start(noEvents);
    expect((await router.submit(sms(10))).carrier).toBe("good");
    expect(lines.join("")).toContain("could not open a configured carrier");
    expect(lines.join("")).not.toContain("pw-bad-0123");
    await router.stop();
  });

  it("closes a removed carrier's link only once its submissions are answered", async () => {
    const { router, fakes, sids } = await setUp(["A", "B"], (s) => [{ prefix: null, accountSid: null, carriers: [s[0]!], strategy: "Failover" }]);
    const a = fakes.get("A")!;
    let answer!: () => void;
    a.answer = () => new Promise((r) => (answer = () => r({ carrierRef: "late" })));
    const pending = router.submit(sms(8));
    await new Promise((r) => setTimeout(r, 10));
    const em = db.orm.em.fork();
    await em.transactional((tx) => replaceRoutes(tx, [{ prefix: null, accountSid: null, carriers: [sids[1]!], strategy: "Failover" }], now));
    await em.execute(`delete from carriers where sid = '${sids[0]}'`);
    await router.refresh();
    expect(router.links().map((l) => l.name)).toEqual(["B"]);
    expect(a.stopped).toBe(false);
    answer();
    expect(await pending).toEqual({ carrierRef: "late", carrier: "A" });
    await new Promise((r) => setTimeout(r, 10));
    expect(a.stopped).toBe(true);
    expect((await router.submit(sms(9))).carrier).toBe("B");
    await router.stop();
  });
});
