/**
 * The real service as a separate process (what `npm start` runs, on the Node the project
 * pins), and a database made for it: its own PostgreSQL database when DATABASE_URL names a server,
 * else a PGlite data folder in a temp directory.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { MikroORM } from "@mikro-orm/sql";
import { seedDemo } from "../../src/bootstrap.js";
import { systemClock } from "../../src/common/clock.js";
import { createOrm, migrateUp } from "../../src/db/orm.js";
import { entities } from "../../src/entities.js";
import { dbKind } from "./db.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
// The pinned Node 24 (the `node` devDependency), whatever Node happens to run the tests.
const NODE = join(ROOT, "node_modules", ".bin", "node");

/** The compiled entry points `npm start` and `npm run worker` run (scripts/build.mjs writes them). */
export const BUILT_MAIN = "dist/src/main.js";
export const BUILT_WORKER = "dist/src/worker.js";

/**
 * The node flags of `npm start`'s service command (package.json: `node scripts/build.mjs && exec node
 * <flags> dist/src/main.js`), so that tests and the benchmark run the service with a user's flags.
 */
export function npmStartFlags(): string[] {
  const script = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts.start;
  const steps = script.split("&&").map((s) => s.trim().split(/\s+/).filter(Boolean));
  // `exec`: the shell npm runs the script in becomes the service, so npm's signals reach it.
  const run = steps.at(-1)![0] === "exec" ? steps.at(-1)!.slice(1) : steps.at(-1)!;
  if (steps.length !== 2 || steps[0].join(" ") !== "node scripts/build.mjs" || run[0] !== "node" || run.at(-1) !== BUILT_MAIN) {
    throw new Error(`unexpected start script: ${script}`);
  }
  return run.slice(1, -1);
}

/**
 * Node arguments that run src/main.ts from source through tsx with `npm start`'s flags: what the
 * tests start (they test the TypeScript; test/e2e/built-service.test.ts tests the build).
 */
export function npmStartArgs(): string[] {
  return [...npmStartFlags(), "--import", "tsx", "src/main.ts"];
}

