/**
 * Sids: the shape clients rely on (docs/api.md#sids), a random tail no one can guess, and a start
 * that follows time, so a growing table's primary key is written at its right edge (issue 32).
 */
import { describe, expect, it } from "vitest";
import { isSid, newSid } from "../../src/common/sid.js";
import { useTestOrm } from "../support/db.js";

const T = Date.UTC(2026, 10, 26, 12, 0, 0);

describe("newSid", () => {
  it("is the prefix and 30 characters of [A-Z0-9], the first 9 the time", () => {
    const sid = newSid("MG", T);
    expect(sid).toMatch(/^MG[A-Z0-9]{30}$/);
    expect(isSid(sid, "MG")).toBe(true);
    expect(isSid(sid, "AC")).toBe(false);
    expect(sid.slice(2, 11)).toBe(T.toString(36).toUpperCase().padStart(9, "0"));
    expect(Number.parseInt(sid.slice(2, 11), 36)).toBe(T);
  });

  it("has a random tail: 10,000 Sids of the same millisecond all differ, every character used at every place", () => {
    const tails = Array.from({ length: 10_000 }, () => newSid("MG", T).slice(11));
    expect(new Set(tails).size).toBe(10_000);
    for (let i = 0; i < 21; i++) expect(new Set(tails.map((t) => t[i])).size).toBe(36);
  });

  it("sorts by time, at each millisecond and across a digit carry, from 1970 to the year 5000", () => {
    const times = [0, 1, 35, 36, T - 1, T, T + 1, T + 36 ** 3, Date.UTC(2059, 0, 1), Date.UTC(5000, 0, 1)];
    const sids = times.map((t) => newSid("MG", t));
    expect([...sids].sort()).toEqual(sids);
  });
});

describe("Sids in the database", () => {
  const db = useTestOrm();
  it("order by sid is time order in the database's collation", async () => {
    const sids = [0, 9, 10, 35, 36, 1295, 1296, T, T + 1].map((t) => newSid("MG", t));
    const shuffled = [...sids].reverse();
    const rows = await db.orm.em
      .fork()
      .execute<{ sid: string }[]>(`select sid from (values ${shuffled.map(() => "(?::varchar(32))").join(", ")}) as v(sid) order by sid`, shuffled);
    expect(rows.map((r) => r.sid)).toEqual(sids);
  });
});
