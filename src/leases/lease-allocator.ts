import type { EntityManager } from "@mikro-orm/sql";
import { apiError } from "../common/errors.js";
import { newSid } from "../common/sid.js";

/** A leased sender is the recipient's for 30 days from the send, to the instant (docs/api.md#leased-senders). */
export const LEASE_DAYS = 30;
/** At most 5 live leases to one recipient (docs/api.md#leased-senders). */
export const MAX_LEASES_PER_RECIPIENT = 5;

/** A lease just taken from the pool. */
export interface AllocatedLease {
  sid: string;
  poolNumber: string;
  expiresAt: Date;
}

/**
 * Takes a pool number for `recipient` inside the caller's transaction. A transaction-scoped
 * advisory lock on the recipient serializes allocations across every process, and the
 * partial unique indexes on leases (recipient, slot) and (pool_number, recipient) make the
 * 5-lease limit and per-recipient uniqueness hold even if that lock were bypassed.
 */
export async function allocateLease(
  em: EntityManager,
  args: { recipient: string; accountSid: string; messageSid: string; now: Date },
): Promise<AllocatedLease> {
  const { recipient, now } = args;
  await em.execute("select pg_advisory_xact_lock(hashtext(?))", [`lease:${recipient}`]);
  await em.execute("update leases set released = true where recipient = ? and not released and expires_at <= ?", [recipient, now]);
  const live = await em.execute<{ slot: number }[]>("select slot from leases where recipient = ? and not released", [recipient]);
  if (live.length >= MAX_LEASES_PER_RECIPIENT) {
    throw apiError(
      "LeaseLimitReached",
      `${recipient} already has ${MAX_LEASES_PER_RECIPIENT} live leased senders; a lease lasts ${LEASE_DAYS} days. Send from an E164 or alphanumeric sender instead.`,
    );
  }
  const used = new Set(live.map((r) => Number(r.slot)));
  let slot = 1;
  while (used.has(slot)) slot++;
  const free = await em.execute<{ number: string }[]>(
    `select n.number from numbers n
      where n.account_sid is null
        and not exists (select 1 from leases l where l.pool_number = n.number and l.recipient = ? and not l.released)
      order by n.number limit 1`,
    [recipient],
  );
  if (free.length === 0) {
    throw apiError("NoLeasedNumberAvailable", `No pool number is free for ${recipient}; send from an E164 or alphanumeric sender, or ask the operator to add pool numbers.`);
  }
  const sid = newSid("LS");
  const expiresAt = new Date(now.getTime() + LEASE_DAYS * 86_400_000);
  await em.execute(
    `insert into leases (sid, pool_number, recipient, account_sid, message_sid, slot, created_at, expires_at, released)
     values (?, ?, ?, ?, ?, ?, ?, ?, false)`,
    [sid, free[0].number, recipient, args.accountSid, args.messageSid, slot, now, expiresAt],
  );
  return { sid, poolNumber: free[0].number, expiresAt };
}

/** Ends a lease early (its message was canceled), freeing the recipient's slot. */
export async function releaseLease(em: EntityManager, leaseSid: string): Promise<void> {
  await em.execute("update leases set released = true where sid = ?", [leaseSid]);
}
