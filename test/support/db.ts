import { createHash, randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { MikroORM } from "@mikro-orm/sql";
import { afterAll, beforeAll, inject } from "vitest";
import type { PgliteConnection } from "@mikro-orm/pglite";
import pg from "pg";
import { createOrm, migrateUp } from "../../src/db/orm.js";
import { repeatableSqlFiles } from "../../src/db/repeatable-sql.js";
import { entities } from "../../src/entities.js";

/** An isolated, migrated database for one test file or test, and how to dispose of it. */
export interface TestOrm {
  orm: MikroORM;
  close(): Promise<void>;
}

/** Which engine createTestOrm uses here: PostgreSQL when DATABASE_URL names a server, else PGlite. */
export function dbKind(): "postgres" | "pglite" {
  return /^postgres(ql)?:\/\//i.test(process.env.DATABASE_URL ?? "") ? "postgres" : "pglite";
}

/** A fresh migrated database: its own PostgreSQL database (dropped on close), or an in-memory PGlite. */
export async function createTestOrm(): Promise<TestOrm> {
  return dbKind() === "postgres" ? createPostgresTestOrm(process.env.DATABASE_URL!) : createPgliteTestOrm();
}

/** One test database for the enclosing describe block: made before its tests, closed after; read `.orm` inside a test. */
export function useTestOrm(): { readonly orm: MikroORM } {
  let db: TestOrm | undefined;
  beforeAll(async () => {
    db = await createTestOrm();
  });
  afterAll(async () => {
    await db?.close();
  });
  return {
    get orm() {
      if (!db) throw new Error("useTestOrm: the database is made in beforeAll; read .orm inside a test");
      return db.orm;
    },
  };
}

async function createPostgresTestOrm(serverUrl: string): Promise<TestOrm> {
  const name = `sb_test_${process.pid}_${randomBytes(6).toString("hex")}`;
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  // A copy of the migrated template (made once per schema, see migratedTemplate) costs a file copy
  // instead of every migration. No migrateUp after it: the template's name is the hash of every
  // migration and repeatable SQL file, so a copy is never behind.
  const template = await migratedTemplate(serverUrl);
  await adminExecute(serverUrl, `create database "${name}" template "${template}"`);
  const orm = await createOrm({ entities, databaseUrl: url.toString(), poolMax: 4 });
  return {
    orm,
    async close() {
      // The pool's end waits for every checked-out connection: one a test left in use would hang
      // the file's afterAll. Bounded here, the sessions still open are printed (what held them is
      // the bug to find) and the forced drop below ends them.
      let timer: NodeJS.Timeout | undefined;
      const closed = orm.close(true).then(() => true);
      const waited = new Promise<false>((r) => (timer = setTimeout(() => r(false), CLOSE_WAIT_MS)));
      const ok = await Promise.race([closed, waited]).finally(() => clearTimeout(timer));
      if (!ok)
        console.warn(`test database ${name}: the pool did not close within ${CLOSE_WAIT_MS} ms; sessions still open:`, await openSessions(serverUrl, name));
      await dropDatabase(serverUrl, name);
    },
  };
}

const CLOSE_WAIT_MS = 15_000;

/**
 * The name of a migrated template database on the server, made by the first worker that needs it
 * (under an advisory lock, so two workers or two runs never build it twice) and kept: its name
 * carries a hash of every migration and repeatable SQL file, so a schema change makes a new one and
 * an unchanged schema is never migrated again. Built under a temporary name and renamed when whole,
 * so a run that dies half way leaves no half-migrated template to copy.
 */
let templateName: Promise<string> | undefined;

function migratedTemplate(serverUrl: string): Promise<string> {
  templateName ??= buildTemplate(serverUrl).catch((e: unknown) => {
    templateName = undefined;
    throw e;
  });
  return templateName;
}

function schemaHash(): string {
  const hash = createHash("sha256");
  for (const f of readdirSync(MIGRATIONS_DIR).sort()) hash.update(f).update(readFileSync(join(MIGRATIONS_DIR, f)));
  for (const f of repeatableSqlFiles()) hash.update(f.name).update(f.hash);
  return hash.digest("hex").slice(0, 16);
}

const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "src", "db", "migrations");
const TEMPLATE_LOCK_KEY = 7_318_004_211;

