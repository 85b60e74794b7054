import type { Logger } from "pino";

/** How long a shutdown may take before the process gives up and exits 1. */
export const SHUTDOWN_TIMEOUT_MS = 10_000;

/**
 * The one shutdown routine of `npm start` (src/main.ts) and `npm run worker` (src/worker.ts): on
 * the first SIGTERM or SIGINT it runs `steps` in order (later signals are ignored), logs
 * "shutting down" and then "stopped" with durationMs, and exits 0; a step that throws is logged
 * ("shutdown failed") and the exit code is 1; past `timeoutMs` it logs and exits 1 whatever is
 * still running (a hung connection or database must not keep a stopped process alive).
 */
export function onShutdownSignal(log: Logger, steps: () => Promise<void>, timeoutMs = SHUTDOWN_TIMEOUT_MS): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const started = performance.now();
    log.info({ signal }, "shutting down");
    const timer = setTimeout(() => {
      log.error(`shutdown took longer than ${timeoutMs / 1000} s; exiting`);
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    let code = 0;
    try {
      await steps();
      log.info({ durationMs: Math.round(performance.now() - started) }, "stopped");
    } catch (err) {
      code = 1;
      log.error({ err }, "shutdown failed");
    } finally {
      process.exit(code);
    }
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}
