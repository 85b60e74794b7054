import type { Clock } from "../common/clock.js";
import type { AcceptClaims, Reservation } from "../messaging/claim-at-accept.js";
import type { ClaimedRow } from "../messaging/message-store.js";

/** Options of a dispatcher's hand-off. */
export interface HandOffOptions {
  clock: Clock;
  /** How long a claim lasts (the dispatcher's claimMs): the claim set at accept ends this long after its reservation. */
  claimMs: number;
  /** How many messages the hand-off may hold now, its reservations included; 0 refuses every send (they are stored unclaimed). */
  room(): number;
  /** Called when committed rows arrive: the dispatcher's loops wake for them. */
  onRows?(): void;
}

/** A message stored claimed, waiting in memory for its dispatcher's next round. */
interface Entry {
  row: ClaimedRow;
  /** Its claimed_until, as stored. */
  until: Date;
}

/** The sends a process stored already claimed by its own dispatcher, until that dispatcher's rounds take them. */
export interface HandOff extends AcceptClaims {
  /**
   * Up to n messages, one per account in turn (an account whose burst filled the hand-off gets no
   * more of a round than any other account with messages waiting), oldest first within an account.
   * A message whose claim has less than `minLeftMs` left is dropped, not returned: the carrier might
   * not have it before the claim ends, and then another dispatcher takes it from the database.
   */
  take(n: number, minLeftMs: number): ClaimedRow[];
  /** Messages waiting. */
  size(): number;
  /**
   * Refuses every new reservation, waits until those granted are settled (their statements ended),
   * and empties the hand-off: what it held, to be given back to the queue.
   */
  close(): Promise<{ sid: string; until: Date }[]>;
}

/** Creates a hand-off: bounded by `room()`, taken round-robin across accounts. */
export function createHandOff(opts: HandOffOptions): HandOff {
  /** Each account's waiting messages, oldest first (`head`: the next to take). */
  const queues = new Map<string, { entries: Entry[]; head: number }>();
  /** The accounts with messages waiting, in the order of their next turn. */
  let turns: string[] = [];
  let held = 0;
  let reserved = 0;
  let closed = false;
  let settled: (() => void) | undefined;

  function put(entry: Entry): void {
    const q = queues.get(entry.row.account_sid);
    if (q) q.entries.push(entry);
    else {
      queues.set(entry.row.account_sid, { entries: [entry], head: 0 });
      turns.push(entry.row.account_sid);
    }
    held++;
  }

  return {
    reserve(want) {
      const until = new Date(opts.clock.now().getTime() + opts.claimMs);
      if (closed || want <= 0) return { count: 0, until };
      const count = Math.max(0, Math.min(want, opts.room() - held - reserved));
      reserved += count;
      return { count, until };
    },

    settle(reservation: Reservation, rows: ClaimedRow[]) {
      reserved -= reservation.count;
      for (const row of rows) put({ row, until: reservation.until });
      if (reserved === 0) settled?.();
      if (rows.length > 0) opts.onRows?.();
    },

    take(n, minLeftMs) {
      const out: ClaimedRow[] = [];
      const last = opts.clock.now().getTime() + minLeftMs;
      while (out.length < n && turns.length > 0) {
        const next: string[] = [];
        // One message per account per pass; the accounts served keep their order for the next round.
        let i = 0;
        for (; i < turns.length && out.length < n; i++) {
          const sid = turns[i];
          const q = queues.get(sid)!;
          const entry = q.entries[q.head++];
          held--;
          if (entry.until.getTime() >= last) out.push(entry.row);
          if (q.head >= q.entries.length) queues.delete(sid);
          else {
            next.push(sid);
            // An account that always has messages waiting never empties its queue: drop the taken ones now and then.
            if (q.head >= 1024 && q.head * 2 >= q.entries.length) {
              q.entries = q.entries.slice(q.head);
              q.head = 0;
            }
          }
        }
        // The accounts not reached this pass go first next time; then those just served.
        turns = [...turns.slice(i), ...next];
      }
      return out;
    },

    size: () => held,

    async close() {
      closed = true;
      if (reserved > 0) await new Promise<void>((resolve) => (settled = resolve));
      const left = [...queues.values()].flatMap((q) => q.entries.slice(q.head).map((e) => ({ sid: e.row.sid, until: e.until })));
      queues.clear();
      turns = [];
      held = 0;
      return left;
    },
  };
}
