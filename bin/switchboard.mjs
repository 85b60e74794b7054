#!/usr/bin/env node
// Launcher of the operator CLI (src/cli/main.ts, loaded through tsx). `npx switchboard` puts the
// project's node_modules/.bin, with the Node 24 of the `node` package, first on PATH; started
// any other way under an older Node, it re-runs itself on that Node 24.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const projectNode = fileURLToPath(new URL("../node_modules/node/bin/node", import.meta.url));
if (Number(process.versions.node.split(".")[0]) < 24 && existsSync(projectNode)) {
  const child = spawnSync(projectNode, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: "inherit" });
  if (child.error) throw child.error;
  process.exit(child.status ?? 1);
}

const { register } = await import("tsx/esm/api");
register();
const { main } = await import("../src/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
