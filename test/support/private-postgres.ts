/**
 * A private PostgreSQL cluster for one test: initdb into a temporary directory and pg_ctl on a free
 * port, so the test can stop and start it (an outage) without touching the shared server on 5432.
 * Also the throwaway server of `npm test`'s PostgreSQL pass (scripts/test.ts). Needs the server
 * binaries (/usr/lib/postgresql/<version>/bin, Debian's `postgresql` package; scripts/system-packages.sh
 * installs it). initdb and postgres refuse to run as root: as root they run as the
 * `postgres` user (runuser), in a directory that user owns.
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chown, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "./kannel.js";

const run = promisify(execFile);

/** The newest PostgreSQL server binary directory with initdb and pg_ctl, or undefined. */
export function postgresBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "initdb")) && existsSync(join(root, v, "bin", "pg_ctl")))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0], "bin") : undefined;
}

/** A running private cluster. */
export interface PrivatePostgres {
  port: number;
  /** A URL for a database on it (`postgres` by default). */
  url(database?: string): string;
  /** pg_ctl stop; "immediate" is a crash (no shutdown checkpoint, connections cut). */
  stop(mode: "immediate" | "fast"): Promise<void>;
  /** pg_ctl start, waiting until it accepts connections. */
  start(): Promise<void>;
  /** The server log, for failure messages. */
  log(): Promise<string>;
  /** Stops it (if running) and deletes its directory. */
  dispose(): Promise<void>;
}

const stopOnExit = new Set<string>();
let hooked = false;

/** Settings of a private cluster. */
export interface PrivatePostgresOptions {
  /** max_connections (default 50). */
  maxConnections?: number;
  /** fsync off: faster, and a crash of the machine loses the cluster (fine for a throwaway one). */
  noFsync?: boolean;
}

/** Creates and starts a private cluster; throws if the binaries are missing. */
export async function startPrivatePostgres(options: PrivatePostgresOptions = {}): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("PostgreSQL server binaries were not found under /usr/lib/postgresql/<version>/bin");
  const root = process.getuid?.() === 0;
  const as = (cmd: string, args: string[]) => (root ? { cmd: "runuser", args: ["-u", "postgres", "--", cmd, ...args] } : { cmd, args });
  const exec = async (cmd: string, args: string[], timeout = 60_000) => {
    const c = as(join(bin, cmd), args);
    return run(c.cmd, c.args, { timeout });
  };

  const dir = await mkdtemp(join(tmpdir(), "switchboard-pg-"));
  if (root) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    await chown(dir, uid, gid);
  }
  const data = join(dir, "data");
  const logFile = join(dir, "server.log");
  const port = await freePort();
  await exec("initdb", ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"]);
  const serverOptions =
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=${options.maxConnections ?? 50}` + (options.noFsync ? " -c fsync=off" : "");
  const start = async () => {
    await exec("pg_ctl", ["-D", data, "-l", logFile, "-o", serverOptions, "-w", "-t", "60", "start"], 90_000);
  };
  const stop = async (mode: "immediate" | "fast") => {
    await exec("pg_ctl", ["-D", data, "-m", mode, "-w", "-t", "60", "stop"], 90_000);
  };
  if (!hooked) {
    hooked = true;
    process.on("exit", () => {
      for (const cmd of stopOnExit) {
        try {
          execFileSync("sh", ["-c", cmd], { stdio: "ignore", timeout: 10_000 });
        } catch {
          /* not running */
        }
      }
    });
  }
  const emergencyStop = [as(join(bin, "pg_ctl"), ["-D", data, "-m", "immediate", "stop"])].map((c) => [c.cmd, ...c.args].join(" "))[0];
  stopOnExit.add(emergencyStop);
  await start();

  return {
    port,
    url: (database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}`,
    stop,
    start,
    log: () => readFile(logFile, "utf8").catch(() => ""),
    async dispose() {
      await stop("fast").catch(() => undefined);
      stopOnExit.delete(emergencyStop);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
