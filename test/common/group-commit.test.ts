/** Group commit (src/common/group-commit.ts): batches in order, at most maxBatch and maxInFlight, a failed batch retried item by item. */
import { describe, expect, it } from "vitest";
import { createGroupCommit } from "../../src/common/group-commit.js";

/** A batch writer whose batches end when the test says so. */
function controlled() {
  const batches: number[][] = [];
  const ends: (() => void)[] = [];
  const run = (items: number[]) =>
    new Promise<{ ok: true; value: number }[]>((resolve) => {
      batches.push(items);
      ends.push(() => resolve(items.map((i) => ({ ok: true as const, value: i * 10 }))));
    });
  return { batches, ends, run };
}

const turn = () => new Promise((r) => setImmediate(r));

describe("group commit", () => {
  it("takes waiting items in order, maxBatch at a time, maxInFlight batches at once, and answers each with its own outcome", async () => {
    const c = controlled();
    const gc = createGroupCommit({ run: c.run, maxBatch: 3, maxInFlight: 2 });
    const answers = Array.from({ length: 10 }, (_, i) => gc.submit(i));
    await turn();
    expect(c.batches).toEqual([
      [0, 1, 2],
      [3, 4, 5],
    ]);
    expect(gc.pending()).toBe(10);
    c.ends[0]();
    await turn();
    await turn();
    expect(c.batches.slice(2)).toEqual([[6, 7, 8]]);
    expect(gc.pending()).toBe(7);
    c.ends[1]();
    await turn();
    await turn();
    expect(c.batches.slice(3)).toEqual([[9]]);
    c.ends[2]();
    c.ends[3]();
    expect(await Promise.all(answers)).toEqual([0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
    expect(gc.pending()).toBe(0);
  });

  it("never runs items of one exclusive key in two batches at once: they wait, in order, and go together in the next", async () => {
    const c = controlled();
    const gc = createGroupCommit({ run: c.run, maxBatch: 10, maxInFlight: 2, exclusive: (i: number) => (i % 2 === 0 ? "even" : undefined) });
    const first = [0, 1, 2].map((i) => gc.submit(i));
    await turn();
    expect(c.batches).toEqual([[0, 1, 2]]);
    const later = [4, 5, 6, 7].map((i) => gc.submit(i));
    await turn();
    // "even" is held by the running batch: only the items without a key go now.
    expect(c.batches.slice(1)).toEqual([[5, 7]]);
    expect(gc.pending()).toBe(7);
    c.ends[1]();
    await turn();
    expect(c.batches).toHaveLength(2);
    c.ends[0]();
    await turn();
    await turn();
    expect(c.batches.slice(2)).toEqual([[4, 6]]);
    c.ends[2]();
    expect(await Promise.all([...first, ...later])).toEqual([0, 10, 20, 40, 50, 60, 70]);
    expect(gc.pending()).toBe(0);
  });

  it("keeps order and loses nothing when thousands wait (the queue is taken from its head)", async () => {
    const seen: number[] = [];
    const gc = createGroupCommit({
      maxBatch: 256,
      maxInFlight: 2,
      run: async (items: number[]) => {
        seen.push(...items);
        await turn();
        return items.map(() => ({ ok: true as const, value: undefined }));
      },
    });
    const n = 20_000;
    await Promise.all(Array.from({ length: n }, (_, i) => gc.submit(i)));
    expect(seen).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(gc.pending()).toBe(0);
  });

  it("runs a batch that threw again item by item, so only the bad item fails", async () => {
    const runs: number[][] = [];
    const gc = createGroupCommit({
      run: async (items: number[]) => {
        runs.push(items);
        if (items.includes(2)) throw new Error(`bad ${items.join(",")}`);
        return items.map((i) => ({ ok: true as const, value: i }));
      },
    });
    const out = await Promise.allSettled([1, 2, 3].map((i) => gc.submit(i)));
    expect(runs).toEqual([[1, 2, 3], [1], [2], [3]]);
    expect(out.map((o) => (o.status === "fulfilled" ? o.value : (o.reason as Error).message))).toEqual([1, "bad 2", 3]);
  });
});
