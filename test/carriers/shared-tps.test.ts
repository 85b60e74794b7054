/**
 * A carrier's Tps shared by every process (docs/limits.md): pacers whose starts first take a token
 * of the carrier's shared bucket (carriers/index.ts tpsGate, in the test database). Two pacers,
 * each allowed 50 per second on its own, together start about 50 per second, not 100; with the
 * store unreachable they start nothing; the dispatcher claims no more than two seconds of the local
 * rate ahead. Real time, with generous bounds: the exact per-second figures are the bench's
 * (`BENCH_ONLY=smpp-tps`).
 */
import { describe, expect, it } from "vitest";
import { tpsGate } from "../../src/carriers/index.js";
import { createPacer } from "../../src/carriers/pacer.js";
import { systemClock } from "../../src/common/clock.js";
import { createPostgresBucketStore } from "../../src/limits/bucket-store.js";
import { openBucketStore } from "../../src/limits/limits-store.js";
import { createSharedAllowance } from "../../src/limits/shared-allowance.js";
import { dbKind, useTestOrm } from "../support/db.js";
import { freePort } from "../support/kannel.js";

describe(`a carrier's Tps across processes (${dbKind()})`, () => {
  const db = useTestOrm();

  // Processes share a carrier only on a PostgreSQL server (the worker refuses PGlite); in-process
  // PGlite serializes every call of both "processes" with the test's own work, too slow to say
  // anything about the rate.
  it.skipIf(dbKind() !== "postgres")("two pacers of 50/s each on one shared Tps of 50 start about 50 per second between them", async () => {
    const store = createPostgresBucketStore(db.orm);
    // Two processes: two allowances on one store.
    const [p1, p2] = [createSharedAllowance({ store, clock: systemClock }), createSharedAllowance({ store, clock: systemClock })];
    const pacers = [p1, p2].map((a) => createPacer({ window: Infinity, tps: 50, gate: tpsGate(a, "shared-test", 50) }));
    const starts: number[] = [];
    const t0 = performance.now();
    const until = t0 + 2000;
    await Promise.all(
      pacers.map(async (pacer) => {
        while (performance.now() < until) {
          const slot = await pacer.acquire();
          starts.push(performance.now());
          slot.done();
        }
      }),
    );
    await Promise.all([p1.close(), p2.close()]);
    const inTwoSeconds = starts.filter((t) => t < until).length;
    // 100 in 2 s at 50/s, plus the bucket's burst (1) and a start or two at the edges, never the
    // 200 the two pacers would start alone. A loaded machine only makes fewer (69 was seen with
    // other suites running): the lower bound only says neither pacer starves.
    expect(inTwoSeconds).toBeLessThanOrEqual(104);
    expect(inTwoSeconds).toBeGreaterThanOrEqual(50);
    expect(pacers[0].capacity(30_000)).toBeLessThanOrEqual(100);
  });

  it("with the shared store unreachable, a gated pacer starts nothing", async () => {
    // A real Redis client pointed at a port nothing listens on.
    const down = await openBucketStore(db.orm, `redis://127.0.0.1:${await freePort()}`);
    const allowance = createSharedAllowance({ store: down, clock: systemClock });
    const pacer = createPacer({ window: Infinity, tps: 50, gate: tpsGate(allowance, "down-test", 50) });
    const abort = new AbortController();
    const started = pacer.acquire(abort.signal).then(() => "started");
    const winner = await Promise.race([started, new Promise((r) => setTimeout(() => r("waiting"), 300))]);
    expect(winner).toBe("waiting");
    abort.abort(new Error("test over"));
    await expect(started).rejects.toThrow("test over");
    await allowance.close();
    await down.close();
  });
});
