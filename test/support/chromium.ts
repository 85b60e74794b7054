/**
 * Debian's Chromium for the browser tests (/docs, /console), started headless the way this
 * machine needs it: without the background networking, component updates and sync whose
 * connections the closed network refuses.
 */
import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";
import { expect } from "vitest";

export const CHROMIUM = "/usr/bin/chromium";

/** Launches headless Chromium; fails with the fix when the package is missing. */
export async function launchChromium(): Promise<Browser> {
  expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: run scripts/system-packages.sh as root`).toBe(true);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
