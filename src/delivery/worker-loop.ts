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
export function createWorkerLoop(
  name: string,
  tick: () => Promise<number>,
  opts: {
    intervalMs: number;
    log?: Logger;
    /** A nudge during a round makes the next round run at once, even if this one found nothing (default: it is dropped). */
    keepNudges?: boolean;
  },
): WorkerLoop {
  let running = false;
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  let loop: Promise<void> | undefined;
  let failures = 0;
  // A nudge that came while a round was running: the work it announces may have been missed, so
  // the next round runs at once instead of sleeping.
  let nudged = false;

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
      nudged = false;
      try {
        handled = await tick();
        failures = 0;
      } catch (err) {
        failures++;
        opts.log?.error({ err, worker: name, failures }, "worker tick failed");
      }
      if (!running) break;
      if (failures > 0 || (handled === 0 && !nudged)) await sleep(failures > 0 ? Math.min(5000, opts.intervalMs * 2 ** failures) : opts.intervalMs);
    }
  }

  return {
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    nudge() {
      if (wake) wake();
      else nudged = opts.keepNudges === true;
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
    },
  };
}
