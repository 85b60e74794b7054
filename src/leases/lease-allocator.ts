import type { EntityManager } from "@mikro-orm/sql";
import { apiError } from "../common/errors.js";
import { newSid } from "../common/sid.js";
import { freePoolNumber, insertLease, liveLeaseSlots, lockRecipientLeases, markLeaseReleased, releaseExpiredLeases } from "./lease-store.js";

/** A leased sender is the recipient's for 30 days from the send, to the instant (docs/api.md#leased-senders). */
export const LEASE_DAYS = 30;
/** At most 5 live leases to one recipient per account (docs/api.md#leased-senders). */
export const MAX_LEASES_PER_RECIPIENT = 5;

/** A lease just taken from the pool. */
export interface AllocatedLease {
  sid: string;
  poolNumber: string;
  expiresAt: Date;
}

/**
 * Takes a pool number for `recipient` inside the caller's transaction. The 5-lease limit is the
 * account's own (one tenant must not use up a recipient for the others); the pool number is one
 * no account holds a live lease of to the recipient (so a reply matches exactly one lease). A
 * transaction-scoped advisory lock on the recipient serializes allocations across every process,
 * and the partial unique indexes on leases (account_sid, recipient, slot) and (pool_number,
 * recipient) make both rules hold even if that lock were bypassed. The account's own limit is
 * checked first: LeaseLimitReached is the answer it can act on; NoLeasedNumberAvailable means
 * the pool itself has no number free for the recipient.
 */
export async function allocateLease(
  em: EntityManager,
  args: { recipient: string; accountSid: string; messageSid: string; now: Date },
): Promise<AllocatedLease> {
  const { recipient, now } = args;
  await lockRecipientLeases(em, recipient);
  await releaseExpiredLeases(em, recipient, now);
  const live = await liveLeaseSlots(em, recipient, args.accountSid);
  if (live.length >= MAX_LEASES_PER_RECIPIENT) {
    throw apiError(
      "LeaseLimitReached",
      `This account already holds ${MAX_LEASES_PER_RECIPIENT} live leased senders to ${recipient}; a lease lasts ${LEASE_DAYS} days. Send from an E164 or alphanumeric sender instead.`,
    );
  }
  const used = new Set(live);
  let slot = 1;
  while (used.has(slot)) slot++;
  const poolNumber = await freePoolNumber(em, recipient);
  if (poolNumber === undefined) {
    throw apiError(
      "NoLeasedNumberAvailable",
      `No pool number is free for ${recipient}; send from an E164 or alphanumeric sender, or ask the operator to add pool numbers.`,
    );
  }
  const sid = newSid("LS");
  const expiresAt = new Date(now.getTime() + LEASE_DAYS * 86_400_000);
  await insertLease(em, { sid, poolNumber, recipient, accountSid: args.accountSid, messageSid: args.messageSid, slot, createdAt: now, expiresAt });
  return { sid, poolNumber, expiresAt };
}

/** Ends a lease early (its message was canceled), freeing its account's slot for the recipient. */
export async function releaseLease(em: EntityManager, leaseSid: string): Promise<void> {
  await markLeaseReleased(em, leaseSid);
}
