import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ERRORS_DOC, errorTableMarkdown, withErrorTable } from "../../src/common/errors-doc.js";
import { ERRORS } from "../../src/common/errors.js";
import { documentedErrors } from "../support/surface.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

describe("the documented error table", () => {
  it("is the one generated from src/common/errors.ts (run `npm run docs:errors` after changing the table)", () => {
    const committed = readFileSync(join(ROOT, ERRORS_DOC), "utf8");
    expect(committed).toBe(withErrorTable(committed));
    expect(committed).toContain(errorTableMarkdown());
  });

  it("lists every ErrorCode once, with the status and Connect code the checks of real answers read", () => {
    const documented = documentedErrors();
    expect([...documented.keys()]).toEqual(Object.keys(ERRORS));
    expect(documented.get("PayloadTooLarge")).toEqual({ http: 413, connect: "resource_exhausted" });
    expect(documented.get("MethodNotAllowed")).toEqual({ http: 405, connect: undefined });
  });
});
