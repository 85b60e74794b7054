/**
 * The operator's rate cards through REST: exact JSON, paging, each bad field's 400
 * with nothing changed, and the staged import for decks larger than one request.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "../support/harness.js";
import { dbKind } from "../support/db.js";

let t: TestApp;
const NOW = 1_795_348_800; // the harness clock, 2026-11-22T12:00:00Z

async function call(method: "GET" | "POST" | "PUT", url: string, payload?: object, token = ADMIN_TOKEN) {
  const res = await t.app.inject({ method, url, headers: { authorization: `Bearer ${token}` }, payload });
  const json = res.body === "" ? undefined : res.json();
  return { status: res.statusCode, body: json?.ResponseStatus ?? json };
}

const RATES = [
  { Prefix: "+61", PricePerSegment: "0.05" },
  { Prefix: "+614", PricePerSegment: "0.0525", EffectiveFrom: 0 },
  { Prefix: "+614", PricePerSegment: "0.07", EffectiveFrom: 1_900_000_000 },
  { Prefix: "+1", PricePerSegment: "999999999999.999999" },
];

beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => {
  await t?.close();
});

describe(`rate cards over REST (${dbKind()})`, () => {
  it("creates a card with PUT and answers it with its rates, by Prefix then EffectiveFrom, amounts as decimal strings", async () => {
    const r = await call("PUT", "/admin/v1/RateCards/retail", { Rates: RATES });
    expect(r).toEqual({
      status: 200,
      body: {
        Name: "retail",
        RateCount: 4,
        Created: NOW,
        Updated: NOW,
        Rates: [
          { Prefix: "+1", PricePerSegment: "999999999999.999999", EffectiveFrom: 0 },
          { Prefix: "+61", PricePerSegment: "0.05", EffectiveFrom: 0 },
          { Prefix: "+614", PricePerSegment: "0.0525", EffectiveFrom: 0 },
          { Prefix: "+614", PricePerSegment: "0.07", EffectiveFrom: 1_900_000_000 },
        ],
      },
    });
    expect(await call("GET", "/admin/v1/RateCards/retail")).toEqual(r);
  });

  it("pages a card's rates and the list of cards", async () => {
    const page = await call("GET", "/admin/v1/RateCards/retail?Results_Count=2&Results_Skip=1");
    expect(page.body.Rates).toEqual([
      { Prefix: "+61", PricePerSegment: "0.05", EffectiveFrom: 0 },
      { Prefix: "+614", PricePerSegment: "0.0525", EffectiveFrom: 0 },
    ]);
    expect(page.body.RateCount).toBe(4);
    // Keyset paging: the rates after a given one, in the card's order.
    const after = await call("GET", "/admin/v1/RateCards/retail?AfterPrefix=%2B61&AfterEffectiveFrom=0&Results_Count=5");
    expect(after.body.Rates).toEqual([
      { Prefix: "+614", PricePerSegment: "0.0525", EffectiveFrom: 0 },
      { Prefix: "+614", PricePerSegment: "0.07", EffectiveFrom: 1_900_000_000 },
    ]);
    const afterSecond = await call("GET", "/admin/v1/RateCards/retail?AfterPrefix=%2B614&AfterEffectiveFrom=0");
    expect(afterSecond.body.Rates).toEqual([{ Prefix: "+614", PricePerSegment: "0.07", EffectiveFrom: 1_900_000_000 }]);
    t.clock.advance(1000);
    await call("PUT", "/admin/v1/RateCards/a-wholesale", { Rates: [{ Prefix: "+44", PricePerSegment: "0.03" }] });
    expect(await call("GET", "/admin/v1/RateCards")).toEqual({
      status: 200,
      body: {
        RateCards: [
          { Name: "a-wholesale", RateCount: 1, Created: NOW + 1, Updated: NOW + 1, Rates: [] },
          { Name: "retail", RateCount: 4, Created: NOW, Updated: NOW, Rates: [] },
        ],
        TotalCount: 2,
      },
    });
    expect((await call("GET", "/admin/v1/RateCards?Results_Count=1&Results_Skip=1")).body.RateCards.map((c: { Name: string }) => c.Name)).toEqual(["retail"]);
    expect((await call("GET", "/admin/v1/RateCards?Results_Count=1001")).status).toBe(400);
  });

  it("replaces every rate; an empty list leaves the card with none", async () => {
    t.clock.advance(1000);
    const r = await call("PUT", "/admin/v1/RateCards/a-wholesale", { Rates: [{ Prefix: "+33", PricePerSegment: "0.04", EffectiveFrom: 5 }] });
    expect(r.body).toEqual({
      Name: "a-wholesale",
      RateCount: 1,
      Created: NOW + 1,
      Updated: NOW + 2,
      Rates: [{ Prefix: "+33", PricePerSegment: "0.04", EffectiveFrom: 5 }],
    });
    expect((await call("PUT", "/admin/v1/RateCards/a-wholesale", { Rates: [] })).body).toMatchObject({ RateCount: 0, Rates: [] });
  });

  const bad: [string, object, string, string, string][] = [
    [
      "a prefix without +",
      { Prefix: "614", PricePerSegment: "0.05" },
      "Rates[1].Prefix",
      "InvalidParameter",
      'Rates[1].Prefix must be "+" and 1 to 15 digits (the first not 0), such as "+614"; got "614".',
    ],
    [
      "a prefix with a letter",
      { Prefix: "+61a", PricePerSegment: "0.05" },
      "Rates[1].Prefix",
      "InvalidParameter",
      'Rates[1].Prefix must be "+" and 1 to 15 digits (the first not 0), such as "+614"; got "+61a".',
    ],
    [
      "7 decimals",
      { Prefix: "+61", PricePerSegment: "0.0000001" },
      "Rates[1].PricePerSegment",
      "InvalidParameter",
      'Rates[1].PricePerSegment has more than 6 decimal places; got "0.0000001".',
    ],
    [
      "an exponent",
      { Prefix: "+61", PricePerSegment: "5e-2" },
      "Rates[1].PricePerSegment",
      "InvalidParameter",
      'Rates[1].PricePerSegment must be written without an exponent, such as "0.0525"; got "5e-2".',
    ],
    [
      "a sign",
      { Prefix: "+61", PricePerSegment: "-0.05" },
      "Rates[1].PricePerSegment",
      "InvalidParameter",
      'Rates[1].PricePerSegment takes no sign; got "-0.05".',
    ],
    [
      "past the range",
      { Prefix: "+61", PricePerSegment: "1000000000000" },
      "Rates[1].PricePerSegment",
      "InvalidParameter",
      'Rates[1].PricePerSegment is past the largest amount, 999999999999.999999; got "1000000000000".',
    ],
    ["no price", { Prefix: "+61" }, "Rates[1].PricePerSegment", "MissingParameter", 'Rates[1].PricePerSegment is required: a decimal string such as "0.0525".'],
    [
      "spaces",
      { Prefix: "+61", PricePerSegment: " 0.05" },
      "Rates[1].PricePerSegment",
      "InvalidParameter",
      'Rates[1].PricePerSegment must not contain spaces; got " 0.05".',
    ],
    [
      "a negative EffectiveFrom",
      { Prefix: "+61", PricePerSegment: "0.05", EffectiveFrom: -1 },
      "Rates[1].EffectiveFrom",
      "InvalidParameter",
      "Rates[1].EffectiveFrom must be Unix seconds from 0 to 253402300799 (0 or absent: in effect from the start); got -1.",
    ],
    [
      "a duplicate prefix and EffectiveFrom",
      { Prefix: "+44", PricePerSegment: "0.09", EffectiveFrom: 0 },
      "Rates[1].Prefix",
      "InvalidParameter",
      "Rates[1].Prefix: +44 with EffectiveFrom 0 is given already (Rates[0]).",
    ],
  ];
  it.each(bad)("refuses %s with a 400 naming the field, and changes nothing", async (_what, rate, field, code, message) => {
    const before = await call("GET", "/admin/v1/RateCards/retail");
    const r = await call("PUT", "/admin/v1/RateCards/retail", { Rates: [{ Prefix: "+44", PricePerSegment: "0.03" }, rate] });
    expect(r).toEqual({ status: 400, body: { ErrorCode: code, Message: message, Errors: [{ FieldName: field, ErrorCode: code, Message: message }] } });
    expect(await call("GET", "/admin/v1/RateCards/retail")).toEqual(before);
  });

  it("refuses a bad card name; an unknown card is 404; the operator token is required", async () => {
    const r = await call("PUT", "/admin/v1/RateCards/a%20b", { Rates: [] });
    expect(r.status).toBe(400);
    expect(r.body.Errors).toEqual([
      { FieldName: "Name", ErrorCode: "InvalidParameter", Message: `Name must be 1 to 64 letters, digits, '.', '_' or '-'; got "a b".` },
    ]);
    expect(await call("GET", "/admin/v1/RateCards/nope")).toEqual({
      status: 404,
      body: { ErrorCode: "NotFound", Message: 'Rate card "nope" was not found.', Errors: [] },
    });
    expect((await call("GET", "/admin/v1/RateCards", undefined, "wrong-token")).status).toBe(401);
  });

  it("imports in staged chunks, committed whole; a repeated line pair refused on commit with nothing changed", async () => {
    const first = await call("POST", "/admin/v1/RateCards/deck/Imports", { Rates: [{ Prefix: "+61", PricePerSegment: "0.05" }], FirstLine: 2 });
    expect(first.status).toBe(200);
    const sid = first.body.ImportSid;
    expect(first.body).toEqual({ ImportSid: expect.stringMatching(/^RI[A-Z0-9]{30}$/), Name: "deck", Staged: 1 });
    expect(
      (await call("POST", "/admin/v1/RateCards/deck/Imports", { ImportSid: sid, Rates: [{ Prefix: "+44", PricePerSegment: "0.03", EffectiveFrom: 7 }] })).body,
    ).toEqual({
      ImportSid: sid,
      Name: "deck",
      Staged: 2,
    });
    // Not visible before the commit.
    expect((await call("GET", "/admin/v1/RateCards/deck")).status).toBe(404);
    const bad = await call("POST", "/admin/v1/RateCards/deck/Imports", {
      ImportSid: sid,
      Rates: [
        { Prefix: "+1", PricePerSegment: "0.1" },
        { Prefix: "1", PricePerSegment: "1e2" },
      ],
    });
    expect(bad.status).toBe(400);
    expect(bad.body.Errors.map((e: { FieldName: string }) => e.FieldName)).toEqual(["Line 5: Prefix", "Line 5: PricePerSegment"]);
    const done = await call("POST", `/admin/v1/RateCards/deck/Imports/${sid}/Commit`, {});
    expect(done.body).toMatchObject({
      Name: "deck",
      RateCount: 2,
      Rates: [
        { Prefix: "+44", PricePerSegment: "0.03", EffectiveFrom: 7 },
        { Prefix: "+61", PricePerSegment: "0.05", EffectiveFrom: 0 },
      ],
    });
    expect((await call("POST", `/admin/v1/RateCards/deck/Imports/${sid}/Commit`, {})).status).toBe(404);

    const again = await call("POST", "/admin/v1/RateCards/deck/Imports", {
      Rates: [
        { Prefix: "+61", PricePerSegment: "0.01" },
        { Prefix: "+61", PricePerSegment: "0.02" },
      ],
    });
    const dup = await call("POST", `/admin/v1/RateCards/deck/Imports/${again.body.ImportSid}/Commit`, {});
    expect(dup).toEqual({
      status: 400,
      body: {
        ErrorCode: "InvalidParameter",
        Message: "Line 2: +61 with EffectiveFrom 0 is given already on line 1.",
        Errors: [{ FieldName: "Line 2", ErrorCode: "InvalidParameter", Message: "Line 2: +61 with EffectiveFrom 0 is given already on line 1." }],
      },
    });
    expect((await call("GET", "/admin/v1/RateCards/deck")).body.Rates).toEqual(done.body.Rates);
  });
});
