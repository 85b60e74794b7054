/**
 * A PostgreSQL cluster of the bench's own, in a temporary folder on a free port (bench/life.ts):
 * the shared server's statistics and WAL hold every other session's work too, and its
 * configuration (shared_preload_libraries) is not the bench's to change. Made with the server's
 * own initdb and pg_ctl (BENCH_PG_BIN, default /usr/lib/postgresql/15/bin), trust authentication
 * on 127.0.0.1 only; torn down with its folder by stop().
 */
import { execFileSync } from "node:child_process";
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../test/support/kannel.js";

export interface PrivateCluster {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  port: number;
  dataDir: string;
  /** The folder of initdb, pg_ctl and pg_waldump. */
  bin: string;
  stop(): void;
}

/** Who runs the server: initdb and postgres refuse root, so under root the `postgres` account does. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    return { uid, gid };
  } catch {
    throw new Error("the bench runs as root, and initdb refuses root: it needs a `postgres` system account to run the private cluster as (none found)");
  }
}

/** Changes the owner of a folder and everything in it. */
function chownTree(path: string, uid: number, gid: number): void {
  chownSync(path, uid, gid);
  for (const e of readdirSync(path, { withFileTypes: true })) {
    if (e.isDirectory()) chownTree(join(path, e.name), uid, gid);
    else chownSync(join(path, e.name), uid, gid);
  }
}

/**
 * initdb, `settings` appended to postgresql.conf, pg_ctl start (waiting until it accepts
 * connections). Throws a clear error when initdb is missing.
 */
export async function startPrivateCluster(settings: Record<string, string>, log: (s: string) => void): Promise<PrivateCluster> {
  const bin = process.env.BENCH_PG_BIN ?? "/usr/lib/postgresql/15/bin";
  for (const tool of ["initdb", "pg_ctl"]) {
    if (!existsSync(join(bin, tool))) {
      throw new Error(
        `${join(bin, tool)} not found: the private PostgreSQL cluster needs the server's own programs (Debian: apt-get install postgresql-15), or BENCH_PG_BIN set to the folder that holds initdb and pg_ctl`,
      );
    }
  }
  const user = serverUser();
  const dir = mkdtempSync(join(tmpdir(), "sb-bench-pg-"));
  const dataDir = join(dir, "data");
  const port = await freePort();
  if (user) chownTree(dir, user.uid, user.gid);
  const run = (tool: string, args: string[]) =>
    execFileSync(join(bin, tool), args, {
      cwd: dir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LC_ALL: "C", PGDATA: dataDir },
      ...(user ?? {}),
    });
  const stop = () => {
    try {
      run("pg_ctl", ["stop", "-D", dataDir, "-m", "fast", "-w"]);
    } catch {
      /* not running */
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // --no-sync: initdb's own files need not reach the disk (a bench cluster); the server itself keeps fsync on.
    run("initdb", ["-D", dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"]);
    const conf = { listen_addresses: "'127.0.0.1'", port: String(port), unix_socket_directories: `'${dir}'`, ...settings };
    appendFileSync(
      join(dataDir, "postgresql.conf"),
      `\n# sb-bench\n${Object.entries(conf)
        .map(([k, v]) => `${k} = ${v}`)
        .join("\n")}\n`,
    );
    run("pg_ctl", ["start", "-D", dataDir, "-l", join(dir, "server.log"), "-w", "-t", "60"]);
  } catch (e) {
    const err = e as { stderr?: string; stdout?: string; message: string };
    stop();
    throw new Error(`private PostgreSQL cluster did not start: ${err.message}\n${err.stdout ?? ""}${err.stderr ?? ""}`);
  }
  log(`private PostgreSQL cluster on port ${port} (${dataDir})`);
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, port, dataDir, bin, stop };
}
