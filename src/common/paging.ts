import { type FieldProblem, fieldErrors } from "./errors.js";

/** Default and largest page size of every list (docs/api.md#conventions). */
export const DEFAULT_PAGE = 200;
/** Largest page a client may ask for. */
export const MAX_PAGE = 1000;

/** Reads Results_Count / Results_Skip into a limit and offset, with any field problems. */
export function pageOf(req: { resultsCount?: number; resultsSkip: number }): { limit: number; offset: number; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const limit = req.resultsCount ?? DEFAULT_PAGE;
  if (limit < 1 || limit > MAX_PAGE) {
    problems.push({ field: "Results_Count", code: "InvalidParameter", message: `Results_Count must be between 1 and ${MAX_PAGE}.` });
  }
  if (req.resultsSkip < 0) problems.push({ field: "Results_Skip", code: "InvalidParameter", message: "Results_Skip must be 0 or more." });
  return { limit, offset: req.resultsSkip, problems };
}

/** The page a list request asks for; its field problems, if any, are thrown as the 400 naming them. */
export function checkedPage(req: { resultsCount?: number; resultsSkip: number }): { limit: number; offset: number } {
  const page = pageOf(req);
  if (page.problems.length > 0) throw fieldErrors(page.problems);
  return page;
}
