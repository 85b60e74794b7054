/**
 * axe-core on a console page in Chromium: no serious or critical violation. Evaluated over CDP,
 * which the page's Content-Security-Policy does not govern.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";
import { expect } from "vitest";

const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** Runs axe-core on the page as it is; `name` labels a failure. */
export async function checkAccessibility(page: Page, name: string): Promise<void> {
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as { axe: { run: (ctx: unknown, o: unknown) => Promise<{ violations: { id: string; impact: string; nodes: unknown[] }[] }> } }
    ).axe;
    const r = await axe.run((globalThis as unknown as { document: unknown }).document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }));
  });
  expect(
    violations.filter((v) => v.impact === "serious" || v.impact === "critical"),
    `${name}: ${JSON.stringify(violations)}`,
  ).toStrictEqual([]);
}
