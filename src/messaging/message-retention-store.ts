/**
 * Statements on `messages` for retention and redaction (src/delivery/retention.ts): the purge's
 * claim of expired messages, their deletion, and the redaction of old texts. Cold paths, in small
 * batches by property along `messages_property_sid_created_at_idx`; each claim takes its rows
 * `for update skip locked`, so two purges at once never take the same message.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";

/**
 * The states after which nothing more happens to a message: only these are purged or redacted.
 * Scheduled and Processing are queued, Submitted waits for the carrier's report.
 */
export const SETTLED_STATUSES = ["Delivered", "Failed", "Canceled", "Received"] as const;
const SETTLED = `(${SETTLED_STATUSES.map((s) => `'${s}'`).join(", ")})`;

/**
 * A message is still in flight while its delivery receipt webhook or forwarded reply is being
 * retried (up to 24 h): it is kept until the call or e-mail is settled.
 */
const NOTHING_PENDING = `not exists (select 1 from webhook_deliveries d where d.message_sid = m.sid and d.status = 'Pending')
  and not exists (select 1 from emails e where e.message_sid = m.sid and e.status = 'Pending')`;

/**
 * Locks up to `limit` of a property's settled messages created before `before`, oldest first, in
 * the caller's transaction (rows another purge holds are skipped); their Sids. A message whose
 * usage is not summed yet (usage_pending: it left the queue after its hour was rolled up) waits
 * for the next rollup (docs/billing.md#usage).
 */
export async function claimExpiredMessages(tx: EntityManager, propertySid: string, before: Date, limit: number): Promise<string[]> {
  const rows = await executeBound<{ sid: string }>(
    tx,
    `select m.sid from messages m
      where m.property_sid = ? and m.created_at < ? and m.status in ${SETTLED} and ${NOTHING_PENDING}
        and not exists (select 1 from usage_pending up where up.message_sid = m.sid)
      order by m.created_at limit ? for update of m skip locked`,
    [propertySid, before, limit],
  );
  return rows.map((r) => r.sid);
}

/** Deletes these messages (claimed by claimExpiredMessages in the same transaction); how many went. */
export async function deleteMessages(tx: EntityManager, sids: string[]): Promise<number> {
  const rows = await executeBound<{ sid: string }>(tx, `delete from messages where sid = any(?::text[]) returning sid`, [sids]);
  return rows.length;
}

/**
 * Empties the text of up to `limit` of a property's settled messages created before `before` and
 * not yet redacted, oldest first, and marks them Redacted; their Sids. Rows another transaction
 * holds are skipped (taken by the next pass).
 */
export async function redactExpiredTexts(em: EntityManager, propertySid: string, before: Date, limit: number): Promise<string[]> {
  const rows = await executeBound<{ sid: string }>(
    em,
    `with r as (
       select m.sid from messages m
        where m.property_sid = ? and m.created_at < ? and not m.redacted and m.status in ${SETTLED} and ${NOTHING_PENDING}
        order by m.created_at limit ? for update of m skip locked)
     update messages m set text = '', redacted = true from r where m.sid = r.sid returning m.sid`,
    [propertySid, before, limit],
  );
  return rows.map((r) => r.sid);
}
