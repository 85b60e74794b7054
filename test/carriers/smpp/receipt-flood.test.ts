/**
 * A carrier's flood of delivery receipts must not take the API down for the other tenants (issue
 * 41, defect 1). The Net::SMPP SMSC (test/carriers/smpp/smsc.pl, `flood`) sends receipts for ids
 * nobody submitted at 3,000 a second for 10 s while another tenant sends through the REST API: its
 * sends stay fast and none fails, and every receipt is kept (carrier_pending_receipts) and answered
 * 0, none refused for lack of a database connection (a real SMSC would send it again).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTenant, type Tenant } from "../../support/harness.js";
import { createTestOrm, dbKind, type TestOrm } from "../../support/db.js";
import { PENDING_RECEIPT_KEEP_MS } from "../../../src/delivery/segment-store.js";
import { acceptedSubmits, startSmsc, type TestSmsc } from "./smsc.js";
import { type SmppWorld, startSmppWorld, waitFor } from "./world.js";

const RATE = 3000;
const SECONDS = 10;
const FLOOD = RATE * SECONDS;
/** MO cost a transaction each (lease matching, keywords): a shorter flood, still far above what the link is read at. */
const MO_RATE = 1000;
// PGlite stores MO one at a time (40-80 a second on this machine kind): one second's flood keeps
// the file within minutes on a loaded CI machine; PostgreSQL takes two.
const MO_FLOOD = dbKind() === "pglite" ? MO_RATE : MO_RATE * 2;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

