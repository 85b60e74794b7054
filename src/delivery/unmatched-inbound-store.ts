/** The one statement on `unmatched_inbound`: keeping an inbound SMS that answered no live lease. */
import type { EntityManager } from "@mikro-orm/sql";
import { UnmatchedInbound, type UnmatchedReason } from "./unmatched-inbound.entity.js";

/** Keeps an SMS that belongs to no account, in the caller's transaction. */
export async function insertUnmatchedInbound(
  em: EntityManager,
  sms: { sender: string; recipient: string; text: string; receivedAt: Date; reason: UnmatchedReason },
): Promise<void> {
  await em.insert(UnmatchedInbound, sms);
}
