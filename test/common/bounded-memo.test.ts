/** createBoundedMemo: never more than max entries, hits kept young, deletes from both generations. */
import { describe, expect, it } from "vitest";
import { createBoundedMemo } from "../../src/common/bounded-memo.js";

describe("createBoundedMemo", () => {
  it("keeps at most max entries, and always the latest max/2 set", () => {
    const m = createBoundedMemo<number, string>(4);
    const live = (upTo: number) => [...Array(upTo).keys()].filter((k) => m.get(k) !== undefined);
    for (let i = 0; i < 50; i++) {
      m.set(i, `v${i}`);
      // Reading copies old hits young, which may turn the generations over: read a copy's worth only.
      const held = live(i + 1);
      expect(held.length).toBeLessThanOrEqual(4);
      expect(held).toContain(i);
    }
    const m2 = createBoundedMemo<number, string>(4);
    for (let i = 0; i < 4; i++) m2.set(i, `v${i}`);
    m2.set(4, "v4"); // young {2, 3} became old, {0, 1} dropped whole
    expect(m2.get(0)).toBeUndefined();
    expect(m2.get(1)).toBeUndefined();
    expect(m2.get(4)).toBe("v4");
  });

  it("a hit in the old generation survives the next turnover; delete forgets in both", () => {
    const m = createBoundedMemo<string, number>(4);
    m.set("a", 1);
    m.set("b", 2);
    m.set("c", 3); // a, b old
    expect(m.get("a")).toBe(1); // copied young
    m.set("d", 4); // young {c, a} is full: becomes old; b is dropped
    m.set("e", 5);
    expect(m.get("a")).toBe(1);
    expect(m.get("b")).toBeUndefined();
    m.delete("a");
    expect(m.get("a")).toBeUndefined();
  });

  it("stores null and tells it from absent", () => {
    const m = createBoundedMemo<string, number | null>(10);
    m.set("n", null);
    expect(m.get("n")).toBeNull();
    expect(m.get("missing")).toBeUndefined();
  });
});
