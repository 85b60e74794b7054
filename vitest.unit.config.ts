/**
 * `npm run test:unit`: the edit loop's suite, no server and no database: the test files that import
 * none of what starts one (the harness, a database, a service process, Kannel, an SMSC, Redis, a
 * browser, a listening socket). Chosen by reading each file's imports, so a new unit test joins by
 * itself; `npm test` runs every file, these included, on both databases.
 */
import { readFileSync } from "node:fs";
import { globSync } from "node:fs";
import { defineConfig } from "vitest/config";

const NEEDS_A_SERVER_OR_DATABASE =
  /support\/(harness|db|service|kannel|private-postgres|private-redis|world|webhook-receiver|chromium|dns-server|statement-counter|surface)|createOrm|buildApp|smpp\/(world|smsc)|child_process|\.listen\(/;

const unitFiles = globSync("test/**/*.test.ts").filter((f) => !NEEDS_A_SERVER_OR_DATABASE.test(readFileSync(f, "utf8")));

export default defineConfig({
  test: {
    include: unitFiles,
    testTimeout: 30_000,
    pool: "forks",
    maxWorkers: 2,
  },
});
