import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { EntityManager, MikroORM } from "@mikro-orm/sql";
import { CompiledQuery } from "kysely";

/**
 * The repeatable SQL files, modelled on Flyway's repeatable migrations: the source of each
 * server-side function is a `.sql` file in a `sql/` folder beside the store that calls it
 * (`src/<domain>/sql/*.sql`), one `create or replace function` statement each. After the versioned
 * migrations, every file whose hash differs from the one recorded in `repeatable_sql` is run and
 * its hash recorded, so changing a function is an edit of its file and no new migration.
 *
 * The files are read from the source tree, found from this module as the project root two folders
 * up: the same path from `src/db/` (tsx, vitest) and from the bundles in `dist/src/` (`npm start`).
 */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** One repeatable SQL file: its path from the project root (the key of its recorded hash), text and hash. */
export interface SqlFile {
  name: string;
  sql: string;
  hash: string;
}

/** A repeatable file from its key and text. */
export function sqlFile(name: string, sql: string): SqlFile {
  return { name, sql, hash: createHash("sha256").update(sql).digest("hex") };
}

/** The repeatable SQL files under `root/src/*\/sql/`, in path order. */
export function repeatableSqlFiles(root = ROOT): SqlFile[] {
  const src = join(root, "src");
  const files: SqlFile[] = [];
  for (const domain of readdirSync(src).sort()) {
    const dir = join(src, domain, "sql");
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir).sort()) {
      if (f.endsWith(".sql")) files.push(sqlFile(`src/${domain}/sql/${f}`, readFileSync(join(dir, f), "utf8")));
    }
  }
  // A tree without them (a bundle moved away from its sources) would leave the functions as they are, silently.
  if (files.length === 0) throw new Error(`no repeatable SQL files (src/*/sql/*.sql) under ${root}`);
  return files;
}

// Any constant other than the migrations' lock key; the same in every process sharing the database.
const REPEATABLE_LOCK_KEY = 736_542_002;

/**
 * Runs the files whose hash is not the one recorded and records theirs; returns their names. When
 * every hash is already recorded (every start but the first after a change) it is one read.
 * PostgreSQL: one transaction under a transaction-scoped advisory lock, so a process starting
 * beside another waits, then finds the hashes recorded and runs nothing. PGlite has a single
 * owner process and runs a text of several statements only outside a prepared statement
 * (`exec`), so each file runs on its own, then its hash is recorded: a file that ran without its
 * hash recorded (a crash in between) only runs again at the next start.
 */
export async function applyRepeatableSql(orm: MikroORM, kind: "postgres" | "pglite", files: SqlFile[] = repeatableSqlFiles()): Promise<string[]> {
  const em = orm.em.fork();
  if (stale(files, await recordedHashes(em)).length === 0) return [];
  if (kind === "pglite") {
    const changed = stale(files, await recordedHashes(em));
    for (const file of changed) {
      await em.getConnection().executeDump(file.sql);
      await record(em, file);
    }
    return changed.map((f) => f.name);
  }
  return em.transactional(async (tx) => {
    await query(tx, "select pg_advisory_xact_lock($1)", [REPEATABLE_LOCK_KEY]);
    const changed = stale(files, await recordedHashes(tx));
    for (const file of changed) {
      // Without parameters node-postgres sends the text as a simple query: several statements may follow one another.
      await query(tx, file.sql, []);
      await record(tx, file);
    }
    return changed.map((f) => f.name);
  });
}

/** One statement with its parameters bound ($1, $2, …), in the EntityManager's transaction if it has one. */
async function query<T>(em: EntityManager, sql: string, params: unknown[]): Promise<T[]> {
  return (await em.getKysely().executeQuery<T>(CompiledQuery.raw(sql, params))).rows as T[];
}

function record(em: EntityManager, file: SqlFile): Promise<unknown> {
  return query(
    em,
    "insert into repeatable_sql (name, hash, applied_at) values ($1, $2, now()) on conflict (name) do update set hash = excluded.hash, applied_at = excluded.applied_at",
    [file.name, file.hash],
  );
}

async function recordedHashes(em: EntityManager): Promise<Map<string, string>> {
  const rows = await query<{ name: string; hash: string }>(em, "select name, hash from repeatable_sql", []);
  return new Map(rows.map((r) => [r.name, r.hash]));
}

function stale(files: SqlFile[], recorded: Map<string, string>): SqlFile[] {
  return files.filter((f) => recorded.get(f.name) !== f.hash);
}
