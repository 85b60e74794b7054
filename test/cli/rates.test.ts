/**
 * `switchboard rates import|export` (docs/billing.md) in this process against a listening app:
 * a CSV deck in and out exactly, a malformed row reported with its line number and nothing
 * imported, and a 100,000-row deck imported in seconds.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { parseRatesCsv } from "../../src/cli/rates.js";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "../support/harness.js";
import { dbKind } from "../support/db.js";

let t: TestApp;
let baseUrl: string;
let scratch: string;

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const io = {
    env: { SWITCHBOARD_URL: baseUrl, SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN },
    cwd: scratch,
    stdout: (s: string) => void (stdout += s),
    stderr: (s: string) => void (stderr += s),
  };
  const code = await main(args, io);
  return { code, stdout, stderr };
}

function file(name: string, text: string): string {
  writeFileSync(join(scratch, name), text);
  return name;
}

beforeAll(async () => {
  t = await createTestApp();
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  scratch = mkdtempSync(join(tmpdir(), "switchboard-rates-"));
});

afterAll(async () => {
  await t?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const NOW = 1_795_348_800; // the harness clock

describe(`rates import and export (${dbKind()})`, () => {
  it("imports a deck (header, CRLF, quotes, an empty EffectiveFrom) and exports it back exactly", async () => {
    const deck = file("retail.csv", 'Prefix,PricePerSegment,EffectiveFrom\r\n+61,0.05,\r\n"+614","0.0525","0"\r\n+614,0.07,1900000000\r\n+1,0.000001,0\r\n');
    const r = await cli(["rates", "import", "retail", deck]);
    expect(r).toEqual({ code: 0, stderr: "", stdout: `${JSON.stringify({ Name: "retail", RateCount: 4, Created: NOW, Updated: NOW }, null, 2)}\n` });
    const exported = "Prefix,PricePerSegment,EffectiveFrom\n+1,0.000001,0\n+61,0.05,0\n+614,0.0525,0\n+614,0.07,1900000000\n";
    expect(await cli(["rates", "export", "retail"])).toEqual({ code: 0, stderr: "", stdout: exported });
    expect((await cli(["rates", "export", "retail", "out.csv"])).code).toBe(0);
    expect(readFileSync(join(scratch, "out.csv"), "utf8")).toBe(exported);
    // What it exports imports again unchanged.
    expect((await cli(["rates", "import", "retail", "out.csv"])).code).toBe(0);
    expect((await cli(["rates", "export", "retail"])).stdout).toBe(exported);
  });

  const malformed: [string, string, { FieldName: string; ErrorCode: string; Message: string }[]][] = [
    [
      "a prefix without +",
      "+44,0.03,0\n614,0.05,0\n",
      [
        {
          FieldName: "Line 2: Prefix",
          ErrorCode: "InvalidParameter",
          Message: 'Line 2: Prefix must be "+" and 1 to 15 digits (the first not 0), such as "+614"; got "614".',
        },
      ],
    ],
    [
      "7 decimals",
      "Prefix,PricePerSegment,EffectiveFrom\n+44,0.03,0\n+61,0.0500001,0\n",
      [
        {
          FieldName: "Line 3: PricePerSegment",
          ErrorCode: "InvalidParameter",
          Message: 'Line 3: PricePerSegment has more than 6 decimal places; got "0.0500001".',
        },
      ],
    ],
    [
      "an exponent",
      "+44,3e-2,0\n",
      [
        {
          FieldName: "Line 1: PricePerSegment",
          ErrorCode: "InvalidParameter",
          Message: 'Line 1: PricePerSegment must be written without an exponent, such as "0.0525"; got "3e-2".',
        },
      ],
    ],
    [
      "a sign",
      "+44,-0.03,0\n",
      [{ FieldName: "Line 1: PricePerSegment", ErrorCode: "InvalidParameter", Message: 'Line 1: PricePerSegment takes no sign; got "-0.03".' }],
    ],
    [
      "a bad EffectiveFrom",
      "+44,0.03,tomorrow\n",
      [
        {
          FieldName: "Line 1: EffectiveFrom",
          ErrorCode: "InvalidParameter",
          Message: 'Line 1: EffectiveFrom must be Unix seconds (digits) or empty; got "tomorrow".',
        },
      ],
    ],
    [
      "a missing column",
      "+44,0.03,0\n+61\n",
      [
        {
          FieldName: "Line 2",
          ErrorCode: "InvalidParameter",
          Message: "Line 2: expected Prefix,PricePerSegment,EffectiveFrom (EffectiveFrom may be empty); got 1 field.",
        },
      ],
    ],
    [
      "a duplicate",
      "+44,0.03,0\n+61,0.05,0\n+44,0.04,\n",
      [{ FieldName: "Line 3", ErrorCode: "InvalidParameter", Message: "Line 3: +44 with EffectiveFrom 0 is given already on line 1." }],
    ],
  ];
  it.each(malformed)("reports %s with its line number, exit 1, and imports nothing", async (_what, csv, errors) => {
    const before = await cli(["rates", "export", "retail"]);
    const r = await cli(["rates", "import", "retail", file("bad.csv", csv)]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(JSON.parse(r.stderr)).toEqual({ ResponseStatus: { ErrorCode: errors[0].ErrorCode, Message: errors[0].Message, Errors: errors } });
    expect(await cli(["rates", "export", "retail"])).toEqual(before);
  });

  it("usage errors exit 2; an unknown card exports as NotFound", async () => {
    expect((await cli(["rates", "import", "retail"])).code).toBe(2);
    expect((await cli(["rates", "import", "retail", "no-such-file.csv"])).code).toBe(2);
    expect((await cli(["rates", "frobnicate"])).code).toBe(2);
    const r = await cli(["rates", "export", "nope"]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stderr).ResponseStatus.ErrorCode).toBe("NotFound");
    expect((await cli(["rates", "--help"])).stdout).toMatch(/^Usage: switchboard rates import <Name> <File.csv>/);
  });

  it("imports a 100,000-row deck in seconds, and exports it back", { timeout: 120_000 }, async () => {
    const rows = ["Prefix,PricePerSegment,EffectiveFrom"];
    for (let i = 0; i < 100_000; i++) rows.push(`+${1_000_000 + i},0.${String(i).padStart(6, "0")},${i % 2 === 0 ? 0 : 1_900_000_000}`);
    const csv = `${rows.join("\n")}\n`;
    file("big.csv", csv);
    const started = performance.now();
    const r = await cli(["rates", "import", "big", "big.csv"]);
    const importMs = performance.now() - started;
    expect(r.stderr).toBe("");
    expect(JSON.parse(r.stdout)).toMatchObject({ Name: "big", RateCount: 100_000 });
    const exportStarted = performance.now();
    const out = await cli(["rates", "export", "big"]);
    const exportMs = performance.now() - exportStarted;
    // The export is by prefix, which is the file's order here; amounts come back in the export's form (at least 2 decimals).
    const canonical = parseRatesCsv(csv);
    const back = parseRatesCsv(out.stdout);
    expect("rates" in back && back.rates.map((x) => x.rate)).toEqual("rates" in canonical && canonical.rates.map((x) => x.rate));
    console.log(`rates import of 100,000 rows (${dbKind()}): ${Math.round(importMs)} ms; export: ${Math.round(exportMs)} ms`);
    // Generous for a shared 2-core machine; the measured times are in docs/billing.md.
    expect(importMs).toBeLessThan(30_000);
  });
});
