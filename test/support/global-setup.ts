/**
 * vitest's globalSetup (vitest.config.ts): once per run, before any test file, on PGlite only,
 * the migrated PGlite image every test database starts from (test/support/db.ts), written to a
 * file the workers read. Each test file runs in a fresh process (isolate), so an image kept in a
 * module was migrated again by every file: seconds each, over a hundred files.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { buildPgliteImage, dbKind, PGLITE_IMAGE_KEY } from "./db.js";

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  if (dbKind() !== "pglite") return undefined;
  const dir = await mkdtemp(join(tmpdir(), "switchboard-pglite-image-"));
  const file = join(dir, "migrated.tar");
  await writeFile(file, Buffer.from(await (await buildPgliteImage()).arrayBuffer()));
  project.provide(PGLITE_IMAGE_KEY, file);
  return () => rm(dir, { recursive: true, force: true });
}
