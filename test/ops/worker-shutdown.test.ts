/**
 * `npm run worker` (src/worker.ts) stops through the same routine as `npm start` (src/ops/shutdown.ts):
 * on SIGTERM its loops finish their round, the database closes, it logs "shutting down" and
 * "stopped" with durationMs and exits 0. The worker needs a shared PostgreSQL database, so this runs
 * in `npm test`'s PostgreSQL pass.
 */
import { afterAll, describe, expect, it } from "vitest";
import { dbKind } from "../support/db.js";
import { freePort } from "../support/kannel.js";
import { killService, serviceDatabase, type Service, type ServiceDatabase, startService, stopService, waitForOutput } from "../support/service.js";

describe.skipIf(dbKind() !== "postgres")("npm run worker: shutdown", () => {
  let db: ServiceDatabase | undefined;
  let worker: Service | undefined;

  afterAll(async () => {
    await killService(worker);
    await db?.drop();
  });

  it("on SIGTERM logs shutting down, then stopped with durationMs, and exits 0", { timeout: 120_000 }, async () => {
    db = await serviceDatabase();
    worker = await startService({ port: await freePort(), script: "src/worker.ts", waitReady: false, env: { DATABASE_URL: db.url, LOG_LEVEL: "info" } });
    await waitForOutput(worker, /"msg":"Switchboard worker running"/);
    const { code, signal } = await stopService(worker);
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    const lines = worker
      .stdout()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const shutting = lines.findIndex((l) => l.msg === "shutting down");
    const stopped = lines.findIndex((l) => l.msg === "stopped");
    expect(lines[shutting]).toMatchObject({ name: "switchboard-worker", signal: "SIGTERM", level: "info" });
    expect(stopped).toBeGreaterThan(shutting);
    expect(lines[stopped]).toMatchObject({ name: "switchboard-worker", durationMs: expect.any(Number) });
    expect(lines.filter((l) => l.level === "error")).toEqual([]);
  });
});
