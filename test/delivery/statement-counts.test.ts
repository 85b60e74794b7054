/**
 * Statements and row writes per message (issue 32), counted, not timed: 2,000 sends through the
 * REST API of an app with the delivery engine and the simulator carrier (a report per message), with
 * the sends stored unclaimed (claimed from the database, as before) and stored claimed at accept.
 * Every hot statement goes through executeBound, counted here by kind; the writes of `messages`
 * rows are counted by a trigger this test adds (what pg_stat_user_tables' n_tup_ins and n_tup_upd
 * count). The counts are printed for docs/benchmarks.md; the assertions hold the difference.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { dbKind } from "../support/db.js";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { statements } from "../support/statement-counter.js";
import { DEFAULT_SUBMISSION_HOLD_MS } from "../../src/config.js";

vi.mock("../../src/db/bound-sql.js", async (original) =>
  (await import("../support/statement-counter.js")).countingBoundSql(await original<typeof import("../../src/db/bound-sql.js")>()),
);

const T0 = new Date("2026-11-22T12:00:00Z");
const MESSAGES = 2_000;
const WAVE = 100;

let seq = 0;
const recipient = () => `+447911${String(++seq).padStart(6, "0")}`;

async function countWrites(t: TestApp): Promise<void> {
  const em = t.db.orm.em.fork();
  await em.execute(`create table test_message_writes (op text primary key, n bigint not null)`);
  await em.execute(`create function test_count_message_writes() returns trigger language plpgsql as $fn$
    begin
      insert into test_message_writes values (tg_op, 1) on conflict (op) do update set n = test_message_writes.n + 1;
      return null;
    end $fn$`);
  await em.execute(`create trigger test_count_message_writes after insert or update on messages for each row execute function test_count_message_writes()`);
}

async function writes(t: TestApp): Promise<Record<string, number>> {
  const rows = await t.db.orm.em.fork().execute<{ op: string; n: string }[]>("select op, n from test_message_writes");
  return Object.fromEntries(rows.map((r) => [r.op, Number(r.n)]));
}

async function delivered(t: TestApp): Promise<number> {
  const [r] = await t.db.orm.em.fork().execute<{ n: string }[]>("select count(*) as n from messages where status = 'Delivered'");
  return Number(r.n);
}

function send(t: TestApp, tenant: Tenant): Promise<void> {
  return t.app
    .inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: tenant.ownedNumber, To: recipient(), Text: "hello" },
    })
    .then((res) => expect(res.statusCode, res.body).toBe(200));
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const end = Date.now() + 120_000;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Counts {
  perMessage: Record<string, number>;
  raw: Record<string, number>;
}

function summary(rowWrites: Record<string, number>): Counts {
  const raw: Record<string, number> = {
    "row inserts": rowWrites.INSERT ?? 0,
    "row updates": rowWrites.UPDATE ?? 0,
    ...Object.fromEntries([...statements].sort(([a], [b]) => (a < b ? -1 : 1))),
  };
  const perMessage = Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Math.round((v / MESSAGES) * 1000) / 1000]));
  return { perMessage, raw };
}

describe(`statements per message, 2,000 REST sends (${dbKind()})`, () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  /** Waves of 100 concurrent sends, each followed by the dispatcher's rounds until it finds nothing, then the reports. */
  async function ticked(claimAtAccept: boolean, submissionHoldMs = DEFAULT_SUBMISSION_HOLD_MS): Promise<Counts> {
    // The database is looked at only when a round needs it (no periodic look while the hand-off feeds
    // the rounds), so the counts do not depend on how long the rounds take.
    t = await createTestApp({
      now: T0,
      engine: { claimAtAccept, dispatcher: { databasePollMs: 3_600_000, submissionHoldMs } },
      config: { sendRateLimit: 0 },
    });
    const app = t;
    const tenant = await createTenant(app.app);
    await countWrites(app);
    statements.clear();
    for (let sent = 0; sent < MESSAGES; sent += WAVE) {
      await Promise.all(Array.from({ length: WAVE }, () => send(app, tenant)));
      while ((await app.engine!.dispatcher.tick()) > 0);
      await until(async () => (await delivered(app)) === sent + WAVE, "the reports");
    }
    return summary(await writes(app));
  }

  /** As in production: the loops running, 50 sends in flight at any time. */
  async function looping(claimAtAccept: boolean): Promise<Counts> {
    t = await createTestApp({ now: T0, engine: { claimAtAccept, loops: true }, config: { sendRateLimit: 0 } });
    const app = t;
    const tenant = await createTenant(app.app);
    await countWrites(app);
    statements.clear();
    let next = 0;
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (next++ < MESSAGES) await send(app, tenant);
      }),
    );
    await until(async () => (await delivered(app)) === MESSAGES, "the reports");
    // The loops' idle polls after the last message are not the messages' cost.
    await app.engine!.stop();
    return summary(await writes(app));
  }

  it(
    "manual rounds: claim at accept saves the claim's update, the held submission the submission's: two writes per delivered message",
    { timeout: 300_000 },
    async () => {
      const unclaimed = await ticked(false, 0);
      const claimed = await ticked(true, 0);
      const held = await ticked(true);
      console.log(
        `statements per message, manual rounds (${dbKind()})\n`,
        JSON.stringify({
          unclaimedAtOnce: unclaimed.raw,
          claimedAtOnce: claimed.raw,
          claimedHeld: held.raw,
          perMessage: { unclaimedAtOnce: unclaimed.perMessage, claimedAtOnce: claimed.perMessage, claimedHeld: held.perMessage },
        }),
      );
      for (const c of [unclaimed, claimed, held]) expect(c.raw["row inserts"]).toBe(MESSAGES);
      // Claim, submission, final state; submission and final state; the final state with its submission.
      expect(unclaimed.raw["row updates"]).toBe(3 * MESSAGES);
      expect(claimed.raw["row updates"]).toBe(2 * MESSAGES);
      expect(held.raw["row updates"]).toBe(MESSAGES);
      expect(unclaimed.raw.sb_claim_due ?? 0).toBeGreaterThan(0);
      expect(claimed.raw.sb_claim_due ?? 0).toBe(0);
      expect(claimed.raw.sb_claim_fair ?? 0).toBe(0);
      expect(claimed.raw.sb_record_submissions ?? 0).toBeGreaterThan(0);
      expect(held.raw.sb_record_submissions ?? 0).toBe(0);
    },
  );

  it("loops running: the counts under a steady send load (printed; fewer claim statements)", { timeout: 300_000 }, async () => {
    const before = await looping(false);
    const after = await looping(true);
    console.log(
      `statements per message, loops running (${dbKind()})\n`,
      JSON.stringify({ before: before.raw, after: after.raw, perMessageBefore: before.perMessage, perMessageAfter: after.perMessage }),
    );
    expect(after.raw["row inserts"]).toBe(MESSAGES);
    expect(after.raw["row updates"]).toBeLessThan(before.raw["row updates"]);
    expect((after.raw.sb_claim_due ?? 0) + (after.raw.sb_claim_fair ?? 0)).toBeLessThan((before.raw.sb_claim_due ?? 0) + (before.raw.sb_claim_fair ?? 0));
  });
});
