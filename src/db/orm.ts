import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import type { EntityManager, MikroORM, Options } from "@mikro-orm/sql";
import { Migrator } from "@mikro-orm/migrations";
import { CompiledQuery } from "kysely";
import { Migration20261122000000 } from "./migrations/Migration20261122000000.js";
import { Migration20261122010000 } from "./migrations/Migration20261122010000.js";
import { Migration20261122020000 } from "./migrations/Migration20261122020000.js";
import { Migration20261122030000 } from "./migrations/Migration20261122030000.js";
import { Migration20261122040000 } from "./migrations/Migration20261122040000.js";
import { Migration20261124120100 } from "./migrations/Migration20261124120100.js";
import { Migration20261124120200 } from "./migrations/Migration20261124120200.js";
import { Migration20261124150000 } from "./migrations/Migration20261124150000.js";
import { Migration20261124200000 } from "./migrations/Migration20261124200000.js";
import { Migration20261124210000 } from "./migrations/Migration20261124210000.js";
import { Migration20261125000000 } from "./migrations/Migration20261125000000.js";
import { Migration20261126000000 } from "./migrations/Migration20261126000000.js";
import { Migration20261127000000 } from "./migrations/Migration20261127000000.js";
import { Migration20261128000300 } from "./migrations/Migration20261128000300.js";
import { Migration20261128070000 } from "./migrations/Migration20261128070000.js";
import { Migration20261128090000 } from "./migrations/Migration20261128090000.js";
import { Migration20261129000000 } from "./migrations/Migration20261129000000.js";
import { Migration20261129100000 } from "./migrations/Migration20261129100000.js";
import { Migration20261130000000 } from "./migrations/Migration20261130000000.js";
import { Migration20261130002900 } from "./migrations/Migration20261130002900.js";
import { Migration20261130100000 } from "./migrations/Migration20261130100000.js";
import { Migration20261201000000 } from "./migrations/Migration20261201000000.js";
import { Migration20261202000000 } from "./migrations/Migration20261202000000.js";
import { Migration20261203041000 } from "./migrations/Migration20261203041000.js";
import { Migration20261203041003 } from "./migrations/Migration20261203041003.js";
import { Migration20261203041007 } from "./migrations/Migration20261203041007.js";
import { Migration20261204000000 } from "./migrations/Migration20261204000000.js";
import { Migration20261204010000 } from "./migrations/Migration20261204010000.js";
import { Migration20261204450000 } from "./migrations/Migration20261204450000.js";
import { Migration20261204600000 } from "./migrations/Migration20261204600000.js";
import { Migration20261204700000 } from "./migrations/Migration20261204700000.js";
import { Migration20261205000000 } from "./migrations/Migration20261205000000.js";
import { Migration20261205010000 } from "./migrations/Migration20261205010000.js";
import { Migration20261205020000 } from "./migrations/Migration20261205020000.js";
import { Migration20261205100000 } from "./migrations/Migration20261205100000.js";
import { Migration20261205710000 } from "./migrations/Migration20261205710000.js";
import { Migration20261205800000 } from "./migrations/Migration20261205800000.js";
import { Migration20261206000000 } from "./migrations/Migration20261206000000.js";
import { Migration20261206010000 } from "./migrations/Migration20261206010000.js";
import { Migration20261206020000 } from "./migrations/Migration20261206020000.js";
import { applyRepeatableSql } from "./repeatable-sql.js";
import { DEFAULT_POOL_MAX, databaseKind } from "../config.js";

