/**
 * Exact money: amounts travel as decimal strings ("0.0525") and are held as bigint
 * micro-units (millionths of the deployment's one currency), the same integers PostgreSQL stores
 * in bigint columns. No JavaScript number ever holds an amount: a double cannot hold 0.1 exactly,
 * and a sum of many such values drifts.
 *
 * The storable range is ±MAX_MICROS (just under 10^12 units): far past any price or balance,
 * and nine times below PostgreSQL's bigint limit, so a sum of a few bounded amounts computed in
 * SQL cannot overflow before it is checked.
 */
import { type FieldProblem, fieldErrors, quoted } from "./errors.js";

/** Micro-units in one unit of the currency. */
export const MICROS_PER_UNIT = 1_000_000n;
/** Decimal places an amount may have. */
export const MONEY_DECIMALS = 6;
/** The largest magnitude of any stored amount, in micro-units: 999,999,999,999.999999 units. */
export const MAX_MICROS = 10n ** 18n - 1n;

/** How a field's amount may be written. */
export interface MoneyRules {
  /** A leading "-" is allowed (an adjustment, a balance); otherwise any sign is refused. */
  signed?: boolean;
}

const SHAPE = /^(-?)(\d+)(?:\.(\d+))?$/;

/**
 * The amount a decimal string names, in micro-units, or the problem with it (naming `field`).
 * Refused: empty, spaces, an exponent, more than 6 decimals, a sign where none is allowed, "+"
 * anywhere, a bare or trailing ".", and anything past ±MAX_MICROS.
 */
export function moneyOrProblem(field: string, text: string, rules: MoneyRules = {}): bigint | FieldProblem {
  const problem = (message: string, code: FieldProblem["code"] = "InvalidParameter"): FieldProblem => ({ field, code, message });
  const example = rules.signed ? `"12.50" or "-0.0525"` : `"0.0525"`;
  if (text === "") return problem(`${field} is required: a decimal string such as ${example}.`, "MissingParameter");
  if (/\s/.test(text)) return problem(`${field} must not contain spaces; got ${quoted(text)}.`);
  if (/[eE]/.test(text)) return problem(`${field} must be written without an exponent, such as ${example}; got ${quoted(text)}.`);
  if (text.startsWith("+") || (text.startsWith("-") && !rules.signed)) {
    return problem(`${field} takes no sign${rules.signed ? " but a leading '-'" : ""}; got ${quoted(text)}.`);
  }
  const m = SHAPE.exec(text);
  if (!m) return problem(`${field} must be a decimal string such as ${example}; got ${quoted(text)}.`);
  const [, minus, whole, fraction = ""] = m;
  if (fraction.length > MONEY_DECIMALS) return problem(`${field} has more than ${MONEY_DECIMALS} decimal places; got ${quoted(text)}.`);
  // Leading zeros are harmless, but a thousand of them would make a long BigInt for nothing.
  const digits = whole.replace(/^0+(?=\d)/, "");
  if (digits.length > 12) return problem(`${field} is past the largest amount, ${formatMoney(MAX_MICROS)}; got ${quoted(text)}.`);
  const magnitude = BigInt(digits) * MICROS_PER_UNIT + BigInt(fraction.padEnd(MONEY_DECIMALS, "0"));
  return minus ? -magnitude : magnitude;
}

/** The amount a decimal string names, in micro-units; a 400 naming `field` when it is not one. */
export function parseMoney(field: string, text: string, rules: MoneyRules = {}): bigint {
  const r = moneyOrProblem(field, text, rules);
  if (typeof r !== "bigint") throw fieldErrors([r]);
  return r;
}

/**
 * Micro-units as the wire's decimal string: at least 2 decimals, at most 6, no trailing zeros
 * past the second ("0.0525", "12.50", "-0.000001", "0.00").
 */
export function formatMoney(micros: bigint): string {
  const negative = micros < 0n;
  const magnitude = negative ? -micros : micros;
  const whole = magnitude / MICROS_PER_UNIT;
  const fraction = (magnitude % MICROS_PER_UNIT)
    .toString()
    .padStart(MONEY_DECIMALS, "0")
    .replace(/0{1,4}$/, "");
  return `${negative ? "-" : ""}${whole}.${fraction.padEnd(2, "0")}`;
}

/** Whether an amount is within the storable range. */
export function inRange(micros: bigint): boolean {
  return micros >= -MAX_MICROS && micros <= MAX_MICROS;
}

/** A price times a number of segments (a whole number, 0 or more), exact; a RangeError past the storable range. */
export function timesSegments(pricePerSegment: bigint, segments: number): bigint {
  if (!Number.isSafeInteger(segments) || segments < 0) throw new RangeError(`segments must be a whole number 0 or more; got ${segments}`);
  return checked(pricePerSegment * BigInt(segments));
}

/** The exact sum of amounts; a RangeError when it leaves the storable range. */
export function sumMoney(amounts: Iterable<bigint>): bigint {
  let total = 0n;
  for (const a of amounts) total += a;
  return checked(total);
}

function checked(micros: bigint): bigint {
  if (!inRange(micros)) throw new RangeError(`${formatMoney(micros)} is past the storable range (±${formatMoney(MAX_MICROS)})`);
  return micros;
}
