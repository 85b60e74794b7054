/**
 * The documented tables of configuration variables, generated from ./variables.ts: `npm run
 * docs:config` writes each group's table into its page between the group's markers, and a test
 * checks the committed pages match.
 */
import { type Group, VARIABLES, type Variable } from "./variables.js";

/** The page each group's table is in, from the repository root. */
export const CONFIG_DOCS: Record<Group, string> = {
  service: "docs/configuration.md",
  kannel: "docs/carriers.md",
  smpp: "docs/carriers.md",
  "smpp-server": "docs/smpp-server.md",
};

export const configDocBegin = (group: Group) =>
  `<!-- configuration table "${group}": generated from src/config/variables.ts by \`npm run docs:config\`; edit it there -->`;
export const configDocEnd = (group: Group) => `<!-- end of the generated configuration table "${group}" -->`;

/** The Markdown table of one group: Variable, Default, Meaning. */
export function configTableMarkdown(group: Group): string {
  const rows = (Object.entries(VARIABLES) as [string, Variable][])
    .filter(([, v]) => v.group === group)
    .map(([name, v]) => `| \`${name}\` | ${v.shown ?? v.kind.shown ?? "unset"} | ${v.doc} |`);
  return ["| Variable | Default | Meaning |", "|---|---|---|", ...rows].join("\n");
}

/** The page with each of its groups' tables replaced by the current one; throws when a group's markers are missing. */
export function withConfigTables(doc: string, page: string): string {
  let out = doc;
  for (const group of Object.keys(CONFIG_DOCS) as Group[]) {
    if (CONFIG_DOCS[group] !== page) continue;
    const begin = out.indexOf(configDocBegin(group));
    const end = out.indexOf(configDocEnd(group));
    if (begin < 0 || end < begin) throw new Error(`${page} has no generated configuration table "${group}" (its markers are missing)`);
    out = `${out.slice(0, begin + configDocBegin(group).length)}\n${configTableMarkdown(group)}\n${out.slice(end)}`;
  }
  return out;
}
