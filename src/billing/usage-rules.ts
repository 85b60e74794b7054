/**
 * The input rules of a usage statement (docs/billing.md#usage): its UTC days and its grouping.
 * Shared by the account's BillingService.GetUsage and the operator's AdminService.GetUsage.
 */
import { type FieldProblem, quoted } from "../common/errors.js";

const DAY_MS = 86_400_000;
/** The longest statement: EndDate at most this many days after StartDate. */
export const MAX_USAGE_DAYS = 366;

/** A statement's days: from `startDay` to the day before `endDay` (UTC midnights; EndDate included). */
export interface UsageDays {
  startDay: Date;
  endDay: Date;
}

/** A YYYY-MM-DD that is a calendar day, as its UTC midnight; else a problem naming the field. */
function dayOf(field: string, text: string): Date | FieldProblem {
  if (text === "") return { field, code: "MissingParameter", message: `${field} is required: a UTC day, YYYY-MM-DD.` };
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  const day = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))) : undefined;
  if (!day || day.toISOString().slice(0, 10) !== text) {
    return { field, code: "InvalidParameter", message: `${field} must be a UTC day, YYYY-MM-DD; got ${quoted(text)}.` };
  }
  return day;
}

/** The days of StartDate and EndDate, or the problems (each field named, all at once). */
export function usageDays(startDate: string, endDate: string): UsageDays | FieldProblem[] {
  const start = dayOf("StartDate", startDate.trim());
  const end = dayOf("EndDate", endDate.trim());
  const problems = [start, end].filter((d): d is FieldProblem => !(d instanceof Date));
  if (problems.length > 0) return problems;
  const [s, e] = [start as Date, end as Date];
  if (e < s)
    return [{ field: "EndDate", code: "InvalidParameter", message: `EndDate must not be before StartDate (${startDate.trim()}); got ${quoted(endDate)}.` }];
  if (e.getTime() - s.getTime() > MAX_USAGE_DAYS * DAY_MS) {
    return [{ field: "EndDate", code: "InvalidParameter", message: `EndDate must be at most ${MAX_USAGE_DAYS} days after StartDate; got ${quoted(endDate)}.` }];
  }
  return { startDay: s, endDay: new Date(e.getTime() + DAY_MS) };
}

/** GroupBy: one of `allowed` exactly (the first when ""), or a problem naming it. */
export function groupByOf<T extends string>(value: string, allowed: readonly [T, ...T[]]): T | FieldProblem {
  if (value === "") return allowed[0];
  const found = allowed.find((a) => a === value);
  if (found) return found;
  return {
    field: "GroupBy",
    code: "InvalidParameter",
    message: `GroupBy must be ${allowed.slice(0, -1).join(", ")}${allowed.length > 1 ? " or " : ""}${allowed[allowed.length - 1]}; got ${quoted(value)}.`,
  };
}
