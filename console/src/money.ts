// Exact sums of the service's amounts for the page's totals: a decimal string ("0.0525",
// "-1.25") as bigint micro-units and back, written as the service writes amounts (at least 2
// decimals, at most 6; src/common/money.ts). No JavaScript number holds an amount here: a double
// cannot hold 0.1, and a sum of many would drift from the rows it totals.

const SHAPE = /^(-?)(\d+)(?:\.(\d{1,6}))?$/;

/** An amount the service wrote, in micro-units; "" (no amount) is 0. */
export function microsOf(text: string): bigint {
  if (text === "") return 0n;
  const m = SHAPE.exec(text);
  if (!m) throw new Error(`not an amount: ${JSON.stringify(text)}`);
  const magnitude = BigInt(m[2]) * 1_000_000n + BigInt((m[3] ?? "").padEnd(6, "0"));
  return m[1] ? -magnitude : magnitude;
}

/** Micro-units as the service writes them: "0.0525", "12.50", "-0.000001", "0.00". */
export function formatMicros(micros: bigint): string {
  const negative = micros < 0n;
  const magnitude = negative ? -micros : micros;
  const fraction = (magnitude % 1_000_000n)
    .toString()
    .padStart(6, "0")
    .replace(/0{1,4}$/, "");
  return `${negative ? "-" : ""}${magnitude / 1_000_000n}.${fraction.padEnd(2, "0")}`;
}

/** The exact sum of amounts, written as the service writes one. */
export function sumAmounts(amounts: string[]): string {
  return formatMicros(amounts.reduce((n, a) => n + microsOf(a), 0n));
}
