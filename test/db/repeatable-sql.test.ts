import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { executeBound } from "../../src/db/bound-sql.js";
import { entities } from "../../src/entities.js";
import { createOrm, migrateUp, ormKind } from "../../src/db/orm.js";
import { applyRepeatableSql, repeatableSqlFiles, sqlFile } from "../../src/db/repeatable-sql.js";
import { readFileSync } from "node:fs";
import { sendFactsFunctionSql } from "../../src/messaging/message-send-store.js";
import { factsSpec, SEND_RULES } from "../../src/messaging/send-steps.js";
import { dbKind, useTestOrm } from "../support/db.js";

const fn = (n: number) =>
  sqlFile(
    "src/test/sql/sb_test_repeatable.sql",
    `-- a comment with a ? in it\ncreate or replace function sb_test_repeatable() returns int language sql as $$ select ${n} $$;\n`,
  );

describe(`repeatable SQL files (${dbKind()})`, () => {
  const db = useTestOrm();

  it("finds the functions' sources beside their stores, and migrateUp has applied and recorded each", async () => {
    const files = repeatableSqlFiles();
    expect(files.map((f) => f.name)).toEqual([
      "src/billing/sql/sb_charge.sql",
      "src/billing/sql/sb_rate_for.sql",
      "src/billing/sql/sb_rate_for_batch.sql",
      "src/billing/sql/sb_refund.sql",
      "src/limits/sql/sb_take_tokens.sql",
      "src/messaging/sql/sb_apply_final_states.sql",
      "src/messaging/sql/sb_apply_plain_final_states.sql",
      "src/messaging/sql/sb_claim_due.sql",
      "src/messaging/sql/sb_claim_fair.sql",
      "src/messaging/sql/sb_claimable.sql",
      "src/messaging/sql/sb_due_accounts.sql",
      "src/messaging/sql/sb_record_submissions.sql",
      "src/messaging/sql/sb_send_facts.sql",
      "src/messaging/sql/sb_sms_status.sql",
      "src/messaging/sql/sb_submission_cost.sql",
      "src/messaging/sql/sb_submission_on_final.sql",
    ]);
    const rows = await executeBound<{ name: string; hash: string }>(db.orm.em.fork(), "select name, hash from repeatable_sql order by name", []);
    expect(rows).toEqual(files.map((f) => ({ name: f.name, hash: f.hash })));
    expect(await applyRepeatableSql(db.orm, ormKind(db.orm))).toEqual([]);
  });

  it("sb_send_facts.sql is generated from the send rules' entries (npm run generate:sql) and returns each rule's fact under its name", async () => {
    const spec = factsSpec(SEND_RULES);
    const committed = readFileSync(new URL("../../src/messaging/sql/sb_send_facts.sql", import.meta.url), "utf8");
    expect(committed, "src/messaging/sql/sb_send_facts.sql is out of date: run npm run generate:sql").toBe(sendFactsFunctionSql(spec));
    const [row] = await executeBound<{ result: string }>(
      db.orm.em.fork(),
      "select pg_get_function_result(oid) as result from pg_proc where proname = 'sb_send_facts'",
      [],
    );
    const types: Record<string, string> = { bool: "boolean", text: "text", bigint: "bigint" };
    const columns = row.result.replace(/^TABLE\(|\)$/g, "").split(", ");
    expect(columns.slice(1, 1 + spec.facts.length)).toEqual(spec.facts.map((f) => `${f.name} ${types[f.type]}`));
  });

  it("runs a file once, and again only when its text changes", async () => {
    const call = async () => (await executeBound<{ n: number }>(db.orm.em.fork(), "select sb_test_repeatable() as n", []))[0].n;
    expect(await applyRepeatableSql(db.orm, ormKind(db.orm), [fn(1)])).toEqual(["src/test/sql/sb_test_repeatable.sql"]);
    expect(await call()).toBe(1);
    expect(await applyRepeatableSql(db.orm, ormKind(db.orm), [fn(1)])).toEqual([]);
    expect(await applyRepeatableSql(db.orm, ormKind(db.orm), [fn(2)])).toEqual(["src/test/sql/sb_test_repeatable.sql"]);
    expect(await call()).toBe(2);
  });

  it("runs a file of several statements (a function dropped and declared again with another result type)", async () => {
    const file = (body: string) => sqlFile("src/test/sql/sb_test_retyped.sql", body);
    await applyRepeatableSql(db.orm, ormKind(db.orm), [file("create or replace function sb_test_retyped() returns int language sql as $$ select 1 $$;")]);
    await applyRepeatableSql(db.orm, ormKind(db.orm), [
      file("drop function if exists sb_test_retyped();\ncreate or replace function sb_test_retyped() returns text language sql as $$ select 'x' $$;"),
    ]);
    expect((await executeBound<{ v: string }>(db.orm.em.fork(), "select sb_test_retyped() as v", []))[0].v).toBe("x");
  });

  it("records no hash for a file that fails, so the next start runs it again (on PostgreSQL, none of that start's files)", async () => {
    const broken = sqlFile("src/test/sql/sb_test_broken.sql", "create or replace function sb_test_broken() returns int language sql as $$ select nope $$;");
    await expect(applyRepeatableSql(db.orm, ormKind(db.orm), [fn(3), broken])).rejects.toThrow();
    const rows = await executeBound<{ name: string }>(db.orm.em.fork(), "select name from repeatable_sql where name like 'src/test/%' order by name", []);
    expect(rows.map((r) => r.name)).not.toContain(broken.name);
    if (dbKind() === "postgres") expect(await applyRepeatableSql(db.orm, ormKind(db.orm), [fn(2)])).toEqual([]);
  });

  it.runIf(dbKind() === "postgres")("lets concurrent starters apply the files once, all of them succeeding", async () => {
    const server = process.env.DATABASE_URL!;
    const name = `sb_test_repeatable_${randomBytes(6).toString("hex")}`;
    const admin = await createOrm({ entities, databaseUrl: server });
    await admin.em.fork().execute(`create database "${name}"`);
    const url = new URL(server);
    url.pathname = `/${name}`;
    const orms = await Promise.all([1, 2, 3].map(() => createOrm({ entities, databaseUrl: url.toString(), poolMax: 2 })));
    try {
      // Three starters at once on a new database: migrations and files, each applied by one of them.
      await Promise.all(orms.map((o) => migrateUp(o)));
      const recorded = await executeBound<{ name: string }>(orms[0].em.fork(), "select name from repeatable_sql order by name", []);
      expect(recorded.map((r) => r.name)).toEqual(repeatableSqlFiles().map((f) => f.name));
      // Every file changed (forgotten hashes), three starters: one runs them all, the others wait and run none.
      await executeBound(orms[0].em.fork(), "delete from repeatable_sql", []);
      const applied = await Promise.all(orms.map((o) => applyRepeatableSql(o, ormKind(o))));
      expect(applied.filter((names) => names.length > 0)).toEqual([repeatableSqlFiles().map((f) => f.name)]);
    } finally {
      for (const o of orms) await o.close(true);
      await admin.em.fork().execute(`drop database if exists "${name}" with (force)`);
      await admin.close(true);
    }
  });
});
