/**
 * Issue 41, defect 3: the cap on keyword answers (optouts/answer-cap-store.ts) is one conditional
 * write, safe across processes: of concurrent claims of the same account, handset, kind and UTC
 * day, one wins; a claim waiting on another's transaction takes the day only if that one rolls back.
 * On PostgreSQL the transactions below run on two connections; on PGlite (one connection) in turn.
 */
import { describe, expect, it } from "vitest";
import { newSid } from "../../src/common/sid.js";
import { claimAnswer } from "../../src/optouts/answer-cap-store.js";
import { dbKind, useTestOrm } from "../support/db.js";

const NOW = new Date("2026-11-22T12:00:00Z");
const DAY = 86_400_000;

describe(`the keyword answer cap (${dbKind()})`, () => {
  const db = useTestOrm();

  async function account(sid: string): Promise<string> {
    await db.orm.em
      .fork()
      .execute("insert into accounts (sid, name, sms_enabled, token_hash, webhook_secret, created_at) values (?, 'Cap', true, ?, 'whsec', ?)", [
        sid,
        "0".repeat(64),
        NOW,
      ]);
    return sid;
  }

  const claim = (accountSid: string, phone: string, kind: "Stop" | "Start" | "Help", now = NOW) =>
    db.orm.em.fork().transactional((tx) => claimAnswer(tx, { accountSid, recipient: phone, kind, now, messageSid: newSid("MG") }));

  it("one claim per account, handset, kind and UTC day", async () => {
    const a = await account("AC00000000000000000000000000cap1");
    const b = await account("AC00000000000000000000000000cap2");
    expect(await claim(a, "+61412000001", "Help")).toBe(true);
    expect(await claim(a, "+61412000001", "Help")).toBe(false);
    expect(await claim(a, "+61412000001", "Help", new Date(NOW.getTime() + 3_600_000))).toBe(false);
    expect(await claim(a, "+61412000001", "Stop")).toBe(true);
    expect(await claim(a, "+61412000002", "Help")).toBe(true);
    expect(await claim(b, "+61412000001", "Help")).toBe(true);
    // The next UTC day (a claim of an earlier day does not take today's back).
    expect(await claim(a, "+61412000001", "Help", new Date(NOW.getTime() + DAY))).toBe(true);
    expect(await claim(a, "+61412000001", "Help")).toBe(false);
  });

  it("concurrent claims: the second waits for the first's transaction; it wins only if that one rolls back", async () => {
    const a = await account("AC00000000000000000000000000cap3");
    for (const outcome of ["commit", "rollback"] as const) {
      const phone = outcome === "commit" ? "+61412000003" : "+61412000004";
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let claimed!: (won: boolean) => void;
      const firstClaimed = new Promise<boolean>((r) => (claimed = r));
      const first = db.orm.em
        .fork()
        .transactional(async (tx) => {
          claimed(await claimAnswer(tx, { accountSid: a, recipient: phone, kind: "Help", now: NOW, messageSid: newSid("MG") }));
          await released;
          if (outcome === "rollback") throw new Error("rolled back");
        })
        .catch((err: Error) => err.message);
      expect(await firstClaimed).toBe(true);
      const second = claim(a, phone, "Help");
      await new Promise((r) => setTimeout(r, 100));
      release();
      await first;
      expect(await second, outcome).toBe(outcome === "rollback");
      expect(await claim(a, phone, "Help")).toBe(false);
    }
  });
});
