import { describe, expect, it } from "vitest";
import { dbKind, useTestOrm } from "../support/db.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { CHECK_SQL, claimSql, DUE_ACCOUNTS_SQL, fairClaimSql, ORDERED_QUEUE_SCAN, SEND_BATCH_SETTINGS } from "../../src/messaging/message-store.js";

/** Every plan node below the root, depth first. */
function planNodes(plan: Record<string, unknown>): Record<string, unknown>[] {
  const children = (plan.Plans as Record<string, unknown>[] | undefined) ?? [];
  return [plan, ...children.flatMap(planNodes)];
}

describe(`hot statements (${dbKind()})`, () => {
  const db = useTestOrm();

  for (const confirmed of [false, true]) {
    it(`the dispatcher's claim walks the queue index in order, never a bitmap or sequential scan (confirming carrier: ${confirmed})`, async () => {
      const now = new Date();
      const params = confirmed ? [now, now, 500] : [now, now, now, 500];
      const plan = await db.orm.em.fork().transactional(async (tx) => {
        await executeBound(tx, ORDERED_QUEUE_SCAN, []);
        const [row] = await executeBound<{ "QUERY PLAN": unknown }>(tx, `explain (format json) ${claimSql(confirmed)}`, params);
        const json = row["QUERY PLAN"];
        return (typeof json === "string" ? JSON.parse(json) : json) as { Plan: Record<string, unknown> }[];
      });
      const scans = planNodes(plan[0].Plan).filter((n) => String(n["Node Type"]).includes("Scan") && n["Relation Name"] === "messages");
      // The subselect finds the due messages through the queue index; the outer update reaches each by its key.
      expect(scans.map((n) => [n["Node Type"], n["Index Name"]])).toEqual([
        ["Index Scan", "messages_queue_idx"],
        ["Index Scan", "messages_pkey"],
      ]);
      expect(planNodes(plan[0].Plan).some((n) => n["Node Type"] === "Sort")).toBe(false);
    });
  }

  /** The JSON plan of a statement, under the claim's planner settings. */
  async function claimPlan(sql: string, params: unknown[]): Promise<Record<string, unknown>[]> {
    const plan = await db.orm.em.fork().transactional(async (tx) => {
      await executeBound(tx, ORDERED_QUEUE_SCAN, []);
      const [row] = await executeBound<{ "QUERY PLAN": unknown }>(tx, `explain (format json) ${sql}`, params);
      const json = row["QUERY PLAN"];
      return (typeof json === "string" ? JSON.parse(json) : json) as { Plan: Record<string, unknown> }[];
    });
    return planNodes(plan[0].Plan);
  }
  const messageScans = (nodes: Record<string, unknown>[]) =>
    nodes
      .filter((n) => String(n["Node Type"]).includes("Scan") && n["Relation Name"] === "messages")
      .map((n) => [String(n["Node Type"]).replace("Index Only Scan", "Index Scan"), n["Index Name"]]);
  const wholeReads = ["Sort", "Hash Join", "Merge Join", "Seq Scan", "Bitmap Heap Scan"];

  it("the accounts with due messages: a loose scan of the account queue index, one probe per account", async () => {
    const nodes = await claimPlan(DUE_ACCOUNTS_SQL, [new Date()]);
    // The first account, then each next one.
    expect(messageScans(nodes)).toEqual([
      ["Index Scan", "messages_account_queue_idx"],
      ["Index Scan", "messages_account_queue_idx"],
    ]);
    for (const t of wholeReads) expect(nodes.map((n) => String(n["Node Type"]))).not.toContain(t);
  });

  for (const confirmed of [false, true]) {
    it(`the round-robin claim takes each account's oldest due messages from its range of the account queue index and reaches each row by its key (confirming carrier: ${confirmed})`, async () => {
      const now = new Date();
      const params = confirmed ? [now, ["AC1", "AC2"], now, 250] : [now, ["AC1", "AC2"], now, now, 250];
      const nodes = await claimPlan(fairClaimSql(confirmed), params);
      expect(messageScans(nodes)).toEqual([
        ["Index Scan", "messages_account_queue_idx"],
        ["Index Scan", "messages_pkey"],
      ]);
      const scan = nodes.find((n) => n["Index Name"] === "messages_account_queue_idx")!;
      expect(String(scan["Index Cond"])).toContain("account_sid");
      expect(String(scan["Index Cond"])).toContain("send_at");
      // Each account's rows in index order (no sort), and no join that reads a whole index or table.
      for (const t of wholeReads) expect(nodes.map((n) => String(n["Node Type"]))).not.toContain(t);
    });
  }

  it("a send batch's check looks every row up through an index: no sequential scan, no hash or merge join", async () => {
    const now = new Date();
    const plan = await db.orm.em.fork().transactional(async (tx) => {
      await executeBound(tx, SEND_BATCH_SETTINGS, []);
      const [row] = await executeBound<{ "QUERY PLAN": unknown }>(tx, `explain (format json) ${CHECK_SQL}`, [
        [0, 1],
        ["AC1", "AC1"],
        ["PR1", "PR1"],
        ["+447700900001", null],
        ["key-1", null],
        [now, now],
      ]);
      const json = row["QUERY PLAN"];
      return (typeof json === "string" ? JSON.parse(json) : json) as { Plan: Record<string, unknown> }[];
    });
    const types = planNodes(plan[0].Plan).map((n) => String(n["Node Type"]));
    expect(types).not.toContain("Seq Scan");
    expect(types).not.toContain("Hash Join");
    expect(types).not.toContain("Merge Join");
    for (const table of ["accounts", "properties", "numbers", "idempotency_keys", "messages"]) {
      expect(planNodes(plan[0].Plan).some((n) => n["Relation Name"] === table && String(n["Node Type"]).startsWith("Index"))).toBe(true);
    }
  });

  it("the one-statement send batch, submission and final-state functions look every row up through an index: no sequential scan, no hash or merge join, one generic plan", async () => {
    const rows = await executeBound<{ proname: string; proconfig: string[] | string }>(
      db.orm.em.fork(),
      "select proname, proconfig from pg_proc where proname in ('sb_record_submissions', 'sb_apply_final_states', 'sb_send_batch') order by proname",
      [],
    );
    expect(rows.map((r) => r.proname)).toEqual(["sb_apply_final_states", "sb_record_submissions", "sb_send_batch"]);
    for (const r of rows) {
      const config = Array.isArray(r.proconfig) ? r.proconfig : String(r.proconfig).replace(/^{|}$/g, "").split(",");
      expect([...config].sort()).toEqual(
        ["enable_bitmapscan=off", "enable_hashjoin=off", "enable_mergejoin=off", "enable_seqscan=off", "plan_cache_mode=force_generic_plan"],
      );
    }
  });

  it("the settings last for the claim's transaction only", async () => {
    const em = db.orm.em.fork();
    await em.transactional((tx) => executeBound(tx, ORDERED_QUEUE_SCAN, []));
    const [after] = await executeBound<{ enable_bitmapscan: string }>(em, "show enable_bitmapscan", []);
    expect(after.enable_bitmapscan).toBe("on");
  });

  it("a prepared statement keeps one text: a second text under its name is refused before it reaches the database", async () => {
    const em = db.orm.em.fork();
    expect(await executeBound<{ x: number }>(em, "select ?::int as x", [7], "test_one_text")).toEqual([{ x: 7 }]);
    expect(await executeBound<{ x: number }>(em, "select ?::int as x", [8], "test_one_text")).toEqual([{ x: 8 }]);
    await expect(executeBound(em, "select ?::int + 1 as x", [1], "test_one_text")).rejects.toThrow(/two different texts/);
  });

  it.runIf(dbKind() === "postgres")("on PostgreSQL a named statement is prepared on the connection, once", async () => {
    const names = await db.orm.em.fork().transactional(async (tx) => {
      await executeBound(tx, "select ?::text as y", ["a"], "test_prepared_once");
      await executeBound(tx, "select ?::text as y", ["b"], "test_prepared_once");
      return executeBound<{ name: string }>(tx, "select name from pg_prepared_statements where name = ?", ["test_prepared_once"]);
    });
    expect(names).toEqual([{ name: "test_prepared_once" }]);
  });
});
