/**
 * The dispatcher loops' pacing (pacedRounds): while no backlog builds up, rounds shared by several
 * loops start at least the gap apart, each loop reserving its own start; a full round is not held.
 */
import { describe, expect, it } from "vitest";
import { pacedRounds } from "../../src/delivery/engine.js";

describe("pacedRounds", () => {
  it("spaces the starts of rounds from two loops at least the gap apart, and the first goes at once", async () => {
    const starts: number[] = [];
    const t0 = performance.now();
    const paced = pacedRounds(
      async () => {
        starts.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 3));
        return 1;
      },
      () => false,
      30,
    );
    const loop = async () => {
      for (let i = 0; i < 3; i++) await paced();
    };
    await Promise.all([loop(), loop()]);
    expect(starts).toHaveLength(6);
    expect(starts[0]).toBeLessThan(25);
    // Reserved starts, not a pile-up: six rounds take at least five gaps (less what a busy machine
    // puts between the pacer's reading of the clock and the tick's: the exact spacing is the next test's).
    expect(starts[5] - starts[0]).toBeGreaterThanOrEqual(5 * 30 - 5);
  });

  it("starts a round no earlier than its reserved start, even when a timer fires early", async () => {
    // A timer counts from the event loop's cached time, which lags the clock on a busy loop: these
    // fire 2 ms early (a 1 or 2 ms one after 1 ms). Virtual time: sleepers wake in time order.
    let clock = 1_000;
    const sleepers: { at: number; wake: () => void }[] = [];
    const starts: number[] = [];
    const paced = pacedRounds(
      async () => {
        starts.push(clock);
        return 1;
      },
      () => false,
      30,
      { now: () => clock, sleep: (ms) => new Promise<void>((wake) => void sleepers.push({ at: clock + Math.max(1, ms - 2), wake })) },
    );
    const loop = async () => {
      for (let i = 0; i < 3; i++) await paced();
    };
    let done = false;
    const both = Promise.all([loop(), loop()]).then(() => void (done = true));
    while (!done) {
      await new Promise((r) => setImmediate(r));
      sleepers.sort((x, y) => x.at - y.at);
      const next = sleepers.shift();
      if (!next) continue;
      clock = next.at;
      next.wake();
    }
    await both;
    expect(starts).toHaveLength(6);
    expect(starts[0]).toBe(1_000);
    for (let i = 1; i < starts.length; i++) expect(starts[i] - starts[i - 1]).toBeGreaterThanOrEqual(30);
  });

  it("does not hold a round while the last one came back full", async () => {
    let backlog = true;
    let rounds = 0;
    const paced = pacedRounds(
      async () => ++rounds,
      () => backlog,
      10_000,
    );
    const t0 = performance.now();
    for (let i = 0; i < 5; i++) await paced();
    expect(rounds).toBe(5);
    expect(performance.now() - t0).toBeLessThan(5_000);
    backlog = false;
    await paced(); // the first paced round after the backlog goes at once
    expect(rounds).toBe(6);
  });
});
