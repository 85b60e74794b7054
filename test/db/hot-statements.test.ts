import { describe, expect, it } from "vitest";
import { dbKind, useTestOrm } from "../support/db.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { claimInOrder } from "../../src/messaging/message-store.js";

/** Every plan node below the root, depth first. */
function planNodes(plan: Record<string, unknown>): Record<string, unknown>[] {
  const children = (plan.Plans as Record<string, unknown>[] | undefined) ?? [];
  return [plan, ...children.flatMap(planNodes)];
}

describe(`hot statements (${dbKind()})`, () => {
  const db = useTestOrm();

  /**
   * The statement of a PL/pgSQL function (its one `return query`) and its settings, as stored: an
   * EXPLAIN of that text with the function's parameters, under those settings, shows the plan the
   * function uses (its plan is cached per connection, never shown by EXPLAIN of the call).
   */
  async function functionStatement(name: string): Promise<{ sql: string; config: string[] }> {
    const [fn] = await executeBound<{ prosrc: string; proconfig: string[] | string; args: string }>(
      db.orm.em.fork(),
      "select prosrc, proconfig, pg_get_function_arguments(oid) as args from pg_proc where proname = ?",
      [name],
    );
    const body = /return query([\s\S]*);\s*end\s*$/.exec(fn.prosrc)![1];
    // Each parameter by name (p_x) becomes its position ($n).
    const params = fn.args.split(",").map((a) => a.trim().split(" ")[0]);
    const sql = params.reduce((text, p, i) => text.replace(new RegExp(`\\b${p}\\b`, "g"), `$${i + 1}`), body);
    const config = Array.isArray(fn.proconfig) ? fn.proconfig : String(fn.proconfig).replace(/^{|}$/g, "").split(",");
    return { sql, config };
  }

  /** The generic plan (the one a function caches) of a function's statement under the function's settings; with analyze, run and rolled back. */
  async function functionPlan(name: string, types: string, args: string, analyze = false): Promise<Record<string, unknown>[]> {
    const { sql, config } = await functionStatement(name);
    const rollback = new Error("rollback");
    let plan: { Plan: Record<string, unknown> }[] = [];
    await db.orm.em
      .fork()
      .transactional(async (tx) => {
        for (const c of config) {
          const [k, v] = c.split("=");
          await executeBound(tx, "select set_config(?, ?, true)", [k, v]);
        }
        await executeBound(tx, `prepare sb_test_plan(${types}) as ${sql}`, []);
        const [row] = await executeBound<{ "QUERY PLAN": unknown }>(tx, `explain (${analyze ? "analyze, " : ""}format json) execute sb_test_plan(${args})`, []);
        await executeBound(tx, "deallocate sb_test_plan", []);
        const json = row["QUERY PLAN"];
        plan = (typeof json === "string" ? JSON.parse(json) : json) as { Plan: Record<string, unknown> }[];
        throw rollback;
      })
      .catch((e) => {
        if (e !== rollback) throw e;
      });
    return planNodes(plan[0].Plan);
  }

  /** The scans of accounts and properties in a plan. */
  const enabledProbes = (nodes: Record<string, unknown>[]) =>
    nodes.filter((n) => n["Relation Name"] === "accounts" || n["Relation Name"] === "properties").map((n) => [n["Node Type"], n["Index Name"]]);
  const ENABLED_PROBES = [
    ["Index Scan", "accounts_pkey"],
    ["Index Scan", "properties_pkey"],
  ];

  for (const confirmed of [false, true]) {
    it(`the dispatcher's claim (sb_claim_due) walks the queue index in order, never a bitmap or sequential scan, with one generic plan (confirming carrier: ${confirmed})`, async () => {
      const nodes = await functionPlan("sb_claim_due", "timestamptz, timestamptz, integer, boolean", `now(), now(), 500, ${confirmed}`);
      const scans = nodes.filter((n) => String(n["Node Type"]).includes("Scan") && n["Relation Name"] === "messages");
      // The subselect finds the due messages through the queue index; the outer update reaches each by its key.
      expect(scans.map((n) => [n["Node Type"], n["Index Name"]])).toEqual([
        ["Index Scan", "messages_queue_idx"],
        ["Index Scan", "messages_pkey"],
      ]);
      expect(nodes.some((n) => n["Node Type"] === "Sort")).toBe(false);
      // Whether each claimed message may still go out (issue 27): one key probe of its account and property.
      expect(new Set(enabledProbes(nodes).map((p) => p.join(" ")))).toEqual(new Set(ENABLED_PROBES.map((p) => p.join(" "))));
    });
  }

  it("the claim stops at the limit on a queue index full of dead entries", async () => {
    const em = db.orm.em.fork();
    await executeBound(em, "insert into accounts (sid, token_hash, webhook_secret) values ('ACH1', 'x', 'y')", []);
    await executeBound(em, "insert into properties (sid, account_sid) values ('PRH1', 'ACH1')", []);
    // 2,000 messages submitted (their queue index entries stay until a vacuum), then 200 due.
    await executeBound(
      em,
      `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at)
       select 'HOT' || lpad(g::text, 5, '0'), 'ACH1', 'PRH1', 'Transmit', 'Scheduled', '+447700900001', '+447911000001', 'hi', 'GSM7', 1,
              now() - interval '1 hour' + g * interval '1 ms'
         from generate_series(1, 2200) g`,
      [],
    );
    await executeBound(em, "update messages set status = 'Submitted' where sid like 'HOT%' and sid <= 'HOT02000'", []);
    const nodes = await functionPlan("sb_claim_due", "timestamptz, timestamptz, integer, boolean", "now() + interval '1 minute', now(), 50, false", true);
    const scan = nodes.find((n) => n["Index Name"] === "messages_queue_idx")!;
    expect(scan["Node Type"]).toBe("Index Scan");
    expect(scan["Actual Rows"]).toBe(50);
    const update = nodes.find((n) => n["Node Type"] === "ModifyTable")!;
    expect(update["Actual Rows"] ?? 50).toBe(50);
    await executeBound(em, "delete from messages where sid like 'HOT%'", []);
  });

  const messageScans = (nodes: Record<string, unknown>[]) =>
    nodes
      .filter((n) => String(n["Node Type"]).includes("Scan") && n["Relation Name"] === "messages")
      .map((n) => [String(n["Node Type"]).replace("Index Only Scan", "Index Scan"), n["Index Name"]]);
  const wholeReads = ["Sort", "Hash Join", "Merge Join", "Seq Scan", "Bitmap Heap Scan"];

  it("the accounts with due messages (sb_due_accounts): a loose scan of the account queue index, one probe per account", async () => {
    const nodes = await functionPlan("sb_due_accounts", "timestamptz", "now()");
    // The first account, then each next one.
    expect(messageScans(nodes)).toEqual([
      ["Index Scan", "messages_account_queue_idx"],
      ["Index Scan", "messages_account_queue_idx"],
    ]);
    for (const t of wholeReads) expect(nodes.map((n) => String(n["Node Type"]))).not.toContain(t);
  });

  for (const confirmed of [false, true]) {
    it(`the round-robin claim (sb_claim_fair) takes each account's oldest due messages from its range of the account queue index and reaches each row by its key (confirming carrier: ${confirmed})`, async () => {
      const nodes = await functionPlan(
        "sb_claim_fair",
        "timestamptz, text[], timestamptz, integer, boolean",
        `now(), array['AC1', 'AC2'], now(), 250, ${confirmed}`,
      );
      expect(messageScans(nodes)).toEqual([
        ["Index Scan", "messages_account_queue_idx"],
        ["Index Scan", "messages_pkey"],
      ]);
      const scan = nodes.find((n) => n["Index Name"] === "messages_account_queue_idx")!;
      expect(String(scan["Index Cond"])).toContain("account_sid");
      expect(String(scan["Index Cond"])).toContain("send_at");
      // Each account's rows in index order (no sort), and no join that reads a whole index or table.
      for (const t of wholeReads) expect(nodes.map((n) => String(n["Node Type"]))).not.toContain(t);
      expect(new Set(enabledProbes(nodes).map((p) => p.join(" ")))).toEqual(new Set(ENABLED_PROBES.map((p) => p.join(" "))));
    });
  }

  // The final states with the submissions held for their reports (carrier reference, time, carrier).
  const FINAL_TYPES = "text[], text[], timestamptz[], text[], text[], text[], timestamptz[], text[]";
  const FINAL_ARGS =
    "array['MG1', 'MG2'], array['Delivered', 'Failed'], array[now(), now()], array['', 'CarrierFailed'], array['', 'x'], array['r1', 'r2'], array[now(), now()], array['A', 'B']";
  const SUBMITTING: [string, string, string][] = [
    ["sb_record_submissions", "text[], text[], timestamptz[], text[]", "array['MG1', 'MG2'], array['r1', 'r2'], array[now(), now()], array['A', 'B']"],
    ["sb_apply_final_states", FINAL_TYPES, FINAL_ARGS],
    ["sb_apply_plain_final_states", FINAL_TYPES, FINAL_ARGS],
  ];
  for (const [name, types, args] of SUBMITTING) {
    it(`${name} reaches each message by its key: one primary-key probe per Sid, no sequential scan, no hash join`, async () => {
      const nodes = await functionPlan(name, types, args);
      expect(new Set(messageScans(nodes).map((s) => s.join(" ")))).toEqual(new Set(["Index Scan messages_pkey"]));
      for (const t of ["Hash Join", "Merge Join", "Seq Scan", "Bitmap Heap Scan"]) expect(nodes.map((n) => String(n["Node Type"]))).not.toContain(t);
    });
  }

  for (const [name, types, args] of SUBMITTING) {
    it(`${name} finds each carrier's CostCard by carriers_name_key and its rate through rates_pkey (issues 43, 46)`, async () => {
      const nodes = await functionPlan(name, types, args);
      const scans = nodes.filter((n) => n["Relation Name"] === "carriers" || n["Relation Name"] === "rates").map((n) => `${n["Node Type"]} ${n["Index Name"]}`);
      expect(new Set(scans)).toEqual(new Set(["Index Scan carriers_name_key", "Index Scan rates_pkey"]));
    });
  }

  it("a send batch's facts (sb_send_facts) are looked up through an index: no sequential scan, no hash or merge join", async () => {
    const nodes = await functionPlan(
      "sb_send_facts",
      "int[], text[], text[], text[], text[], timestamptz[], text[], text[], text[], text[], text[], text[], text[], text[], text[], text[]",
      "array[0, 1], array['AC1', 'AC1'], array['PR1', 'PR1'], array['+447700900004', null], array['key-1', null], array[now(), now()], array['+447700900001', null], array['+447700900002', null], array['+447700900003', null], array['ACME', null], array['AU', null], array['retail', null], array[now()::text, now()::text], array['1', '1'], array['7', null], array['52500', null]",
    );
    const types = nodes.map((n) => String(n["Node Type"]));
    for (const t of ["Seq Scan", "Hash Join", "Merge Join"]) expect(types).not.toContain(t);
    // The registered sender ID (issue 45): one entry of the index that keeps a live name to one account per country.
    expect(nodes.filter((n) => n["Relation Name"] === "sender_ids").map((n) => [n["Node Type"], n["Index Name"]])).toEqual([
      ["Index Scan", "sender_ids_live_key"],
    ]);
    // The destination's rate (issue 43): the card's version by its key, and (where no copy of the card at that version priced the send) probes of the card's key, whatever its size.
    expect(nodes.filter((n) => n["Relation Name"] === "rate_cards").map((n) => [n["Node Type"], n["Index Name"]])).toEqual([["Index Scan", "rate_cards_pkey"]]);
    expect(nodes.filter((n) => n["Relation Name"] === "rates").map((n) => [n["Node Type"], n["Index Name"]])).toEqual([["Index Scan", "rates_pkey"]]);
    for (const table of ["accounts", "properties", "numbers", "idempotency_keys", "messages"]) {
      expect(nodes.some((n) => n["Relation Name"] === table && String(n["Node Type"]).startsWith("Index"))).toBe(true);
    }
  });

  it("a send priced from a copy of its card at the card's version runs no rate lookup; one priced from an older copy, or none, does (rate-cache.ts)", async () => {
    const em = db.orm.em.fork();
    await executeBound(em, "insert into rate_cards (name, rate_count, created_at, updated_at, version) values ('hot', 1, now(), now(), 900001)", []);
    await executeBound(em, "insert into rates (card, prefix, price_per_segment, effective_from) values ('hot', '+44', 40000, 'epoch')", []);
    await executeBound(em, "insert into accounts (sid, token_hash, webhook_secret, rate_card) values ('ACR1', 'x', 'y', 'hot')", []);
    const facts = async (version: string | null, cached: string | null) => {
      const nodes = await functionPlan(
        "sb_send_facts",
        "int[], text[], text[], text[], text[], timestamptz[], text[], text[], text[], text[], text[], text[], text[], text[], text[], text[]",
        `array[0], array['ACR1'], array['PR1'], array['+447700900004'], array[null], array[now()], array[null], array[null], array[null], array[null], array[null], array[null], array[now()::text], array['2'], array[${version === null ? "null" : `'${version}'`}]::text[], array[${cached === null ? "null" : `'${cached}'`}]::text[]`,
        true,
      );
      return nodes.filter((n) => n["Relation Name"] === "rates").map((n) => n["Actual Loops"]);
    };
    // The copy's version is the card's: its price (any, here 12345) is taken and the card's key is not probed.
    expect(await facts("900001", "12345")).toEqual([0]);
    // An older copy, or none: the statement looks the rate up itself, one probe per prefix of
    // +447700900004 from the longest (13 characters) until +44 has a rate: 11 probes.
    expect(await facts("900000", "12345")).toEqual([11]);
    expect(await facts(null, null)).toEqual([11]);
  });

  it("the send facts, claim, due-accounts, submission, final-state and shared-bucket functions carry the planner settings their files measure, and one generic plan", async () => {
    const rows = await executeBound<{ proname: string; proconfig: string[] | string }>(
      db.orm.em.fork(),
      "select proname, proconfig from pg_proc where proname like 'sb\\_%' order by proname",
      [],
    );
    // Each hot function's settings are those its .sql file gives a measured reason for (src/messaging/sql/).
    const settings: Record<string, string[]> = {
      sb_apply_final_states: ["enable_hashjoin", "enable_seqscan"],
      sb_apply_plain_final_states: ["enable_hashjoin", "enable_seqscan"],
      sb_claim_due: ["enable_bitmapscan", "enable_seqscan"],
      sb_claim_fair: ["enable_bitmapscan", "enable_hashjoin", "enable_seqscan", "enable_sort"],
      sb_due_accounts: ["enable_seqscan", "enable_sort"],
      sb_record_submissions: ["enable_hashjoin", "enable_seqscan"],
      sb_send_facts: ["enable_hashjoin", "enable_mergejoin", "enable_seqscan"],
      sb_take_tokens: [],
    };
    // Plain SQL functions the planner inlines into the statements that call them (a setting would
    // stop that: sb_claimable, sb_sms_off, the rate and cost lookups), and the charge and refund (their statements reach rows by key).
    const plain = ["sb_charge", "sb_claimable", "sb_rate_for", "sb_rate_for_batch", "sb_refund", "sb_sms_off", "sb_submission_cost", "sb_submission_on_final"];
    expect(rows.map((r) => r.proname)).toEqual([...Object.keys(settings), ...plain].sort());
    for (const r of rows) {
      if (plain.includes(r.proname)) {
        expect([r.proname, r.proconfig]).toEqual([r.proname, null]);
        continue;
      }
      const config = Array.isArray(r.proconfig) ? r.proconfig : String(r.proconfig).replace(/^{|}$/g, "").split(",");
      expect([r.proname, [...config].sort()]).toEqual([r.proname, [...settings[r.proname].map((k) => `${k}=off`), "plan_cache_mode=force_generic_plan"]]);
    }
  });

  it("a function's settings last for its own statement only", async () => {
    const em = db.orm.em.fork();
    await claimInOrder(em, false, new Date(), new Date(), 10);
    const [after] = await executeBound<{ enable_bitmapscan: string; plan_cache_mode: string }>(
      em,
      "select current_setting('enable_bitmapscan') as enable_bitmapscan, current_setting('plan_cache_mode') as plan_cache_mode",
      [],
    );
    expect(after).toEqual({ enable_bitmapscan: "on", plan_cache_mode: "auto" });
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

  // Last: it leaves the table analyzed, which the plans above are not.
  it("a backlog the statistics do not know of (analyzed while none was queued): the account claim and the due-accounts scan still take the account queue index, never a sort", async () => {
    const em = db.orm.em.fork();
    await executeBound(em, "insert into accounts (sid, token_hash, webhook_secret) values ('ACG1', 'x', 'y')", []);
    await executeBound(em, "insert into properties (sid, account_sid) values ('PRG1', 'ACG1')", []);
    const insert = (prefix: string, n: number, status: string) =>
      executeBound(
        em,
        `insert into messages (sid, account_sid, property_sid, direction, status, sender, recipient, text, encoding, num_segments, send_at)
         select '${prefix}' || lpad(g::text, 6, '0'), 'ACG1', 'PRG1', 'Transmit', '${status}', '+447700900001', '+447911000001', 'hi', 'GSM7', 1,
                now() - interval '1 hour' + g * interval '1 ms'
           from generate_series(1, ${n}) g`,
        [],
      );
    await insert("GRD", 20_000, "Delivered");
    await executeBound(em, "analyze messages", []);
    await insert("GRQ", 2_000, "Scheduled");
    try {
      const claim = await functionPlan("sb_claim_fair", "timestamptz, text[], timestamptz, integer, boolean", "now(), array['ACG1'], now(), 250, true", true);
      expect(messageScans(claim)).toEqual([
        ["Index Scan", "messages_account_queue_idx"],
        ["Index Scan", "messages_pkey"],
      ]);
      expect(claim.map((n) => String(n["Node Type"]))).not.toContain("Sort");
      const due = await functionPlan("sb_due_accounts", "timestamptz", "now()", true);
      expect(messageScans(due)).toEqual([
        ["Index Scan", "messages_account_queue_idx"],
        ["Index Scan", "messages_account_queue_idx"],
      ]);
      expect(due.map((n) => String(n["Node Type"]))).not.toContain("Sort");
    } finally {
      await executeBound(em, "delete from messages where account_sid = 'ACG1'", []);
    }
  });
});
