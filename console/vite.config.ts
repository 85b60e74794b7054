// Builds the operator console (console/) into dist/console, served under /console by
// src/console/console-plugin.ts. scripts/build.mjs runs it at `npm run build` and `npm start`.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  // Relative asset URLs: the page also works behind a proxy that mounts the service under a prefix.
  base: "./",
  // Preact's JSX runtime (no React, no Babel).
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: fileURLToPath(new URL("../dist/console", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    // No inline polyfill script: the page's Content-Security-Policy allows scripts from files only.
    modulePreload: { polyfill: false },
    // No data: URLs for scripts or styles; every asset is a file of its own.
    assetsInlineLimit: 0,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 1000,
  },
  logLevel: "warn",
});
