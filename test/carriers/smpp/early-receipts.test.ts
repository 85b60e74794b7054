/**
 * Receipts that name ids the SMSC has not issued yet (issue 41, defect 5), against Perl's Net::SMPP
 * (test/carriers/smpp/smsc.pl): a receipt naming no known submission is kept only for the seconds a
 * receipt can outrun its submit_sm_resp (PENDING_RECEIPT_KEEP_MS), and never applied to a
 * submission that began after it arrived. The world runs on a ManualClock, so "later" is exact.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/common/clock.js";
import { PENDING_RECEIPT_KEEP_MS } from "../../../src/delivery/segment-store.js";
import { dbKind, createTestOrm, type TestOrm } from "../../support/db.js";
import { acceptedSubmits, startSmsc, type TestSmsc } from "./smsc.js";
import { type SmppWorld, startSmppWorld, waitFor } from "./world.js";

describe(`receipts for ids not issued yet, against Net::SMPP (${dbKind()})`, { timeout: 90_000 }, () => {
  let smsc: TestSmsc;
  let db: TestOrm;
  let world: SmppWorld;
  const clock = new ManualClock(Date.UTC(2026, 10, 28, 9, 0, 0));

  beforeAll(async () => {
    smsc = await startSmsc();
    db = await createTestOrm();
    world = await startSmppWorld(db.orm, smsc, { housekeepingMs: 200, submitDeadlineMs: 20_000 }, clock);
    await smsc.waitFor("a bind", (ev) => ev.some((e) => e.kind === "bind" && e.f.ok === "1"));
  }, 180_000);

  afterAll(async () => {
    await world?.close();
    await smsc?.stop();
    await db?.close();
  });

  const kept = async () => Number((await db.orm.em.fork().execute<{ n: string | number }[]>(`select count(*) as n from carrier_pending_receipts`))[0]!.n);
  const statusOf = async (sid: string) => (await world.record(sid)).Status as string;

  it("UNDELIV receipts for ids issued seconds later never fail the messages those ids go to: each ends Delivered by its own receipt", async () => {
    smsc.send("prereceipt 10 UNDELIV 034");
    await smsc.waitFor("ten receipts answered", (ev) => ev.filter((e) => e.kind === "deliver_resp" && e.f.status === "0").length === 10);
    expect(await kept()).toBe(10);
    const early = smsc.events.filter((e) => e.kind === "prereceipt").map((e) => e.f.id);

    // Five seconds later (within the keep window, past the clock-skew allowance) ten messages go out.
    clock.advance(5_000);
    const sids: string[] = [];
    for (let i = 0; i < 10; i++) sids.push(await world.send({ From: world.tenant.ownedNumber, To: `+4477009002${String(i).padStart(2, "0")}`, Text: `m${i}` }));
    await smsc.waitFor("ten submits", (ev) => acceptedSubmits(ev).length === 10);
    const submits = acceptedSubmits(smsc.events);
    // The SMSC gave them exactly the ids it had sent receipts for.
    expect(submits.map((e) => e.f.id).sort()).toEqual([...early].sort());
    // Recorded as submitted (on old main the kept UNDELIV receipts failed them at that moment).
    for (const sid of sids) await waitFor(`${sid} recorded`, async () => (await statusOf(sid)) !== "Processing");

    // Their real receipts: every one delivered.
    for (const e of submits)
      smsc.send(`deliver esm_class=4 source_addr=${e.f.destination_addr} destination_addr=${e.f.source_addr} tlv_rmi=${e.f.id} tlv_state=2`);
    for (const sid of sids) await waitFor(`${sid} settled`, async () => ((await statusOf(sid)) === "Submitted" ? undefined : true));
    const records = [];
    for (const sid of sids) records.push(await world.record(sid));
    expect(records.map((r) => `${r.Status} ${r.CarrierError}`)).toEqual(sids.map(() => "Delivered "));
  });

  it("drops a kept receipt once PENDING_RECEIPT_KEEP_MS (seconds, not days) has passed", async () => {
    expect(PENDING_RECEIPT_KEEP_MS).toBeLessThanOrEqual(60_000);
    // The ten early receipts were never applied; the housekeeping drops them once they are old.
    expect(await kept()).toBe(10);
    clock.advance(PENDING_RECEIPT_KEEP_MS + 1);
    await waitFor("the kept receipts dropped", async () => (await kept()) === 0);
  });

  it("still applies a receipt that outruns its own submit_sm_resp", async () => {
    smsc.send("early 1");
    const to = "+447700900299";
    const sid = await world.send({ From: world.tenant.ownedNumber, To: to, Text: "early one" });
    await waitFor(`${sid} Delivered`, async () => (await statusOf(sid)) === "Delivered");
    expect(smsc.events.some((e) => e.kind === "submit" && e.f.answer === "after-receipt" && e.f.destination_addr === to.slice(1))).toBe(true);
    expect(await kept()).toBe(0);
  });
});