/** Runs `npm start`'s build step (scripts/build.mjs) and waits for it; throws with its output when it fails. */
export function buildService(...args: string[]): void {
  execFileSync(NODE, ["scripts/build.mjs", ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
}

/** A database a spawned service can use, and how to look into it and dispose of it. */
export interface ServiceDatabase {
  kind: "postgres" | "pglite";
  /** The DATABASE_URL to give the service. */
  url: string;
  /** Opens it from the test process (PGlite: only while no service runs on it). */
  open(): Promise<MikroORM>;
  drop(): Promise<void>;
}

/**
 * A migrated database with the first-run demo already made, so the service prints no banner (the
 * banner is for people, not logs). `password` goes into a PostgreSQL URL (the test server trusts
 * every local connection, so any password works).
 */
export async function serviceDatabase(opts: { password?: string } = {}): Promise<ServiceDatabase> {
  let db: ServiceDatabase;
  if (dbKind() === "postgres") {
    const server = new URL(process.env.DATABASE_URL!);
    const name = `sb_ops_${process.pid}_${randomBytes(5).toString("hex")}`;
    const url = new URL(server.toString());
    url.pathname = `/${name}`;
    if (opts.password) url.password = opts.password;
    db = {
      kind: "postgres",
      url: url.toString(),
      open: () => createOrm({ entities, databaseUrl: url.toString(), poolMax: 2 }),
      async drop() {
        const admin = await createOrm({ entities, databaseUrl: server.toString(), poolMax: 2 });
        try {
          await admin.em.fork().execute(`drop database if exists "${name}" with (force)`);
        } finally {
          await admin.close(true);
        }
      },
    };
  } else {
    const dir = mkdtempSync(join(tmpdir(), "switchboard-ops-"));
    const url = join(dir, "data");
    db = { kind: "pglite", url, open: () => createOrm({ entities, databaseUrl: url }), drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const orm = await db.open(); // MikroORM creates a missing PostgreSQL database on connect
  try {
    await migrateUp(orm);
    await seedDemo(orm, systemClock);
  } finally {
    await orm.close(true);
  }
  return db;
}

/** A running service: its process, what it wrote, and how to stop it. */
export interface Service {
  child: ChildProcess;
  pid: number;
  /** `http://127.0.0.1:<port>`. */
  base: string;
  /** Everything it wrote to stdout (pino JSON lines). */
  stdout(): string;
  /** Everything it wrote to stderr. */
  stderr(): string;
  /** The last 20,000 characters of stdout and stderr as they came, for failure messages. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends a signal to its process group and waits for it to exit (at once if it already has). */
  kill(signal: NodeJS.Signals): Promise<void>;
}

/** How to start the service. */
export interface StartOptions {
  port: number;
  /** The entry point: src/main.ts (`npm start`, the default) or src/worker.ts (`npm run worker`, no port: use waitReady false). */
  script?: "src/main.ts" | "src/worker.ts";
  /** Run the compiled entry (dist/, as `npm start` / `npm run worker` do; call buildService first) instead of the source through tsx. */
  compiled?: boolean;
  /** Settings on top of a clean environment (this process's, without any of the service's own). */
  env?: Record<string, string>;
  /** Sees every complete line it writes, stdout and stderr. */
  onLine?: (line: string) => void;
  /** Resolve only once GET /readyz answers 200 (default true); false resolves right after spawn. */
  waitReady?: boolean;
  readyTimeoutMs?: number;
}

/** Process groups still alive, killed when the test process exits however it exits. */
const live = new Set<number>();
let hooked = false;
function hookExit() {
  if (hooked) return;
  hooked = true;
  process.on("exit", () => {
    for (const pgid of live) {
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  });
}

/**
 * Starts the service with `npm start`'s flags (`node <its flags> --import tsx src/main.ts`, or the
 * compiled dist/src/main.js as `npm start` runs it) on `port` in its own process group,
 * so a test can SIGKILL it at any moment and start it again on the same port and database, and
 * nothing outlives the test process.
 */
export async function startService(opts: StartOptions): Promise<Service> {
  hookExit();
  const base = `http://127.0.0.1:${opts.port}`;
  const clean: NodeJS.ProcessEnv = { ...process.env };
  for (const key of ["DATABASE_URL", "SWITCHBOARD_ADMIN_TOKEN", "SMTP_URL", "METRICS_TOKEN", "LOG_LEVEL", "HOST", "PORT", "CARRIER", "REDIS_URL"])
    delete clean[key];
  for (const key of Object.keys(clean)) if (key.startsWith("KANNEL_")) delete clean[key];
  // src/main.ts with `npm start`'s node flags (or its compiled form exactly as `npm start` runs it); the worker likewise.
  const worker = opts.script === "src/worker.ts";
  const args = opts.compiled ? (worker ? [BUILT_WORKER] : [...npmStartFlags(), BUILT_MAIN]) : worker ? ["--import", "tsx", "src/worker.ts"] : npmStartArgs();
  const child = spawn(NODE, args, {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...clean, HOST: "127.0.0.1", PORT: String(opts.port), ...opts.env },
  });
  const pid = child.pid!;
  live.add(pid);
  let out = "";
  let err = "";
  let tail = "";
  const capture = (stream: NodeJS.ReadableStream, append: (s: string) => void) => {
    let pending = "";
    stream.setEncoding("utf8");
    stream.on("data", (s: string) => {
      append(s);
      tail = (tail + s).slice(-20_000);
      if (!opts.onLine) return;
      pending += s;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const l of lines) opts.onLine(l);
    });
  };
  capture(child.stdout!, (s) => (out += s));
  capture(child.stderr!, (s) => (err += s));
  let gone = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.once("exit", (code, signal) => {
      gone = true;
      live.delete(pid);
      done({ code, signal });
    }),
  );
  const svc: Service = {
    child,
    pid,
    base,
    stdout: () => out,
    stderr: () => err,
    output: () => tail,
    exited,
    async kill(signal) {
      if (gone) return;
      try {
        process.kill(-pid, signal);
      } catch {
        return;
      }
      await exited;
    },
  };
  if (opts.waitReady === false) return svc;

  const readyTimeoutMs = opts.readyTimeoutMs ?? 90_000;
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (gone) throw new Error(`the service exited before it was ready:\n${tail}`);
    const status = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return svc;
    if (Date.now() > deadline) {
      await svc.kill("SIGKILL");
      throw new Error(`the service was not ready within ${readyTimeoutMs} ms:\n${tail}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** POSTs (or PUTs) to the operator API of the service at `base` with `token`; the JSON answer, or an error naming the path and status. */
export function operatorCall(base: string, token: string): (path: string, body: object, method?: "POST" | "PUT") => Promise<Record<string, string>> {
  return async (path, body, method = "POST") => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, string>;
  };
}

/** Resolves when stdout has a line matching `re`; fails early if the process exits, or after timeoutMs. */
export async function waitForOutput(svc: Service, re: RegExp, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void svc.exited.then(() => (exited = true));
  while (!re.test(svc.stdout())) {
    if (exited || Date.now() > deadline) {
      throw new Error(
        `${exited ? "service exited" : "timed out"} waiting for ${re}\n--- stdout\n${svc.stdout().slice(-4000)}\n--- stderr\n${svc.stderr().slice(-4000)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Sends SIGTERM and waits for the exit (at most `timeoutMs`); returns how it ended and how long it
 * took. The signal goes out before this returns its promise.
 */
export async function stopService(svc: Service, timeoutMs = 20_000): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  const t0 = performance.now();
  void svc.kill("SIGTERM");
  const timeout = new Promise<never>((_, fail) =>
    setTimeout(() => fail(new Error(`no exit ${timeoutMs} ms after SIGTERM\n--- stderr\n${svc.stderr()}`)), timeoutMs).unref(),
  );
  const res = await Promise.race([svc.exited, timeout]);
  return { ...res, ms: Math.round(performance.now() - t0) };
}

/** Kills a service that is still running (test clean-up after a failure). */
export async function killService(svc: Service | undefined): Promise<void> {
  await svc?.kill("SIGKILL");
}
