/**
 * The rules a rate card's input must meet, pure: the operator API (a 400 naming
 * `Rates[i].Field`) and the CLI's CSV import (the problem's line) both check with these, so a
 * file is refused before anything is sent, and the service refuses the same things whoever calls it.
 */
import { type FieldProblem, quoted } from "../common/errors.js";
import { moneyOrProblem } from "../common/money.js";

/** A card's name: 1 to 64 letters, digits, '.', '_' and '-' (as a carrier's). */
export const CARD_NAME_RE = /^[A-Za-z0-9._-]{1,64}$/;
/** A rate's prefix: "+" and 1 to 15 digits, the first not 0 (as every E164 number). */
export const RATE_PREFIX_RE = /^\+[1-9][0-9]{0,14}$/;
/** The latest EffectiveFrom: 9999-12-31T23:59:59Z, the last second PostgreSQL and JavaScript dates agree on in every tool. */
export const MAX_EFFECTIVE_FROM = 253_402_300_799;

/** One rate as given, before its checks. */
export interface RateInput {
  prefix: string;
  pricePerSegment: string;
  /** Unix seconds; 0: in effect from the start of time. */
  effectiveFrom: bigint | number;
}

/** One rate as stored. */
export interface Rate {
  prefix: string;
  /** Micro-units. */
  pricePerSegment: bigint;
  /** Unix seconds. */
  effectiveFrom: number;
}

/** The problem with a card's name, or undefined. */
export function cardNameProblem(name: string, field = "Name"): FieldProblem | undefined {
  if (name === "") return { field, code: "MissingParameter", message: `${field} is required: the rate card's name.` };
  if (!CARD_NAME_RE.test(name)) {
    return { field, code: "InvalidParameter", message: `${field} must be 1 to 64 letters, digits, '.', '_' or '-'; got ${quoted(name)}.` };
  }
  return undefined;
}

/**
 * One rate checked: the rate, or its problems with each field named `${at}Prefix` and so on
 * (`at` is "Rates[3]." for the API, "" for a CSV line, whose number the caller adds).
 */
export function checkRate(input: RateInput, at: string): Rate | FieldProblem[] {
  const problems: FieldProblem[] = [];
  const prefixField = `${at}Prefix`;
  if (input.prefix === "")
    problems.push({ field: prefixField, code: "MissingParameter", message: `${prefixField} is required: "+" and digits, such as "+614".` });
  else if (!RATE_PREFIX_RE.test(input.prefix)) {
    problems.push({
      field: prefixField,
      code: "InvalidParameter",
      message: `${prefixField} must be "+" and 1 to 15 digits (the first not 0), such as "+614"; got ${quoted(input.prefix)}.`,
    });
  }
  const price = moneyOrProblem(`${at}PricePerSegment`, input.pricePerSegment);
  if (typeof price !== "bigint") problems.push(price);
  const from = BigInt(input.effectiveFrom);
  const fromField = `${at}EffectiveFrom`;
  if (from < 0n || from > BigInt(MAX_EFFECTIVE_FROM)) {
    problems.push({
      field: fromField,
      code: "InvalidParameter",
      message: `${fromField} must be Unix seconds from 0 to ${MAX_EFFECTIVE_FROM} (0 or absent: in effect from the start); got ${from}.`,
    });
  }
  if (problems.length > 0 || typeof price !== "bigint") return problems;
  return { prefix: input.prefix, pricePerSegment: price, effectiveFrom: Number(from) };
}

/**
 * The first rate that repeats an earlier one's (Prefix, EffectiveFrom), as the indexes of both;
 * undefined when every pair is distinct.
 */
export function firstDuplicate(rates: readonly Pick<Rate, "prefix" | "effectiveFrom">[]): { first: number; again: number } | undefined {
  const seen = new Map<string, number>();
  for (let i = 0; i < rates.length; i++) {
    const key = `${rates[i].prefix} ${rates[i].effectiveFrom}`;
    const first = seen.get(key);
    if (first !== undefined) return { first, again: i };
    seen.set(key, i);
  }
  return undefined;
}
