/**
 * Statements on `sender_ids`: the sender ID service and the operator API call these. The send
 * rule's probe of the same table is its fact's SQL (messaging/send-steps.ts, "sender ID
 * registered"), which the facts function runs; `registeredSenderSql` here is that SQL, so the
 * table's statements stay in this file.
 */
import type { RequiredEntityData } from "@mikro-orm/core";
import type { EntityManager } from "@mikro-orm/sql";
import { SenderIdApplication, type SenderIdStatus } from "./sender-id.entity.js";

/** The sender ID with this Sid (of this account, when given), or null. */
export function findSenderId(em: EntityManager, sid: string, accountSid?: string): Promise<SenderIdApplication | null> {
  return em.findOne(SenderIdApplication, accountSid === undefined ? { sid } : { sid, accountSid });
}

/** What a list of sender IDs may match on, each exactly; absent fields match any value. */
export interface SenderIdFilter {
  accountSid?: string;
  status?: SenderIdStatus;
}

/** A page of sender IDs, oldest first (the review queue is worked through in the order customers applied), and how many match. */
export function listSenderIds(em: EntityManager, filter: SenderIdFilter, page: { limit: number; offset: number }): Promise<[SenderIdApplication[], number]> {
  const where: Record<string, string> = {};
  for (const [k, v] of Object.entries(filter)) if (v !== undefined) where[k] = v;
  return em.findAndCount(SenderIdApplication, where, { orderBy: { createdAt: "asc", sid: "asc" }, limit: page.limit, offset: page.offset });
}

/**
 * A new application, inserted at once. The unique index sender_ids_live_key (one live application
 * per upper-cased name and country) refuses a second one, whoever applies: the caller answers that
 * violation (liveSenderIdConflict).
 */
export async function addSenderId(em: EntityManager, data: RequiredEntityData<SenderIdApplication>): Promise<SenderIdApplication> {
  const row = em.create(SenderIdApplication, data);
  await em.persist(row).flush();
  return row;
}

/** The name of the index that keeps a live sender ID to one account per country. */
export const LIVE_SENDER_ID_KEY = "sender_ids_live_key";

/**
 * Moves a Pending sender ID to `status`, with a conditional update: of two reviews at the same
 * moment the first decides. Whether it moved.
 */
export async function decidePendingSenderId(em: EntityManager, sid: string, status: SenderIdStatus): Promise<boolean> {
  return (await em.nativeUpdate(SenderIdApplication, { sid, status: "Pending" }, { status })) === 1;
}

/** Reads the sender ID again from the database into its entity; null when it is gone. */
export function reloadSenderId(em: EntityManager, row: SenderIdApplication): Promise<SenderIdApplication | null> {
  return em.refresh(row);
}

/** Deletes the account's sender ID; whether there was one to delete. */
export async function deleteSenderId(em: EntityManager, sid: string, accountSid: string): Promise<boolean> {
  return (await em.nativeDelete(SenderIdApplication, { sid, accountSid })) > 0;
}

/**
 * The send rule's fact (SQL over the facts function's `v`): whether `v.<name>` (upper-cased) is
 * Registered to the send's account for `v.<country>`. One entry of sender_ids_live_key (country,
 * upper(sender_id)): `status <> 'Rejected'` is the index's own predicate, written out so that the
 * planner matches it without proving it from `status = 'Registered'`.
 */
export function registeredSenderSql(nameKey: string, countryKey: string): string {
  return `coalesce((select si.account_sid = v.account_sid from sender_ids si
     where si.country = v.${countryKey} and upper(si.sender_id) = v.${nameKey} and si.status <> 'Rejected' and si.status = 'Registered'), false)`;
}
