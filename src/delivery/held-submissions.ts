import type { Logger } from "pino";
import type { Submission } from "./receipts.js";

/**
 * The submissions the carrier accepted that are not written yet (issue 46: two writes per
 * delivered message). A carrier's final report usually comes within a moment of the submission
 * (the simulator's after 200 ms, Kannel's and an SMSC's receipt about as soon): the submission
 * waits here for it and is written with the final state by the same statement
 * (sb_apply_plain_final_states, sb_apply_final_states), so a delivered message's row is written
 * twice (its insert and its final state) instead of three times. What no report settled within
 * `holdMs` is written as before, a batch at a time (sb_record_submissions).
 *
 * What it costs: until its submission is written the message stays Processing with its claim, so a
 * crash in that window leaves it in doubt as a crash between the carrier's answer and the write
 * always could: its claim expires and, with a carrier that confirms (confirmWaitMs), it waits for
 * the carrier's word, else it is submitted again. The window is holdMs instead of one statement's
 * time. A clean stop writes everything held (`flush`).
 */
export interface HeldSubmissions {
  /** Holds submissions the carrier accepted until their reports, or holdMs. */
  hold(subs: readonly Submission[]): void;
  /** The held submission of a message, if any; it stays held until `settled`. */
  get(messageSid: string): Submission | undefined;
  /** These were written with their final states: nothing more to write for them. */
  settled(messageSids: Iterable<string>): void;
  /** Writes every held submission now and waits for the writes under way (a clean stop). */
  flush(): Promise<void>;
  /** How many are held. */
  size(): number;
}

export interface HeldSubmissionsOptions {
  /** How long a submission waits for its report before it is written alone, ms; 0: written at once by the caller. */
  holdMs: number;
  /** Writes submissions (the dispatcher's recordSubmitted: one statement, retried while the database is down). */
  record(subs: Submission[]): Promise<void>;
  log?: Logger;
}

export function createHeldSubmissions(opts: HeldSubmissionsOptions): HeldSubmissions {
  /** In the order they were held, so in the order their holds end (one holdMs for all). */
  const held = new Map<string, { sub: Submission; until: number }>();
  let timer: NodeJS.Timeout | undefined;
  /** The writes under way, one after the other. */
  let writing: Promise<void> = Promise.resolve();

  function take(upTo: number): Submission[] {
    const due: Submission[] = [];
    for (const [sid, h] of held) {
      if (h.until > upTo) break;
      due.push(h.sub);
      held.delete(sid);
    }
    return due;
  }

  function write(subs: Submission[]): Promise<void> {
    if (subs.length === 0) return writing;
    writing = writing.then(() =>
      opts.record(subs).catch((err: unknown) => {
        // Their claims expire and they are handled as after a crash (createDispatcher's comment).
        opts.log?.error(
          { err, count: subs.length, messageSids: subs.slice(0, 50).map((s) => s.messageSid) },
          "could not record submissions the carrier accepted",
        );
      }),
    );
    return writing;
  }

  function schedule(): void {
    if (timer !== undefined) return;
    const first = held.values().next();
    if (first.done) return;
    timer = setTimeout(
      () => {
        timer = undefined;
        void write(take(performance.now()));
        schedule();
      },
      Math.max(1, first.value.until - performance.now()),
    );
    // A process that exits without stopping the engine loses the held writes as it loses a round in flight.
    timer.unref();
  }

  return {
    hold(subs) {
      const until = performance.now() + opts.holdMs;
      for (const sub of subs) {
        held.delete(sub.messageSid);
        held.set(sub.messageSid, { sub, until });
      }
      schedule();
    },
    get: (messageSid) => held.get(messageSid)?.sub,
    settled(messageSids) {
      for (const sid of messageSids) held.delete(sid);
    },
    async flush() {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      await write(take(Infinity));
    },
    size: () => held.size,
  };
}
