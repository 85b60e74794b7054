/**
 * The README and docs/ hold together: every relative link (and its #anchor) resolves, every
 * `docs/….md#anchor` named in code or tests exists, and no comment or page cites the product
 * specification by section ("spec §4.1", "contract §6"): the rule is stated in our docs, and the
 * reference points there.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const DOCS = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** Markdown without its fenced code blocks and inline code spans (links there are not links). */
function prose(md: string): string {
  return md.replace(/^(```|~~~)[\s\S]*?^\1/gm, "").replace(/`[^`\n]*`/g, "");
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of md.replace(/^(```|~~~)[\s\S]*?^\1/gm, "").matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = m[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

function anchorsOf(file: string): Set<string> {
  return anchors(readFileSync(file, "utf8"));
}

/** Checks one link target from `fromFile`; returns a problem or undefined. */
function check(fromFile: string, target: string): string | undefined {
  const [path, anchor] = target.split("#", 2) as [string, string | undefined];
  const file = path === "" ? fromFile : resolve(dirname(fromFile), decodeURI(path));
  if (!existsSync(file)) return `${target}: ${relative(ROOT, file)} does not exist`;
  if (anchor === undefined || anchor === "") return undefined;
  if (statSync(file).isDirectory() || !file.endsWith(".md")) return `${target}: an anchor into a file that is not Markdown`;
  if (!anchorsOf(file).has(anchor)) return `${target}: no heading #${anchor} in ${relative(ROOT, file)}`;
  return undefined;
}

function walk(dir: string, exts: string[]): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p, exts));
    else if (exts.some((x) => e.name.endsWith(x))) out.push(p);
  }
  return out;
}

const CODE = ["src", "test", "proto/switchboard", "bench", "scripts", ".ci"].flatMap((d) =>
  walk(join(ROOT, d), [".ts", ".proto", ".sh", ".py", ".mjs", ""]).filter((f) => statSync(f).isFile()),
);

describe("documentation links", () => {
  it("the anchor rule matches GitHub's", () => {
    expect([...anchors("# A `B` — c\n## Send SMS\n## Send SMS\n```\n# not a heading\n```\n### `CARRIER=kannel`\n")]).toEqual([
      "a-b--c",
      "send-sms",
      "send-sms-1",
      "carrierkannel",
    ]);
  });

  it("the README is at most 200 lines", () => {
    expect(readFileSync(join(ROOT, "README.md"), "utf8").trimEnd().split("\n").length).toBeLessThanOrEqual(200);
  });

  it.each(DOCS)("every relative link in %s resolves, anchors included", (doc) => {
    const file = join(ROOT, doc);
    const problems: string[] = [];
    for (const m of prose(readFileSync(file, "utf8")).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      const problem = check(file, target);
      if (problem) problems.push(problem);
    }
    expect(problems).toEqual([]);
  });

  it("every docs/….md#anchor that code and tests cite exists", () => {
    const problems: string[] = [];
    let cited = 0;
    for (const f of CODE) {
      for (const m of readFileSync(f, "utf8").matchAll(/\bdocs\/([a-z-]+\.md)(?:#([a-z0-9_-]+))?/g)) {
        cited++;
        const problem = check(join(ROOT, "README.md"), `docs/${m[1]}${m[2] ? `#${m[2]}` : ""}`);
        if (problem) problems.push(`${relative(ROOT, f)}: ${problem}`);
      }
    }
    expect(problems).toEqual([]);
    expect(cited).toBeGreaterThan(10);
  });

  it("nothing cites the product specification or the contract by section number", () => {
    const citation = /\b(spec|contract)(?:'s)?\s*(§\s*\d|\d+(\.\d+)*\b)|§\s*\d/i;
    const found: string[] = [];
    for (const f of [...CODE, ...DOCS.map((d) => join(ROOT, d))]) {
      if (f === fileURLToPath(import.meta.url)) continue;
      readFileSync(f, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (citation.test(line)) found.push(`${relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(found).toEqual([]);
  });
});
