/**
 * Statements on `messages` for the receipt timeout (delivery/receipt-timeout.ts): messages whose
 * receipt never came. Both walk messages_submitted_at_idx (submitted_at, sid) from a
 * (submitted_at, sid) key, so each statement reads a bounded range.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { RECEIPT_TIMEOUT } from "../common/errors.js";
import { executeBound } from "../db/bound-sql.js";

type Em = EntityManager;

/** The ErrorCode of a message still Submitted whose receipt did not come within RECEIPT_TIMEOUT_HOURS. */
export const RECEIPT_TIMEOUT_ERROR = RECEIPT_TIMEOUT;

/** A (submitted_at, sid) position in messages_submitted_at_idx. */
export interface SubmittedKey {
  submitted_at: Date;
  sid: string;
}

/** A message Submitted and still waiting for its receipt, as a carrier needs it to report it. */
export interface AwaitingRow extends SubmittedKey {
  sender: string;
  recipient: string;
  text: string;
}

/**
 * Up to limit messages still Submitted (not yet given up on: no ReceiptTimeout) that were
 * submitted after `from` and before `before`, in (submitted_at, sid) order.
 */
export function listAwaitingReceipt(em: Em, from: SubmittedKey, before: Date, limit: number): Promise<AwaitingRow[]> {
  return executeBound<AwaitingRow>(
    em,
    `select m.submitted_at, m.sid, m.sender, m.recipient, m.text from messages m
      where m.submitted_at is not null and (m.submitted_at, m.sid) > (?, ?) and m.submitted_at < ?
        and m.status = 'Submitted' and m.direction = 'Transmit' and m.error_code <> '${RECEIPT_TIMEOUT_ERROR}'
      order by m.submitted_at, m.sid
      limit ?`,
    [from.submitted_at, from.sid, before, limit],
  );
}

/** The next up to limit index entries after `from` submitted at or before `until`, whatever the message's status. */
export function listSubmittedAfter(em: Em, from: SubmittedKey, until: Date, limit: number): Promise<SubmittedKey[]> {
  return executeBound<SubmittedKey>(
    em,
    `select m.submitted_at, m.sid from messages m
      where m.submitted_at is not null and (m.submitted_at, m.sid) > (?, ?) and m.submitted_at <= ?
      order by m.submitted_at, m.sid
      limit ?`,
    [from.submitted_at, from.sid, until, limit],
  );
}

/**
 * Gives ErrorCode ReceiptTimeout to those of the given messages still Submitted (they stay
 * Submitted); returns their Sids. Conditional: a message whose report lands first is left alone,
 * and a report landing later replaces the ErrorCode with its own.
 */
export async function markReceiptTimeouts(em: Em, sids: string[]): Promise<string[]> {
  if (sids.length === 0) return [];
  // (Sids are [A-Z0-9]: a comma-joined list is a safe single parameter.)
  const rows = await executeBound<{ sid: string }>(
    em,
    `update messages m set error_code = '${RECEIPT_TIMEOUT_ERROR}'
      where m.sid = any(string_to_array(?, ',')) and m.status = 'Submitted' and m.direction = 'Transmit' and m.error_code <> '${RECEIPT_TIMEOUT_ERROR}'
      returning m.sid`,
    [sids.join(",")],
  );
  return rows.map((r) => r.sid);
}
