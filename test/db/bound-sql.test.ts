/**
 * executeBound's parameters: on PostgreSQL arrays and dates go as literals made by wireValue
 * instead of node-postgres's own; whatever a string holds, the database must read back exactly
 * what was sent (both passes run this; the PostgreSQL pass exercises wireValue).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { executeBound, wireValue } from "../../src/db/bound-sql.js";
import { dbKind, useTestOrm } from "../support/db.js";

describe(`executeBound parameters (${dbKind()})`, () => {
  const db = useTestOrm();

  it("text arrays round-trip whatever their elements hold (quotes, backslashes, braces, commas, NULL, empty)", async () => {
    const em = db.orm.em.fork();
    const fixed = [
      'a"b',
      "back\\slash",
      '\\"',
      "{x,y}",
      "with, comma",
      "NULL",
      "",
      " lead and trail ",
      "é中😀",
      "'quote'",
      "line\nbreak",
      "tab\there",
      "\u0001",
    ];
    const [row] = await executeBound<{ v: (string | null)[] }>(em, "select ?::text[] as v", [[...fixed, null]]);
    expect(row.v).toEqual([...fixed, null]);
    const strings = fc.array(
      fc.string({ unit: "grapheme" }).map((s) => s.replace(/\0/g, "")),
      { maxLength: 8 },
    );
    await fc.assert(
      fc.asyncProperty(strings, async (values) => {
        const [r] = await executeBound<{ v: string[] }>(em, "select ?::text[] as v", [values]);
        expect(r.v).toEqual(values);
      }),
      { numRuns: 150 },
    );
  });

  it("dates (scalar and in arrays), numbers and booleans keep their values", async () => {
    const em = db.orm.em.fork();
    const at = new Date("2026-11-24T12:34:56.789Z");
    const [row] = await executeBound<{ one: Date; many: string; n: number[]; b: boolean[] }>(
      em,
      "select ?::timestamptz as one, (?::timestamptz[])::text as many, ?::int[] as n, ?::boolean[] as b",
      [at, [at, null, new Date(0)], [1, -2, 300000], [true, false, null]],
    );
    expect(new Date(row.one).getTime()).toBe(at.getTime());
    const [check] = await executeBound<{ same: boolean }>(em, "select (?::timestamptz[]) = array[?::timestamptz, null, 'epoch'::timestamptz] as same", [
      [at, null, new Date(0)],
      at,
    ]);
    expect(check.same).toBe(true);
    expect(row.n).toEqual([1, -2, 300000]);
    const [floats] = await executeBound<{ v: number[] }>(em, "select ?::float8[] as v", [[Number.NaN, 1.5, Number.POSITIVE_INFINITY]]);
    expect(floats.v).toEqual([Number.NaN, 1.5, Number.POSITIVE_INFINITY]);
    expect(row.b).toEqual([true, false, null]);
  });

  it("wireValue leaves kinds it does not write to node-postgres", () => {
    const nested = [[1, 2]];
    expect(wireValue(nested)).toBe(nested);
    const bad = new Date(Number.NaN);
    expect(wireValue(bad)).toBe(bad);
    expect(wireValue(["a", 'b"c', null, 3, true])).toBe('{"a","b\\"c",NULL,3,true}');
    expect(wireValue(["a", null, 3, true])).toBe('{"a",null,3,true}'); // one JSON.stringify
    expect(wireValue(["a", null, new Date(0), new Date(0)])).toBe('{"a",NULL,"1970-01-01T00:00:00.000Z","1970-01-01T00:00:00.000Z"}');
    expect(wireValue([Number.NaN, "x"])).toBe('{NaN,"x"}');
  });
});
