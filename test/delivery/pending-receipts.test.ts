/**
 * The boundaries of kept receipts (issue 41, defect 5; delivery/segment-store.ts): a receipt naming
 * no known segment is applied to a submission only if the submission began before it was received
 * (less RECEIPT_CLOCK_SKEW_MS) and while it is younger than PENDING_RECEIPT_KEEP_MS; the housekeeping
 * drops older ones. Store level, on a ManualClock; the end-to-end case is
 * test/carriers/smpp/early-receipts.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/common/clock.js";
import { applyPendingReceipts, applySegmentReceipt, PENDING_RECEIPT_KEEP_MS, RECEIPT_CLOCK_SKEW_MS, recordSegments } from "../../src/delivery/segment-store.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";

describe(`kept receipts (${dbKind()})`, () => {
  let db: TestOrm;
  const clock = new ManualClock(Date.UTC(2026, 10, 28, 9, 0, 0));
  let n = 0;

  beforeAll(async () => {
    db = await createTestOrm();
  }, 90_000);
  afterAll(() => db?.close());

  const kept = async () => Number((await db.orm.em.fork().execute<{ n: string }[]>("select count(*) as n from carrier_pending_receipts"))[0]!.n);
  const segment = async (sid: string) =>
    (await db.orm.em.fork().execute<{ status: string }[]>("select status from carrier_segments where message_sid = ?", [sid]))[0]!.status;

  /** A receipt for `id` heard now, then a submission given that id begun `startedAfterMs` later; the segment's status. */
  async function receiptThenSubmission(startedAfterMs: number): Promise<string> {
    const id = `A${(++n).toString(16).padStart(5, "0")}`;
    const sid = `MGTEST${n}`;
    expect(
      await applySegmentReceipt(db.orm.em.fork(), { carrierId: id, status: "Failed", carrierError: "stat:UNDELIV err:034", at: clock.now() }, clock.now()),
    ).toBe("kept");
    const startedAt = new Date(clock.now().getTime() + startedAfterMs);
    clock.advance(Math.max(startedAfterMs, 0) + 500);
    await db.orm.em.fork().transactional((tx) => recordSegments(tx, [{ messageSid: sid, segmentIds: [id], at: clock.now(), startedAt }], clock.now()));
    return segment(sid);
  }

  it("applies a receipt heard after the submission began (it outran the submit_sm_resp), or within the clock skew before it", async () => {
    expect(await receiptThenSubmission(-1_000)).toBe("Failed");
    // Begun a second later: within the clock skew allowed (RECEIPT_CLOCK_SKEW_MS, 2 s).
    expect(await receiptThenSubmission(1_000)).toBe("Failed");
    expect(await kept()).toBe(0);
  });

  it("never applies a receipt heard before the submission began (less the skew): the id was not issued yet", async () => {
    expect(await receiptThenSubmission(5_000)).toBe("Submitted");
    expect(await receiptThenSubmission(10_000)).toBe("Submitted");
    expect(RECEIPT_CLOCK_SKEW_MS).toBeLessThanOrEqual(2_000);
    // A sweep does not apply them either; once PENDING_RECEIPT_KEEP_MS has passed they are dropped.
    expect(await db.orm.em.fork().transactional((tx) => applyPendingReceipts(tx, clock.now()))).toBe(0);
    expect(await kept()).toBe(2);
    clock.advance(PENDING_RECEIPT_KEEP_MS);
    await db.orm.em.fork().transactional((tx) => applyPendingReceipts(tx, clock.now()));
    expect(await kept()).toBe(0);
  });

  it("never applies a receipt kept longer than PENDING_RECEIPT_KEEP_MS (30 s), even to a submission begun before it", async () => {
    const id = "B00001";
    const startedAt = clock.now();
    clock.advance(1_000);
    await applySegmentReceipt(db.orm.em.fork(), { carrierId: id, status: "Failed", carrierError: "stat:UNDELIV err:034", at: clock.now() }, clock.now());
    clock.advance(60_000);
    await db.orm.em.fork().transactional((tx) => recordSegments(tx, [{ messageSid: "MGLATE", segmentIds: [id], at: clock.now(), startedAt }], clock.now()));
    expect(await segment("MGLATE")).toBe("Submitted");
  });
});