/** Every committed migration, oldest first; listed so they run from TS source and bundles alike (no glob). */
export const migrations = [
  { name: "Migration20261122000000", class: Migration20261122000000 },
  { name: "Migration20261122010000", class: Migration20261122010000 },
  { name: "Migration20261122020000", class: Migration20261122020000 },
  { name: "Migration20261122030000", class: Migration20261122030000 },
  { name: "Migration20261122040000", class: Migration20261122040000 },
  { name: "Migration20261124120100", class: Migration20261124120100 },
  { name: "Migration20261124120200", class: Migration20261124120200 },
  { name: "Migration20261124150000", class: Migration20261124150000 },
  { name: "Migration20261124200000", class: Migration20261124200000 },
  { name: "Migration20261124210000", class: Migration20261124210000 },
  { name: "Migration20261125000000", class: Migration20261125000000 },
  { name: "Migration20261126000000", class: Migration20261126000000 },
  { name: "Migration20261127000000", class: Migration20261127000000 },
  { name: "Migration20261128000300", class: Migration20261128000300 },
  { name: "Migration20261128070000", class: Migration20261128070000 },
  { name: "Migration20261128090000", class: Migration20261128090000 },
  { name: "Migration20261129000000", class: Migration20261129000000 },
  { name: "Migration20261129100000", class: Migration20261129100000 },
  { name: "Migration20261130000000", class: Migration20261130000000 },
  { name: "Migration20261130002900", class: Migration20261130002900 },
  { name: "Migration20261130100000", class: Migration20261130100000 },
  { name: "Migration20261201000000", class: Migration20261201000000 },
  { name: "Migration20261202000000", class: Migration20261202000000 },
  { name: "Migration20261203041000", class: Migration20261203041000 },
  { name: "Migration20261203041003", class: Migration20261203041003 },
  { name: "Migration20261203041007", class: Migration20261203041007 },
  { name: "Migration20261204000000", class: Migration20261204000000 },
  { name: "Migration20261204010000", class: Migration20261204010000 },
  { name: "Migration20261204450000", class: Migration20261204450000 },
  { name: "Migration20261204600000", class: Migration20261204600000 },
  { name: "Migration20261204700000", class: Migration20261204700000 },
  { name: "Migration20261205000000", class: Migration20261205000000 },
  { name: "Migration20261205010000", class: Migration20261205010000 },
  { name: "Migration20261205020000", class: Migration20261205020000 },
  { name: "Migration20261205100000", class: Migration20261205100000 },
  { name: "Migration20261205710000", class: Migration20261205710000 },
  { name: "Migration20261205800000", class: Migration20261205800000 },
  { name: "Migration20261206000000", class: Migration20261206000000 },
  { name: "Migration20261206010000", class: Migration20261206010000 },
  { name: "Migration20261206020000", class: Migration20261206020000 },
];

/** Options of createOrm. */
export interface CreateOrmOptions {
  /**
   * Every entity, in foreign-key order (src/entities.ts lists them): passed in because they live
   * in the domain folders above this layer.
   */
  entities: NonNullable<Options["entities"]>;
  /** postgres:// or postgresql:// for a server; memory:// for in-memory PGlite; any other value is a PGlite data folder. */
  databaseUrl: string;
  /** Logs every query through MikroORM's logger. */
  debug?: boolean;
  /** Largest number of pooled connections (PostgreSQL only); at least 2, see migrateUp. */
  poolMax?: number;
  /** In-memory PGlite only: start from this `dumpDataDir()` image instead of an empty cluster. */
  pgliteImage?: Blob;
  /** PostgreSQL only: how long opening a connection, or waiting for a free pooled one, may take (default 5 s). */
  connectTimeoutMs?: number;
  /** PostgreSQL only: the server cancels a statement running longer than this (default 30 s). */
  statementTimeoutMs?: number;
}

const kinds = new WeakMap<MikroORM, "postgres" | "pglite">();

/** Which engine an ORM runs on (PGlite has one connection: a transaction blocks every other query). */
export function ormKind(orm: MikroORM): "postgres" | "pglite" {
  return kinds.get(orm) ?? driverKind(orm.driver);
}

/** Which engine a MikroORM driver talks to (for code that holds an EntityManager: `em.getDriver()`). */
export function driverKind(driver: object): "postgres" | "pglite" {
  return driver.constructor.name === "PgliteDriver" ? "pglite" : "postgres";
}

/** Builds the ORM for a database URL (it connects on first use, so a down server only shows later); run migrateUp before serving. */
export async function createOrm(opts: CreateOrmOptions): Promise<MikroORM> {
  const orm = await initOrm(opts);
  kinds.set(orm, databaseKind(opts.databaseUrl));
  return orm;
}

async function initOrm(opts: CreateOrmOptions): Promise<MikroORM> {
  const common: Options = {
    entities: opts.entities,
    extensions: [Migrator],
    allowGlobalContext: false,
    debug: opts.debug ?? false,
    migrations: {
      path: "src/db/migrations",
      migrationsList: migrations,
      // Migrations are hand-written SQL: no schema snapshot to keep in step, and main logs what ran.
      snapshot: false,
      snapshotOnMigrate: false,
      silent: true,
      transactional: true,
      allOrNothing: true,
    },
  };
  if (databaseKind(opts.databaseUrl) === "postgres") {
    const { MikroORM: PostgresOrm } = await import("@mikro-orm/postgresql");
    const statementTimeoutMs = opts.statementTimeoutMs ?? 30_000;
    return PostgresOrm.init({
      ...common,
      clientUrl: opts.databaseUrl,
      // migrateUp holds its lock on one connection while the migrator probes on another.
      pool: { max: Math.max(2, opts.poolMax ?? DEFAULT_POOL_MAX) },
      // Bounds, so that a database that is down or unreachable fails a request in seconds instead
      // of holding it: connecting and waiting for a pooled connection (pg-pool uses one setting for
      // both), a statement on the server, and a reply on the client (a peer that vanished without
      // closing the socket), which also needs TCP keepalive to notice idle connections are dead.
      driverOptions: {
        connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
        statement_timeout: statementTimeoutMs,
        query_timeout: statementTimeoutMs + 5000,
        idle_in_transaction_session_timeout: 60_000,
        keepAlive: true,
      },
    });
  }
  const { MikroORM: PgliteOrm } = await import("@mikro-orm/pglite");
  const { PGlite } = await import("@electric-sql/pglite");
  const startParams = pgliteStartParams(PGlite.defaultStartParams);
  if (opts.databaseUrl.startsWith("memory://")) {
    return PgliteOrm.init({
      ...common,
      dbName: "memory://",
      // A function, because MikroORM deep-copies option objects and a copied Blob is unreadable.
      driverOptions: opts.pgliteImage ? () => ({ loadDataDir: opts.pgliteImage, startParams }) : { startParams },
    });
  }
  if (opts.pgliteImage) throw new Error("pgliteImage only applies to memory:// databases");
  const dir = resolve(opts.databaseUrl);
  mkdirSync(dir, { recursive: true });
  return PgliteOrm.init({ ...common, dbName: dir, driverOptions: { startParams } });
}

