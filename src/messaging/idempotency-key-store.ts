import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";

/**
 * Every statement on `idempotency_keys`: the Idempotency-Keys of single sends (each names its
 * message) and of batch sends (each holds the batch's response). The send batch's check reads
 * them too, in the same statement as its other checks (message-store.ts CHECK_SQL).
 */

/** An EntityManager, or the transaction a statement runs in. */
type Em = EntityManager;

/** Forgets expired Idempotency-Keys, given as (account, key) pairs. */
export async function deleteIdempotencyKeys(tx: Em, keys: { accountSid: string; key: string }[]): Promise<void> {
  await executeBound(
    tx,
    `delete from idempotency_keys where (account_sid, key) in (${keys.map(() => "(?, ?)").join(", ")})`,
    keys.flatMap((k) => [k.accountSid, k.key]),
  );
}

/** One Idempotency-Key of a single send, and the message it answers. */
export interface MessageKey {
  accountSid: string;
  key: string;
  messageSid: string;
  requestHash: string | null;
  createdAt: Date;
}

/** Remembers the Idempotency-Keys of stored sends (the caller orders them, for lock order). */
export async function insertIdempotencyKeys(tx: Em, keys: MessageKey[]): Promise<void> {
  await executeBound(
    tx,
    `insert into idempotency_keys (account_sid, key, message_sid, request_hash, created_at) values ${keys.map(() => "(?, ?, ?, ?, ?)").join(", ")}`,
    keys.flatMap((k) => [k.accountSid, k.key, k.messageSid, k.requestHash, k.createdAt]),
  );
}

/** A batch send's Idempotency-Key as stored: its fingerprint, response, and whether it expired. */
export interface BatchKeyRow {
  request_hash: string | null;
  response: Uint8Array | null;
  expired: boolean;
}

/** Reads a batch send's Idempotency-Key; keys created at or before expireBefore count as expired. */
export async function findBatchKey(tx: Em, accountSid: string, key: string, expireBefore: Date): Promise<BatchKeyRow | undefined> {
  const [row] = await executeBound<BatchKeyRow>(
    tx,
    "select request_hash, response, created_at <= ? as expired from idempotency_keys where account_sid = ? and key = ?",
    [expireBefore, accountSid, key],
  );
  return row;
}

/** Forgets one Idempotency-Key. */
export async function deleteIdempotencyKey(tx: Em, accountSid: string, key: string): Promise<void> {
  await executeBound(tx, "delete from idempotency_keys where account_sid = ? and key = ?", [accountSid, key]);
}

/** Claims a batch send's Idempotency-Key with a placeholder response (a unique violation if taken). */
export async function claimBatchKey(tx: Em, accountSid: string, key: string, hash: string, now: Date): Promise<void> {
  await executeBound(tx, "insert into idempotency_keys (account_sid, key, request_hash, response, created_at) values (?, ?, ?, ?, ?)", [
    accountSid,
    key,
    hash,
    Buffer.alloc(0),
    now,
  ]);
}

/** Stores a batch send's response under its claimed Idempotency-Key. */
export async function setBatchKeyResponse(tx: Em, accountSid: string, key: string, response: Uint8Array): Promise<void> {
  await executeBound(tx, "update idempotency_keys set response = ? where account_sid = ? and key = ?", [Buffer.from(response), accountSid, key]);
}

/** Deletes the Idempotency-Keys of these messages (retention: they go with their messages); how many. */
export async function deleteKeysOfMessages(tx: Em, messageSids: string[]): Promise<number> {
  const rows = await executeBound<{ key: string }>(tx, "delete from idempotency_keys where message_sid = any(?::text[]) returning key", [messageSids]);
  return rows.length;
}

/**
 * Deletes an account's batch-send keys created before `before` (retention and redaction: each
 * holds its batch's response, texts included; it expired after IDEMPOTENCY_TTL_MS); how many.
 */
export async function deleteBatchKeysBefore(tx: Em, accountSid: string, before: Date): Promise<number> {
  const rows = await executeBound<{ key: string }>(
    tx,
    "delete from idempotency_keys where created_at < ? and account_sid = ? and message_sid is null returning key",
    [before, accountSid],
  );
  return rows.length;
}

/** A key's request fingerprint and the message it answered, as the facts statement and findMessageKeys read them (a batch's key has no message). */
export interface KeyAnswer {
  key_hash: string | null;
  m_sid: string | null;
  m_account_sid: string | null;
  m_property_sid: string | null;
  m_sender: string | null;
  m_recipient: string | null;
  m_text: string | null;
}

/** An Idempotency-Key as stored, with the message it answers. */
export interface MessageKeyRow extends KeyAnswer {
  account_sid: string;
  key: string;
}

/**
 * The keys of these (account, key) pairs stored now and created after `expireBefore`, each with
 * its message (none for a batch's key): read again for keyed sends refused for funds (send-charge.ts), whose key a
 * concurrent transaction committed while their charge waited for its balance row.
 */
export async function findMessageKeys(tx: Em, keys: { accountSid: string; key: string }[], expireBefore: Date): Promise<MessageKeyRow[]> {
  if (keys.length === 0) return [];
  return executeBound<MessageKeyRow>(
    tx,
    `select k.account_sid::text as account_sid, k.key::text as key, k.request_hash::text as key_hash, m.sid::text as m_sid,
            m.account_sid::text as m_account_sid, m.property_sid::text as m_property_sid, m.sender::text as m_sender,
            m.recipient::text as m_recipient, m.text as m_text
       from unnest(?::text[], ?::text[]) as q(account_sid, key)
       join idempotency_keys k on k.account_sid = q.account_sid and k.key = q.key
       left join messages m on m.sid = k.message_sid
      where k.created_at > ?`,
    [keys.map((k) => k.accountSid), keys.map((k) => k.key), expireBefore],
  );
}
