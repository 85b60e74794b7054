/**
 * Which Debian packages each suite needs, and whether this run lacks them. The list of packages
 * and how each is probed live in scripts/system-packages.sh (`npm test` runs it first: as root
 * with apt it installs what is missing, else it prints one line naming it). A suite is skipped
 * only when a package it needs is missing AND this run could not install it (not root, or no
 * apt-get): as root a missing package fails the suite loudly instead.
 */
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "scripts", "system-packages.sh");

/** The tools suites need, and the Debian packages that provide each. */
export const NEEDS = {
  /** initdb/pg_ctl for a private cluster (test/support/private-postgres.ts). */
  postgresServer: ["postgresql"],
  /** bearerbox, smsbox and fakesmsc (test/support/kannel.ts). */
  kannel: ["kannel", "kannel-extras"],
  /** /usr/bin/chromium for the /docs page. */
  chromium: ["chromium"],
  /** /usr/bin/python3 with grpcio and grpcio-tools. */
  pythonGrpc: ["python3-grpcio", "python3-grpc-tools"],
  /** Perl's Net::SMPP (an SMSC) behind stunnel. */
  smsc: ["libnet-smpp-perl", "stunnel4"],
  /** redis-server for a private Redis (test/support/private-redis.ts). */
  redis: ["redis-server"],
} as const;

let cached: { listed: Set<string>; skipped: Set<string> } | undefined;

function probe() {
  cached ??= {
    listed: new Set(execFileSync("bash", [SCRIPT, "--list"], { encoding: "utf8" }).split("\n").filter(Boolean)),
    skipped: new Set(execFileSync("bash", [SCRIPT, "--skipped"], { encoding: "utf8" }).split("\n").filter(Boolean)),
  };
  return cached;
}

/** The packages of `tool` this run lacks and cannot install: non-empty means skip the suite. */
export function lacking(tool: keyof typeof NEEDS): string[] {
  const { listed, skipped } = probe();
  for (const p of NEEDS[tool]) {
    if (!listed.has(p)) throw new Error(`${p} is not in scripts/system-packages.sh's list`);
  }
  return NEEDS[tool].filter((p) => skipped.has(p));
}

/** For skipIf: true when `tool` is unavailable here (scripts/system-packages.sh printed why). */
export function without(tool: keyof typeof NEEDS): boolean {
  return lacking(tool).length > 0;
}
