import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The migrated PGlite image, built once for the run (see the file).
    globalSetup: ["test/support/global-setup.ts"],
    // Forks, at most two: each worker loads its own PGlite WASM, and this machine has two cores.
    pool: "forks",
    maxWorkers: 2,
  },
});
