/**
 * The prepaid send's run (issue 43, BENCH_ONLY=…,prepaid): a second bench account, Prepaid, priced
 * by a 100,000-rate card imported with the operator CLI (`switchboard rates import`, timed), sends
 * the same REST requests as the `rest` run in the same rounds, so that its throughput is read
 * against the unpriced account's of the same run (target: at least 0.95 ×).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { HttpRequestSpec } from "./load.js";
import { type BenchTarget, SMS, adminCall } from "./service-runs.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The card's size: an operator's deck (the issue's figure). */
export const PREPAID_CARD_RATES = 100_000;
/** The prepaid account's sender: a number of its own (numbers are unique), next to SMS.from. */
const PREPAID_FROM = "+447700900002";

/**
 * A deck of `n` rates as an operator receives it: a rate for every country code (+1 … +9), then
 * `n - 9` eight-digit prefixes from +44700000 up, so that the bench's recipients (+4477009 and
 * five digits) are priced by a long prefix among tens of thousands, as a real deck prices mobile
 * ranges. Prices vary so that a wrong match would show in the stored price.
 */
export function benchDeckCsv(n: number): string {
  const lines = ["Prefix,PricePerSegment,EffectiveFrom"];
  for (let d = 1; d <= 9; d++) lines.push(`+${d},0.0900,0`);
  for (let i = 0; i < n - 9; i++) lines.push(`+447${String(i).padStart(5, "0")},0.${String(400 + (i % 100)).padStart(4, "0")},0`);
  return `${lines.join("\n")}\n`;
}

/** Runs the operator CLI (bin/switchboard.mjs) and resolves with its exit code and output. */
function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [join(ROOT, "bin", "switchboard.mjs"), ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    proc.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
    proc.stderr.setEncoding("utf8").on("data", (s: string) => (out += s));
    proc.once("error", reject);
    proc.once("exit", (code) => resolve({ code, out }));
  });
}

/** What the prepaid run needs: its account's target and request, and how long the import took. */
export interface PrepaidSetup {
  target: BenchTarget;
  request: HttpRequestSpec;
  /** Wall seconds of `switchboard rates import` of the whole deck (parse, check, stage, commit). */
  importSeconds: number;
  rates: number;
}

/** Imports the deck through the CLI and creates the prepaid account with a balance that never runs out. */
export async function preparePrepaid(base: string, adminToken: string, main: BenchTarget): Promise<PrepaidSetup> {
  const dir = mkdtempSync(join(tmpdir(), "sb-bench-deck-"));
  try {
    const file = join(dir, "deck.csv");
    writeFileSync(file, benchDeckCsv(PREPAID_CARD_RATES));
    const t0 = performance.now();
    const imported = await cli(["rates", "import", "bench-deck", file], { SWITCHBOARD_URL: base, SWITCHBOARD_ADMIN_TOKEN: adminToken });
    const importSeconds = (performance.now() - t0) / 1000;
    if (imported.code !== 0) throw new Error(`rates import failed (${imported.code}): ${imported.out}`);
    main.log(`rates import of ${PREPAID_CARD_RATES} rates: ${importSeconds.toFixed(2)} s`);

    const call = adminCall(base, adminToken);
    const account = await call("/admin/v1/Accounts", { Name: "Bench prepaid", SmsEnabled: true, RateCard: "bench-deck", BillingMode: "Prepaid" });
    const property = await call(`/admin/v1/Accounts/${account.AccountSid}/Properties`, { Name: "Bench prepaid", SmsEnabled: true });
    await call("/admin/v1/Numbers", { Number: PREPAID_FROM, AccountSid: account.AccountSid });
    await call(`/admin/v1/Accounts/${account.AccountSid}/BalanceEntries`, { Type: "TopUp", Amount: "999999999.00", Reference: "bench" });
    const auth = `Basic ${Buffer.from(`${account.AccountSid}:${account.Token}`).toString("base64")}`;
    const request: HttpRequestSpec = {
      url: `${base}/v2/Properties/${property.PropertySid}/Messages`,
      method: "POST",
      headers: { authorization: auth, "content-type": "application/json" },
      body: JSON.stringify({ From: PREPAID_FROM, To: SMS.to, Text: SMS.text }),
    };
    // One send first, to +447700912345: priced by the deck's eight-digit prefix +44770091 (0.0491) and charged.
    const probe = await fetch(request.url, { ...request, body: request.body!.replace("{{N}}", "12345") });
    const sent = (await probe.json()) as { Price?: string };
    if (probe.status !== 200) throw new Error(`prepaid send failed: ${probe.status} ${JSON.stringify(sent)}`);
    const price = await main.db.query("select price::text as price from messages where account_sid = $1", [account.AccountSid]);
    if (price.rows[0]?.price !== "49100") throw new Error(`prepaid send priced ${price.rows[0]?.price} micro-units, not 49100`);
    return {
      target: { ...main, accountSid: account.AccountSid, propertySid: property.PropertySid },
      request,
      importSeconds,
      rates: PREPAID_CARD_RATES,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