describe(`SMPP receipt flood (${dbKind()})`, { timeout: 400_000 }, () => {
  let smsc: TestSmsc;
  let db: TestOrm;
  let world: SmppWorld;
  let other: Tenant;

  beforeAll(async () => {
    smsc = await startSmsc();
    db = await createTestOrm();
    world = await startSmppWorld(db.orm, smsc, { tps: 0 });
    other = await createTenant(world.app);
  }, 180_000);

  afterAll(async () => {
    await world?.close();
    await smsc?.stop();
    await db?.close();
  }, 120_000);

  /** Floods (`flood N RATE [mo]`) while another tenant sends 50 REST messages a second; returns what was measured. */
  async function floodWhileSending(n: number, rate: number, kind: "receipts" | "mo") {
    const { app, carrier } = world;
    await waitFor("Bound", () => carrier.status().link === "Bound");
    const sendOnce = async (i: number) => {
      const started = performance.now();
      const res = await app.inject({
        method: "POST",
        url: `/v2/Properties/${other.propertySid}/Messages`,
        headers: { authorization: other.auth },
        payload: { From: other.ownedNumber, To: `+4477009${String(10_000 + (i % 90_000)).padStart(5, "0")}`, Text: `During the flood ${i}` },
      });
      return { ms: performance.now() - started, status: res.statusCode, body: res.statusCode === 200 ? "" : res.body };
    };
    for (let i = 0; i < 5; i++) expect((await sendOnce(i)).status).toBe(200); // warm

    const rssBefore = process.memoryUsage().rss;
    const cpuBefore = process.cpuUsage();
    let rssPeak = rssBefore;
    const memory = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 100);
    const seen = smsc.events.length;
    smsc.send(`flood ${n} ${rate}${kind === "mo" ? " mo" : ""}`);
    const floodStart = performance.now();
    // 50 sends a second, started on time whatever the ones before became (a late timer starts the
    // ones due together), until every deliver_sm of the flood is answered.
    const results: Promise<{ ms: number; status: number; body: string }>[] = [];
    let answered = false;
    const sending = (async () => {
      while (!answered && performance.now() - floodStart < 360_000) {
        const due = Math.floor((performance.now() - floodStart) / 20) + 1;
        while (results.length < due) results.push(sendOnce(100 + results.length));
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    let stats: Record<string, string> = {};
    try {
      await waitFor(
        "every flood deliver_sm answered",
        async () => {
          const at = smsc.events.length;
          smsc.send("stats");
          await smsc.waitFor("stats", (ev) => ev.slice(at).some((e) => e.kind === "stats"), 60_000);
          stats = smsc.events.slice(at).find((e) => e.kind === "stats")!.f;
          return Number(stats.ok) + Number(stats.err) >= n;
        },
        360_000,
      );
    } finally {
      answered = true;
      await sending;
    }
    const sends = await Promise.all(results);
    const floodSent = smsc.events.slice(seen).find((e) => e.kind === "flood_sent");
    clearInterval(memory);
    const cpu = process.cpuUsage(cpuBefore);
    const drainedMs = performance.now() - floodStart;
    const em = db.orm.em.fork();
    const stored =
      kind === "receipts"
        ? await em.execute<{ n: string | number }[]>(`select count(*) as n from carrier_pending_receipts where carrier_id like 'flood%'`)
        : await em.execute<{ n: string | number }[]>(`select count(*) as n from unmatched_inbound where text like 'flood mo %'`);

    const ms = sends.map((x) => x.ms).sort((a, b) => a - b);
    const failed = sends.filter((x) => x.status !== 200);
    console.log(
      `${kind} flood (${dbKind()}): ${n} deliver_sm sent in ${floodSent?.f.seconds} s, all answered after ${(drainedMs / 1000).toFixed(1)} s; ` +
        `answers ok=${stats.ok} err=${stats.err}; stored ${stored[0]!.n}; REST sends ${sends.length}, failed ${failed.length}, ` +
        `p50 ${percentile(ms, 50).toFixed(0)} ms, p99 ${percentile(ms, 99).toFixed(0)} ms, max ${ms.at(-1)?.toFixed(0)} ms; ` +
        `rss ${(rssBefore / 2 ** 20).toFixed(0)} -> peak ${(rssPeak / 2 ** 20).toFixed(0)} MiB; this process's CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s`,
    );
    return { sends, failed, p99: percentile(ms, 99), stats, stored: Number(stored[0]!.n), drainedMs };
  }

  it("applies receipts that arrive together as they would one by one: a message's three segments and a repeat, another's failure and a contradicting repeat", async () => {
    const { send, record, hookBase, hooks, tenant } = world;
    await waitFor("Bound", () => world.carrier.status().link === "Bound");
    const [a, b] = ["+447700900501", "+447700900502"];
    const sidA = await send({ From: tenant.ownedNumber, To: a, Text: `${"abcdefghij".repeat(31)}TAIL`, DeliveryReceiptWebhookUri: `${hookBase}/dr` });
    const sidB = await send({ From: tenant.ownedNumber, To: b, Text: "Batch B", DeliveryReceiptWebhookUri: `${hookBase}/dr` });
    await waitFor("both Submitted", async () => (await record(sidA)).Status === "Submitted" && (await record(sidB)).Status === "Submitted");
    const idsOf = (to: string) =>
      acceptedSubmits(smsc.events)
        .filter((e) => e.f.destination_addr === to.slice(1))
        .map((e) => e.f.id!);
    const idsA = idsOf(a);
    const [idB] = idsOf(b);
    expect(idsA).toHaveLength(3);
    const seen = smsc.events.length;
    const dr = (id: string, state: number) => `deliver esm_class=4 source_addr=447700900500 destination_addr=447700900499 tlv_rmi=${id} tlv_state=${state}`;
    for (const id of idsA) smsc.send(dr(id, 2));
    smsc.send(dr(idsA[0]!, 2));
    smsc.send(dr(idB!, 5));
    smsc.send(dr(idB!, 2));
    await smsc.waitFor("six answered 0", (ev) => ev.slice(seen).filter((e) => e.kind === "deliver_resp" && e.f.status === "0").length === 6);
    expect(await record(sidA)).toMatchObject({ Status: "Delivered", ErrorCode: "" });
    expect(await record(sidB)).toMatchObject({ Status: "Failed", ErrorCode: "CarrierFailed", CarrierError: "stat:UNDELIV" });
    await waitFor("both receipt webhooks", () => [sidA, sidB].every((sid) => hooks.some((h) => h.path === "/dr" && h.body.MessageSid === sid)));
    await new Promise((r) => setTimeout(r, 500));
    for (const sid of [sidA, sidB]) expect(hooks.filter((h) => h.path === "/dr" && h.body.MessageSid === sid)).toHaveLength(1);
    const em = db.orm.em.fork();
    const segs = await em.execute<{ status: string }[]>(`select status from carrier_segments where message_sid = ? order by seq`, [sidA]);
    expect(segs.map((x) => x.status)).toEqual(["Delivered", "Delivered", "Delivered"]);
  });

  it(`keeps another tenant's REST sends under 1 s (p99) with none failed while ${FLOOD} receipts arrive at ${RATE}/s, and keeps every receipt`, async () => {
    const r = await floodWhileSending(FLOOD, RATE, "receipts");
    expect(r.failed.slice(0, 3)).toEqual([]);
    expect(r.p99).toBeLessThan(1000);
    expect(r.stats).toMatchObject({ sent: String(FLOOD), ok: String(FLOOD), err: "0" });
    // Answered 0 means committed; they are still all there unless the sweep already dropped the
    // first ones (kept PENDING_RECEIPT_KEEP_MS, 30 s).
    if (r.drainedMs < PENDING_RECEIPT_KEEP_MS - 5000) expect(r.stored).toBe(FLOOD);
    else expect(r.stored).toBeGreaterThan(0);
  });

  it(`keeps another tenant's REST sends under 1 s (p99) with none failed while ${MO_FLOOD} MO arrive at ${MO_RATE}/s, and stores every one`, async () => {
    const r = await floodWhileSending(MO_FLOOD, MO_RATE, "mo");
    expect(r.failed.slice(0, 3)).toEqual([]);
    expect(r.p99).toBeLessThan(1000);
    expect(r.stats).toMatchObject({ sent: String(MO_FLOOD), ok: String(MO_FLOOD), err: "0" });
    expect(r.stored).toBe(MO_FLOOD);
  });
});
