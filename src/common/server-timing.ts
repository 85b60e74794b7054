import { createContextKey } from "@connectrpc/connect";

/**
 * Per-step timing of one REST call (issue 46), answered as a `Server-Timing` header when
 * SERVER_TIMING is on, so that a latency run can say where a send's time goes. Off (the default),
 * no `ServerTiming` is ever made: the edge leaves the context key unset, every step's mark is an
 * optional call on `undefined` and a batch's marks (markBatch) a loop that finds no timed send, so a
 * call allocates nothing for it.
 *
 * The marks are instants (performance.now(), ms); a step is reported only when both of its ends
 * were marked, so a call that never reached the send pipeline (a 401, a GET) names the edge's steps
 * only. What no mark can see: Fastify's routing and reading of the body before the REST handler
 * starts, and the socket write after the header is built.
 */

/** The steps, in the order a send runs them, with the marks that bound each one. */
export const SERVER_TIMING_STEPS = [
  /** The interceptors before the service: observability, authentication, the account's context. */
  ["intercept", "start", "method"],
  /** The request message built from the path and the JSON body. */
  ["decode", "method", "decoded"],
  /** The deployment's request rate and daily quota (limits/shared-allowance.ts), when a limit is on. */
  ["admit", "admitStart", "admitEnd"],
  /** The rules that need no data, up to the send joining the group commit. */
  ["validate", "admitEnd", "submitted"],
  /** The group commit's wait: joined, until its batch starts (common/group-commit.ts). */
  ["gather", "submitted", "batch"],
  /** The dispatcher's hand-off reservation for the batch's sends due now (messaging/claim-at-accept.ts). */
  ["reserve", "reserveStart", "reserveEnd"],
  /** The batch's statement (or transaction), round trip and commit included. */
  ["statement", "statementStart", "statementEnd"],
  /** From the batch's commit until the service returns the answer (promise hops, the dispatcher's wake-up). */
  ["resume", "statementEnd", "serviceEnd"],
  /** The interceptors after the service (the completion line, metrics). */
  ["after", "serviceEnd", "chainEnd"],
  /** The answer's body built (JSON), up to its header being written. */
  ["write", "chainEnd", "written"],
  /** The REST handler's whole time, start to the answer built. */
  ["total", "start", "written"],
] as const;

/** The instants a call can mark. */
export type TimingMark = (typeof SERVER_TIMING_STEPS)[number][1 | 2];

/** The step names, as the header names them. */
export type TimingStep = (typeof SERVER_TIMING_STEPS)[number][0];

/** One call's marks; made by the REST edge only when SERVER_TIMING is on. */
export class ServerTiming {
  readonly #at = new Map<TimingMark, number>();

  constructor(start = performance.now()) {
    this.#at.set("start", start);
  }

  /** Marks `mark` now (or at `at`, an instant taken once for a whole batch). */
  mark(mark: TimingMark, at = performance.now()): void {
    this.#at.set(mark, at);
  }

  /** Each step whose two ends were marked, with its duration in ms, in the order of SERVER_TIMING_STEPS. */
  steps(): [TimingStep, number][] {
    const out: [TimingStep, number][] = [];
    for (const [name, from, to] of SERVER_TIMING_STEPS) {
      const a = this.#at.get(from);
      const b = this.#at.get(to);
      // validate starts at admitEnd, or where the service started when no limit was asked.
      const start = a ?? (name === "validate" ? this.#at.get("decoded") : undefined);
      if (start !== undefined && b !== undefined) out.push([name, Math.max(0, b - start)]);
    }
    return out;
  }

  /** The `Server-Timing` header value: `intercept;dur=0.081, decode;dur=0.012, …` (ms, three decimals). */
  header(): string {
    return this.steps()
      .map(([name, ms]) => `${name};dur=${ms.toFixed(3)}`)
      .join(", ");
  }
}

/** Marks `mark` on every timed send of a batch, at one instant (read only when one of them is timed). */
export function markBatch(items: readonly { timing?: ServerTiming }[], mark: TimingMark): void {
  let at: number | undefined;
  for (const item of items) if (item.timing) item.timing.mark(mark, (at ??= performance.now()));
}

/** The call's ServerTiming; unset unless SERVER_TIMING is on (the REST edge sets it). */
export const kServerTiming = createContextKey<ServerTiming | undefined>(undefined, { description: "Server-Timing marks" });

/** Parses a `Server-Timing` header value into step → ms (what the latency bench reads back). */
export function parseServerTiming(value: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const part of value.split(",")) {
    const m = /^\s*([\w-]+)\s*;\s*dur=([\d.]+)/.exec(part);
    if (m) out.set(m[1], Number(m[2]));
  }
  return out;
}