/** PGlite's shared buffer pool (PostgreSQL's `shared_buffers`); see pgliteStartParams. */
export const PGLITE_SHARED_BUFFERS = "16MB";

/**
 * PGlite's `max_connections`. PGlite runs PostgreSQL in single-user mode (one backend), but its
 * shared memory is still sized for every possible backend (their process slots, lock tables), inside
 * the WASM memory and touched at start: the default 100 kept ~4 MiB resident for nothing.
 * PostgreSQL refuses to start unless it exceeds `superuser_reserved_connections` (3).
 */
export const PGLITE_MAX_CONNECTIONS = 5;

/**
 * PGlite's start parameters: its defaults plus a smaller buffer pool and connection count. PGlite's
 * PostgreSQL keeps `shared_buffers` (128MB in the cluster's postgresql.conf) inside the WASM memory
 * and touches all of it at start: with the default, an idle embedded service was ~115 MiB larger
 * (docs/benchmarks.md, Memory). One process, one connection and small tables need far less; the
 * operating system's page cache still holds the data files. A pool below 16MB costs sends, though:
 * 8MB took ~15 % off the embedded service's REST sends (docs/benchmarks.md, Memory).
 */
export function pgliteStartParams(defaults: readonly string[]): string[] {
  return [...defaults, "-c", `shared_buffers=${PGLITE_SHARED_BUFFERS}`, "-c", `max_connections=${PGLITE_MAX_CONNECTIONS}`];
}

// Any constant works; it only has to be the same in every process sharing the database.
const MIGRATION_LOCK_KEY = 736_542_001;

/**
 * Applies the committed migrations that have not run yet and returns their names, then the
 * repeatable SQL files that changed (applyRepeatableSql: the functions' sources). Safe at every
 * start: on PostgreSQL an advisory lock makes concurrent starters wait for the first one instead
 * of racing it; PGlite has a single owner process, so it needs none.
 */
export async function migrateUp(orm: MikroORM): Promise<string[]> {
  const ran = await migrateVersioned(orm);
  await applyRepeatableSql(orm, ormKind(orm));
  return ran;
}

async function migrateVersioned(orm: MikroORM): Promise<string[]> {
  const migrator = orm.migrator;
  if (ormKind(orm) === "pglite") {
    return (await migrator.up()).map((m) => m.name);
  }
  const connection = orm.em.getConnection();
  return connection.transactional(async (trx) => {
    await connection.execute("select pg_advisory_xact_lock(?)", [MIGRATION_LOCK_KEY], "run", trx);
    return (await migrator.up({ transaction: trx })).map((m) => m.name);
  });
}

/**
 * Runs a read in a transaction whose statements PostgreSQL cancels after `timeoutMs` each, and
 * without parallel workers, so one read is one backend's work and a cap on reads is a cap on the
 * database CPU they take (both `set_config(…, true)`, SET LOCAL: they end with the transaction,
 * so the pooled connection goes back unchanged). PostgreSQL only: PGlite's single-threaded
 * engine never cancels a running statement and has no workers.
 */
export function withStatementTimeout<T>(em: EntityManager, timeoutMs: number, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  return em.transactional(async (tx) => {
    const settings = "select set_config('statement_timeout', $1, true), set_config('max_parallel_workers_per_gather', '0', true)";
    await tx.getKysely().executeQuery(CompiledQuery.raw(settings, [String(Math.max(1, Math.floor(timeoutMs)))]));
    return fn(tx);
  });
}

/** Whether the database answers `select 1` within timeoutMs (for /readyz); never throws. */
export async function isDatabaseReady(orm: MikroORM, timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((done) => {
    timer = setTimeout(() => done(false), timeoutMs);
  });
  const probe = orm.em
    .fork()
    .execute("select 1 as ok", [], { method: "get", signal: AbortSignal.timeout(timeoutMs) })
    .then(
      () => true,
      () => false,
    );
  try {
    return await Promise.race([probe, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
