/** Options of a pacer. */
export interface PacerOptions {
  /** Most submissions outstanding at once; Infinity for no window. */
  window: number;
  /** Most submissions started per second; 0 for no limit. */
  tps: number;
  /** Round trip assumed before any was measured, ms (sizes the window's share of capacity). */
  initialRoundTripMs?: number;
  /**
   * The carrier's Tps for the whole deployment (docs/limits.md): each start first takes one token
   * of the carrier's shared bucket; answers 0 when taken, else the ms until one may be. `tps` then
   * stays this process's ceiling, and the share it gets is what the bucket grants.
   */
  gate?: () => Promise<number>;
}

/** With a shared gate, the dispatcher claims no more than this much of the local rate ahead: the process's share is unknown. */
const GATED_HORIZON_MS = 2000;
/** A gate that failed (the shared store unreachable) is asked again after this long; nothing starts meanwhile. */
const GATE_RETRY_MS = 1000;

/** A slot to submit one PDU or request; `done` frees it and records the round trip. */
export interface PacerSlot {
  done(): void;
}

/**
 * Paces submissions: at most `window` outstanding, starts spaced 1/tps apart (a steady rate, no
 * bursts), and a pause on request (the SMSC said it is throttled). Waiters are served in order.
 */
export interface Pacer {
  /** Waits for a slot; rejects with the signal's reason if it aborts first. */
  acquire(signal?: AbortSignal): Promise<PacerSlot>;
  /** Starts nothing new for `ms` (a throttling answer); rate-limited starts resume after it. */
  pause(ms: number): void;
  /** Submissions that can start within `withinMs`, beyond those already waiting or outstanding. */
  capacity(withinMs: number): number;
  /** Rejects every waiter (the link was lost, the carrier stops). */
  rejectWaiting(reason: Error): void;
  readonly inFlight: number;
  readonly queued: number;
  readonly window: number;
  readonly tps: number;
}

interface Waiter {
  resolve(slot: PacerSlot): void;
  reject(err: unknown): void;
  signal?: AbortSignal;
  onAbort?: () => void;
  /** When it asked (performance.now()). */
  queuedAt: number;
}

/** Creates a pacer (SMPP window and SMPP_TPS, KANNEL_TPS). */
export function createPacer(opts: PacerOptions): Pacer {
  const interval = opts.tps > 0 ? 1000 / opts.tps : 0;
  const waiting: Waiter[] = [];
  let inFlight = 0;
  let nextStart = 0;
  let pausedUntil = 0;
  let timer: NodeJS.Timeout | undefined;
  // The shared gate: a token taken for the next start, a call in flight, no call before gateUntil.
  let token = false;
  let gating = false;
  let gateUntil = 0;
  // Smoothed round trip: how many submissions the window lets through per unit of time.
  let roundTripMs = opts.initialRoundTripMs ?? 1000;
  // The last `perSpan` starts: catching up after a late timer never puts more than tps starts in
  // any one second (an SMSC counting per second would answer ESME_RTHROTTLED).
  const perSpan = interval > 0 ? Math.max(1, Math.floor(opts.tps)) : 0;
  const span = perSpan * interval;
  const recent: number[] = [];

  function pump(): void {
    while (waiting.length > 0 && inFlight < opts.window) {
      const now = performance.now();
      const startAt = Math.max(nextStart, pausedUntil, gateUntil, recent.length === perSpan && perSpan > 0 ? recent[0]! + span : 0);
      if (startAt > now) {
        if (!timer) {
          timer = setTimeout(
            () => {
              timer = undefined;
              pump();
            },
            Math.ceil(startAt - now),
          );
        }
        return;
      }
      if (opts.gate && !token) {
        if (!gating) {
          gating = true;
          opts
            .gate()
            .then(
              (waitMs) => (waitMs <= 0 ? (token = true) : (gateUntil = performance.now() + waitMs)),
              () => (gateUntil = performance.now() + GATE_RETRY_MS),
            )
            .finally(() => {
              gating = false;
              pump();
            });
        }
        return;
      }
      token = false;
      const w = waiting.shift()!;
      if (w.onAbort) w.signal?.removeEventListener("abort", w.onAbort);
      inFlight++;
      // Steady spacing on the schedule, so a timer that fires late does not slow the rate (it
      // catches up at most one interval). A start that found the pacer idle, or ends a pause, is
      // its own slot: the next one waits a full interval (no burst of two).
      nextStart = Math.max(nextStart, w.queuedAt, pausedUntil, now - interval) + interval;
      if (perSpan > 0) {
        recent.push(now);
        if (recent.length > perSpan) recent.shift();
      }
      const started = now;
      let freed = false;
      w.resolve({
        done() {
          if (freed) return;
          freed = true;
          inFlight--;
          roundTripMs = roundTripMs * 0.8 + (performance.now() - started) * 0.2;
          pump();
        },
      });
    }
  }

  return {
    acquire(signal) {
      return new Promise<PacerSlot>((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason);
        const w: Waiter = { resolve, reject, signal, queuedAt: performance.now() };
        if (signal) {
          w.onAbort = () => {
            const i = waiting.indexOf(w);
            if (i >= 0) waiting.splice(i, 1);
            reject(signal.reason);
          };
          signal.addEventListener("abort", w.onAbort, { once: true });
        }
        waiting.push(w);
        pump();
      });
    },
    pause(ms) {
      pausedUntil = Math.max(pausedUntil, performance.now() + ms);
    },
    capacity(withinMs) {
      const byRate = interval > 0 ? Math.floor((opts.gate ? Math.min(withinMs, GATED_HORIZON_MS) : withinMs) / interval) : Infinity;
      const byWindow = Number.isFinite(opts.window) ? Math.floor((opts.window * withinMs) / Math.max(1, roundTripMs)) : Infinity;
      return Math.max(0, Math.min(byRate, byWindow) - waiting.length - inFlight);
    },
    rejectWaiting(reason) {
      for (const w of waiting.splice(0)) {
        if (w.onAbort) w.signal?.removeEventListener("abort", w.onAbort);
        w.reject(reason);
      }
    },
    get inFlight() {
      return inFlight;
    },
    get queued() {
      return waiting.length;
    },
    window: opts.window,
    tps: opts.tps,
  };
}
