/**
 * Guessable secrets on the public port (issue 27, defects 2 and 8): the service and the worker
 * refuse to start with an operator token under 32 characters, or with CARRIER=kannel and a
 * Kannel callback secret that is unset, empty, a published default or under 32 characters.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { resolveAdminToken } from "../../src/bootstrap.js";
import { loadConfig } from "../../src/config.js";
import { npmStartArgs } from "../support/service.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const NODE = join(ROOT, "node_modules", ".bin", "node");
const STRONG = "k".repeat(32);

describe("start-up refuses guessable secrets", () => {
  it("SWITCHBOARD_ADMIN_TOKEN under 32 characters, naming the variable", () => {
    expect(() => loadConfig({ SWITCHBOARD_ADMIN_TOKEN: "a" })).toThrow(
      "SWITCHBOARD_ADMIN_TOKEN is 1 characters long; the operator token must be at least 32 (e.g. `openssl rand -hex 32`).",
    );
    expect(() => loadConfig({ SWITCHBOARD_ADMIN_TOKEN: "x".repeat(31) })).toThrow(/SWITCHBOARD_ADMIN_TOKEN is 31 characters long/);
    expect(loadConfig({ SWITCHBOARD_ADMIN_TOKEN: "x".repeat(32) }).adminToken).toBe("x".repeat(32));
    // Unset: one is generated, of 40 characters.
    expect(loadConfig({}).adminToken).toBeUndefined();
    expect(resolveAdminToken(loadConfig({ DATABASE_URL: "memory://" })).token).toMatch(/^[A-Za-z0-9]{40}$/);
  });

  it("an operator token kept from an earlier run that is too short", async () => {
    const dir = await mkdtemp(join(tmpdir(), "sb-token-"));
    try {
      await mkdir(join(dir, "data"));
      await writeFile(join(dir, "admin-token"), "short\n");
      expect(() => resolveAdminToken(loadConfig({ DATABASE_URL: join(dir, "data") }))).toThrow(/admin-token is 5 characters long/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("CARRIER=kannel without KANNEL_CALLBACK_SECRET, with an empty one, the old default, or one under 32 characters", () => {
    expect(() => loadConfig({ CARRIER: "kannel" })).toThrow(
      "CARRIER=kannel needs KANNEL_CALLBACK_SECRET: anyone who knows it can forge replies and delivery reports. Set it to a random string of at least 32 characters (e.g. `openssl rand -hex 32`), the same one Kannel's get-url and dlr-url carry.",
    );
    expect(() => loadConfig({ CARRIER: "kannel", KANNEL_CALLBACK_SECRET: "  " })).toThrow(/needs KANNEL_CALLBACK_SECRET/);
    expect(() => loadConfig({ CARRIER: "kannel", KANNEL_CALLBACK_SECRET: "switchboard-kannel" })).toThrow(/KANNEL_CALLBACK_SECRET is a published default/);
    expect(() => loadConfig({ CARRIER: "kannel", KANNEL_CALLBACK_SECRET: "s".repeat(31) })).toThrow(/KANNEL_CALLBACK_SECRET is 31 characters long/);
    expect(loadConfig({ CARRIER: "kannel", KANNEL_CALLBACK_SECRET: STRONG }).kannel.callbackSecret).toBe(STRONG);
    // Another carrier has no callbacks: no secret needed.
    expect(loadConfig({}).kannel.callbackSecret).toBe("");
  });

  /** Runs a process to its end: its exit code and stderr. */
  function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string }> {
    const clean = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("KANNEL_") && !["SWITCHBOARD_ADMIN_TOKEN", "CARRIER", "DATABASE_URL", "PORT"].includes(k)),
    );
    return new Promise((resolve) => {
      const child = execFile(NODE, args, { cwd: ROOT, env: { ...clean, ...env }, timeout: 60_000 }, (_err, _out, stderr) =>
        resolve({ code: child.exitCode, stderr }),
      );
    });
  }

  it("a service started with CARRIER=kannel and no secret exits non-zero naming KANNEL_CALLBACK_SECRET; so does the worker", { timeout: 120_000 }, async () => {
    const env = { CARRIER: "kannel", DATABASE_URL: "memory://", PORT: "0", SWITCHBOARD_ADMIN_TOKEN: "t".repeat(40) };
    const [service, worker] = await Promise.all([run(npmStartArgs(), env), run(["--import", "tsx", "src/worker.ts"], env)]);
    expect(service.code).toBe(1);
    expect(service.stderr).toContain("Switchboard failed to start: ConfigError: CARRIER=kannel needs KANNEL_CALLBACK_SECRET");
    expect(worker.code).toBe(1);
    expect(worker.stderr).toContain("Switchboard worker failed: ConfigError: CARRIER=kannel needs KANNEL_CALLBACK_SECRET");
  });

  it("a service started with a short operator token exits non-zero naming SWITCHBOARD_ADMIN_TOKEN", { timeout: 120_000 }, async () => {
    const r = await run(npmStartArgs(), { DATABASE_URL: "memory://", PORT: "0", SWITCHBOARD_ADMIN_TOKEN: "a" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Switchboard failed to start: ConfigError: SWITCHBOARD_ADMIN_TOKEN is 1 characters long");
  });
});