async function buildTemplate(serverUrl: string): Promise<string> {
  const name = `sb_template_${schemaHash()}`;
  return withAdmin(serverUrl, async (admin) => {
    await admin.query(`select pg_advisory_lock(${TEMPLATE_LOCK_KEY})`);
    try {
      const found = await admin.query(`select 1 from pg_database where datname = $1`, [name]);
      if (found.rows.length > 0) return name;
      const building = `${name}_${process.pid}`;
      await admin.query(`drop database if exists "${building}" with (force)`);
      const url = new URL(serverUrl);
      url.pathname = `/${building}`;
      const orm = await createOrm({ entities, databaseUrl: url.toString(), poolMax: 1 });
      try {
        await migrateUp(orm);
      } finally {
        await orm.close(true);
      }
      await admin.query(`alter database "${building}" rename to "${name}"`);
      return name;
    } finally {
      await admin.query(`select pg_advisory_unlock(${TEMPLATE_LOCK_KEY})`);
    }
  });
}

// The server-level statements (create, drop, the template's lock) on one plain connection each
// time: a MikroORM for them cost a few hundred milliseconds of start-up per test database.
async function withAdmin<T>(serverUrl: string, work: (admin: InstanceType<typeof pg.Client>) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}

async function adminExecute(serverUrl: string, sql: string): Promise<void> {
  await withAdmin(serverUrl, (admin) => admin.query(sql));
}

async function openSessions(serverUrl: string, name: string): Promise<unknown> {
  return withAdmin(
    serverUrl,
    async (admin) =>
      (
        await admin.query(
          `select pid, state, wait_event, now() - xact_start as in_transaction, left(query, 300) as query from pg_stat_activity where datname = $1`,
          [name],
        )
      ).rows,
  );
}

async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  // WITH (FORCE) ends connections a test leaked instead of failing the drop (PostgreSQL 13+).
  await adminExecute(serverUrl, `drop database if exists "${name}" with (force)`);
}

// One migrated image per run: test/support/global-setup.ts builds it once and names its file here;
// each test database loads it (about half a second) instead of creating and migrating PGlite
// (seconds). Built in this process when no global setup ran. PGlite's own clone() would do the
// same but drops MikroORM's type parsers (raw timestamps would come back as Date here and as
// strings in production).
export const PGLITE_IMAGE_KEY = "switchboardPgliteImage";

declare module "vitest" {
  export interface ProvidedContext {
    [PGLITE_IMAGE_KEY]?: string;
  }
}

let pgliteImage: Promise<Blob> | undefined;

/** A migrated in-memory PGlite's data folder, as loadDataDir takes it. */
export async function buildPgliteImage(): Promise<Blob> {
  const template = await createOrm({ entities, databaseUrl: "memory://" });
  try {
    await migrateUp(template);
    const pglite = await (template.driver.getConnection() as unknown as PgliteConnection).getNativeClient();
    return await pglite.dumpDataDir("none");
  } finally {
    await template.close(true);
  }
}

async function loadPgliteImage(): Promise<Blob> {
  const file = inject(PGLITE_IMAGE_KEY);
  return file ? new Blob([await readFile(file)]) : buildPgliteImage();
}

async function createPgliteTestOrm(): Promise<TestOrm> {
  pgliteImage ??= loadPgliteImage();
  const image = await pgliteImage.catch((e: unknown) => {
    pgliteImage = undefined;
    throw e;
  });
  const orm = await createOrm({ entities, databaseUrl: "memory://", pgliteImage: image });
  return { orm, close: () => orm.close(true) };
}
