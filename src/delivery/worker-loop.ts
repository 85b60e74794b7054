import type { Logger } from "pino";

/** A background loop: runs `tick` until it finds no work, then waits `intervalMs` (or a nudge). */
export interface WorkerLoop {
  start(): void;
  /** Wakes the loop now, e.g. right after a message was queued. */
  nudge(): void;
  /** Stops after the tick in progress, and waits for it. */
  stop(): Promise<void>;
}

/**
 * Runs `tick` (which returns how many items it handled) in a loop. Errors are logged and the loop
 * backs off; it never dies, since the database may come back.
 */
export function createWorkerLoop(name: string, tick: () => Promise<number>, opts: { intervalMs: number; log?: Logger }): WorkerLoop {
  let running = false;
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  let loop: Promise<void> | undefined;
  let failures = 0;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      wake = resolve;
      timer = setTimeout(resolve, ms);
    }).finally(() => {
      wake = undefined;
      if (timer) clearTimeout(timer);
    });

  async function run() {
    while (running) {
      let handled = 0;
      try {
        handled = await tick();
        failures = 0;
      } catch (err) {
        failures++;
        opts.log?.error({ err, worker: name, failures }, "worker tick failed");
      }
      if (!running) break;
      if (handled === 0 || failures > 0) await sleep(failures > 0 ? Math.min(5000, opts.intervalMs * 2 ** failures) : opts.intervalMs);
    }
  }

  return {
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    nudge() {
      wake?.();
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
    },
  };
}
