import type { ItemOutcome } from "../common/group-commit.js";
import { markBatch } from "../common/server-timing.js";
import type { ClaimedRow } from "./message-store.js";
import type { SendItem } from "./send-steps.js";

/**
 * Claim at accept (issue 32): a send due now, accepted by a process whose own dispatcher has room
 * for it, is stored already claimed by that dispatcher (status Processing, `claimed_until`, one
 * attempt: what the dispatcher's claim would have left) and handed to it in memory after the
 * commit, so that its message costs no claim statement. Without room (or in a process without a
 * dispatcher) it is stored unclaimed, as before, and claimed from the database.
 *
 * Crash safety is the claim's: a process that dies before the carrier has the message leaves its
 * claim, which expires after the dispatcher's claimMs, and any dispatcher takes the message again
 * (dispatcher.ts, expired claims). A stopping process gives its unsent claims back at once
 * (delivery/hand-off.ts). What a claim means for a cancel, an opt-out and a disable is unchanged:
 * the message is on its way to the carrier (docs/architecture.md).
 */

/** Room a dispatcher granted: how many sends may be stored claimed, and until when. */
export interface Reservation {
  count: number;
  until: Date;
}

/** The local dispatcher's hand-off, as the send pipeline sees it (delivery/hand-off.ts implements it). */
export interface AcceptClaims {
  /** Room for up to `want` sends due now; never waits. */
  reserve(want: number): Reservation;
  /**
   * After the statement: the rows it stored claimed (committed) go to the dispatcher, and the rest
   * of the reservation is given back; `rows` empty when the statement failed.
   */
  settle(reservation: Reservation, rows: ClaimedRow[]): void;
}

/** What a stored send's outcome carries when it was stored claimed. */
export interface MaybeClaimed {
  claimed?: ClaimedRow;
}

/**
 * Runs a batch's store (`run`, which commits before it returns) with the sends due now marked to be
 * stored claimed, as far as the dispatcher has room, then hands the committed ones to it. The
 * decision is made here, before the statement, once per batch; a send a rule refuses is not stored
 * and never handed over, and a failed statement leaves no reservation behind.
 */
export async function storeClaimed<O extends MaybeClaimed>(
  claims: AcceptClaims,
  items: SendItem[],
  run: (items: SendItem[]) => Promise<ItemOutcome<O>[]>,
): Promise<ItemOutcome<O>[]> {
  const due = items.filter((item) => "send" in item.checked && !item.checked.send.scheduled && item.forward === undefined);
  // A batch may run again item by item after a failure (common/group-commit.ts): decided afresh.
  for (const item of items) item.claimedUntil = undefined;
  markBatch(items, "reserveStart");
  const reservation = due.length === 0 ? { count: 0, until: new Date(0) } : claims.reserve(due.length);
  markBatch(items, "reserveEnd");
  for (let k = 0; k < reservation.count; k++) due[k].claimedUntil = reservation.until;
  let outcomes: ItemOutcome<O>[];
  try {
    outcomes = await run(items);
  } catch (err) {
    claims.settle(reservation, []);
    throw err;
  }
  claims.settle(
    reservation,
    outcomes.flatMap((o) => (o.ok && o.value.claimed ? [o.value.claimed] : [])),
  );
  return outcomes;
}
