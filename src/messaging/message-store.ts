import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import type { ReceiptRow } from "../webhooks/outbox.js";

/**
 * The store of the `messages` table: every raw SQL statement on it lives here (its
 * `idempotency_keys` have theirs in idempotency-key-store.ts). The hot ones (a send batch, the dispatcher's claim, submissions,
 * final states) are hand-tuned: bound parameters, prepared names (src/db/bound-sql.ts), plans
 * pinned by test/db/hot-statements.test.ts.
 */

/** An EntityManager, or the transaction a statement runs in. */
type Em = EntityManager;

// ---------------------------------------------------------------------------------------------
// Sends (messaging/send-pipeline.ts)

/** Columns of one stored message, and the SQL type of each (the insert passes one array per column). */
export const MESSAGE_COLUMNS = [
  ["sid", "text"],
  ["account_sid", "text"],
  ["property_sid", "text"],
  ["direction", "text"],
  ["status", "text"],
  ["sender_kind", "text"],
  ["sender", "text"],
  ["recipient", "text"],
  ["text", "text"],
  ["encoding", "text"],
  ["num_segments", "int"],
  ["smart_encoded", "bool"],
  ["delivery_receipt", "bool"],
  ["dr_webhook_uri", "text"],
  ["dr_webhook_method", "text"],
  ["forward_to_sms", "text"],
  ["forward_from_sms", "text"],
  ["forward_to_email", "text"],
  ["forward_from_email", "text"],
  ["webhook_uri", "text"],
  ["webhook_method", "text"],
  ["lease_sid", "text"],
  ["in_reply_to", "text"],
  ["error_code", "text"],
  ["scheduled_at", "timestamptz"],
  ["send_at", "timestamptz"],
  ["created_at", "timestamptz"],
  ["valid_until", "timestamptz"],
  // A send stored already claimed by the dispatcher of the process that accepted it (its hand-off,
  // delivery/hand-off.ts): what the dispatcher's claim would have set; else null and 0.
  ["claimed_until", "timestamptz"],
  ["attempts", "int"],
] as const;

/**
 * The facts a send's rules are judged on, as sql/sb_send_facts.sql returns them, and the SQL type
 * of each. The pipeline says which value of each a send needs (a fact it does not name: any).
 */
export const SEND_FACTS = [
  ["token_hash", "text"],
  ["account_sms", "bool"],
  ["property_found", "bool"],
  ["property_sms", "bool"],
  ["sender_owned", "bool"],
  ["forward_from_owned", "bool"],
  ["forward_to_ours", "bool"],
  ["recipient_ours", "bool"],
  ["opted_out", "bool"],
] as const;

/** One send's facts (SEND_FACTS), and its Idempotency-Key with the message it answered. */
export interface SendFacts {
  i: number;
  token_hash: string | null;
  account_sms: boolean | null;
  property_found: boolean;
  property_sms: boolean | null;
  sender_owned: boolean;
  forward_from_owned: boolean;
  forward_to_ours: boolean;
  recipient_ours: boolean;
  opted_out: boolean;
  key_expired: boolean | null;
  key_hash: string | null;
  m_sid: string | null;
  m_account_sid: string | null;
  m_property_sid: string | null;
  m_sender: string | null;
  m_recipient: string | null;
  m_text: string | null;
  /** Whether this statement stored the send's message. */
  stored: boolean;
}

/** What the facts are looked up by, per send: index, account, property, E164 sender, ForwardFromSms, ForwardToSms, recipient, Idempotency-Key, keys created before this have expired. */
export const FACT_KEYS = ["int", "text", "text", "text", "text", "text", "text", "text", "timestamptz"] as const;

const cast = (t: string) => `?::${t}[]`;
const WANTED = SEND_FACTS.map(([f]) => `(v.want_${f} is null or f.${f} = v.want_${f})`).join(" and ");

/**
 * A batch's facts, and the messages of the sends to store, in one statement: a send is stored when
 * it asks to be (`store`) and each of its facts is the value it needs (`want_*`, null: any), a
 * compare-and-set that holds no rule of its own. Parameters: the FACT_KEYS arrays; then the index,
 * store flag and one array per SEND_FACTS fact (the value wanted); then one per MESSAGE_COLUMNS
 * column (nulls for a send not to be stored). One text whatever the batch size: prepared once per
 * connection (executeBound).
 */
const SEND_SQL = `with f as materialized (select * from sb_send_facts(${FACT_KEYS.map(cast).join(", ")})),
v as materialized (
  select f.*, v.store and ${WANTED} as stored, ${MESSAGE_COLUMNS.map(([c]) => `v.${c}`).join(", ")}
    from unnest(?::int[], ?::bool[], ${SEND_FACTS.map(([, t]) => cast(t)).join(", ")}, ${MESSAGE_COLUMNS.map(([, t]) => cast(t)).join(", ")})
         as v(vi, store, ${SEND_FACTS.map(([f]) => `want_${f}`).join(", ")}, ${MESSAGE_COLUMNS.map(([c]) => c).join(", ")})
    join f on f.i = v.vi),
ins as (insert into messages (${MESSAGE_COLUMNS.map(([c]) => c).join(", ")}) select ${MESSAGE_COLUMNS.map(([c]) => c).join(", ")} from v where v.stored)
select i, ${SEND_FACTS.map(([f]) => f).join(", ")}, key_expired, key_hash, m_sid, m_account_sid, m_property_sid, m_sender, m_recipient, m_text, stored from v`;

/**
 * Reads a batch's facts and stores the messages whose facts are as wanted (SEND_SQL), in one
 * statement: its own transaction outside one. `keys`: FACT_KEYS arrays; `wanted`: index, store
 * and SEND_FACTS arrays; `rows`: MESSAGE_COLUMNS arrays.
 */
export function sendFactsAndStore(em: Em, keys: unknown[][], wanted: unknown[][], rows: unknown[][]): Promise<SendFacts[]> {
  return executeBound<SendFacts>(em, SEND_SQL, [...keys, ...wanted, ...rows], "sb_send");
}

// A batch passes one array per column (unnest), so each statement has one text whatever the
// batch size and is prepared once per connection (executeBound). With a VALUES row per send,
// PostgreSQL parsed and planned every batch anew: most of its CPU per send.
const INSERT_SQL = `insert into messages (${MESSAGE_COLUMNS.map(([c]) => c).join(", ")})
  select * from unnest(${MESSAGE_COLUMNS.map(([, t]) => cast(t)).join(", ")})`;

/** Stores messages the pipeline has judged in a transaction (keyed and leased sends, forwards): one array per MESSAGE_COLUMNS column. */
export async function insertMessages(tx: Em, columns: unknown[][]): Promise<void> {
  await executeBound(tx, INSERT_SQL, columns, "sb_send_insert");
}

// ---------------------------------------------------------------------------------------------
// Inbound (delivery/inbound.ts)

/**
 * A message stored from an inbound SMS: the reply itself (Receive, Received, with receivedAt) or
 * its forward by SMS (Transmit: queued as Processing, or kept as Failed with the rule's errorCode).
 * It goes out, or came in, at sendAt.
 */
export interface InboundMessage {
  sid: string;
  accountSid: string;
  propertySid: string;
  direction: "Transmit" | "Receive";
  status: "Received" | "Processing" | "Failed";
  senderKind: "E164" | "Alphanumeric" | "Leased" | "";
  sender: string;
  recipient: string;
  text: string;
  encoding: string;
  numSegments: number;
  leaseSid: string | null;
  inReplyTo: string | null;
  sendAt: Date;
  createdAt: Date;
  receivedAt: Date | null;
  errorCode: string;
}

/** Stores a reply or its forward (no delivery receipt: nobody asked for one). */
export async function insertInboundMessage(tx: Em, m: InboundMessage): Promise<void> {
  await executeBound(
    tx,
    `insert into messages (sid, account_sid, property_sid, direction, status, sender_kind, sender, recipient, text, encoding, num_segments,
                           delivery_receipt, lease_sid, in_reply_to, send_at, created_at, received_at, error_code)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, false, ?, ?, ?, ?, ?, ?)`,
    [
      m.sid,
      m.accountSid,
      m.propertySid,
      m.direction,
      m.status,
      m.senderKind,
      m.sender,
      m.recipient,
      m.text,
      m.encoding,
      m.numSegments,
      m.leaseSid,
      m.inReplyTo,
      m.sendAt,
      m.createdAt,
      m.receivedAt,
      m.errorCode,
    ],
  );
}

// ---------------------------------------------------------------------------------------------
// The delivery engine's queue (delivery/dispatcher.ts, delivery/receipts.ts)

/** A message as the dispatcher claims it. */
export interface ClaimedRow {
  sid: string;
  account_sid: string;
  sender: string;
  recipient: string;
  text: string;
  delivery_receipt: boolean;
  attempts: number;
  send_at: Date | string;
  scheduled_at: Date | string | null;
  created_at: Date | string;
  /** Whether its account and property were both enabled for SMS when it was claimed; if not, it must not go out. */
  sms_enabled: boolean;
  /**
   * Its account's AllowedCountries when it was claimed from the database, for the destination
   * permissions checked again at dispatch (issue 41); null for a send stored claimed at accept,
   * which its own storing statement judged a moment ago.
   */
  allowed_countries: string[] | null;
}

/**
 * A claimed message as the claim functions return it (sql/sb_claim_due.sql): its property's SMS
 * flag, and its account's AllowedCountries, null when the account is not enabled for SMS (one key
 * probe of each).
 */
type ClaimDbRow = Omit<ClaimedRow, "sms_enabled" | "allowed_countries"> & { property_sms: boolean; account_countries: string[] | null };

const RETURNING = `m.sid, m.account_sid, m.sender, m.recipient, m.text, m.delivery_receipt, m.attempts, m.send_at, m.scheduled_at, m.created_at,
  (select case when a.sms_enabled then a.allowed_countries end from accounts a where a.sid = m.account_sid)::text[] as account_countries,
  coalesce((select p.sms_enabled from properties p where p.sid = m.property_sid), false) as property_sms`;

/** ClaimedRow from what the claim returned (the rows themselves, completed). */
function claimedRows(rows: ClaimDbRow[]): ClaimedRow[] {
  return rows.map((r) => {
    const row = r as ClaimDbRow & ClaimedRow;
    row.sms_enabled = r.property_sms && r.account_countries !== null;
    row.allowed_countries = r.account_countries ?? [];
    return row;
  });
}

/**
 * The claim in due order (sql/sb_claim_due.sql; it also returns the SMS flags and AllowedCountries, read in the same
 * statement): one UPDATE over a `FOR UPDATE
 * SKIP LOCKED` subselect of the oldest due messages, by an ordered walk of messages_queue_idx
 * under the function's own planner settings, so it needs no transaction: one round trip.
 * Parameters: claimed_until, now, limit, confirmed. The queue's functions (this one,
 * sb_due_accounts, sb_claim_fair) carry the planner settings the comment in dispatcher.ts tick() explains.
 */
export const CLAIM_DUE_SQL = "select * from sb_claim_due(?::timestamptz, ?::timestamptz, ?::int, ?::boolean)";

/**
 * Claims up to limit due messages in due order until `until` (CLAIM_DUE_SQL); with confirmed,
 * expired claims are left to holdUnconfirmed. Used while no backlog builds up (every due message
 * fits in the round, so no account waits for another) and to fill a fair round.
 */
export function claimInOrder(em: Em, confirmed: boolean, until: Date, now: Date, limit: number): Promise<ClaimedRow[]> {
  return executeBound<ClaimDbRow>(em, CLAIM_DUE_SQL, [until, now, limit, confirmed], "sb_claim_due").then(claimedRows);
}

/**
 * The accounts with messages due at now, for the round-robin claim while a backlog lasts
 * (sql/sb_due_accounts.sql): a loose scan of messages_account_queue_idx
 * (account_sid, send_at) finds each account with queued messages and its oldest one, one index
 * probe per account (one account's burst costs one probe, not a walk through the burst).
 */
export async function listDueAccounts(em: Em, now: Date): Promise<string[]> {
  const listed = await executeBound<{ account_sid: string }>(em, "select account_sid from sb_due_accounts(?::timestamptz)", [now], "sb_due_accounts");
  return listed.map((r) => r.account_sid);
}

/**
 * The claim round-robin across accounts (sql/sb_claim_fair.sql): each given
 * account takes up to share of its oldest due messages (`FOR UPDATE SKIP LOCKED`: concurrent
 * dispatchers never claim the same row), from its due range of messages_account_queue_idx (a row
 * comparison: with a plain `account_sid = ?` the planner may walk messages_queue_idx in send_at
 * order instead and filter on the account, through every other account's due messages).
 */
export function claimFair(em: Em, confirmed: boolean, until: Date, accountSids: string[], now: Date, share: number): Promise<ClaimedRow[]> {
  return executeBound<ClaimDbRow>(
    em,
    "select * from sb_claim_fair(?::timestamptz, ?::text[], ?::timestamptz, ?::int, ?::boolean)",
    [until, accountSids, now, share, confirmed],
    "sb_claim_fair",
  ).then(claimedRows);
}

/** Extends to `until` every claim that expired before now without an outcome; returns their Sids. */
export async function holdExpiredClaims(em: Em, until: Date, now: Date): Promise<string[]> {
  const held = await executeBound<{ sid: string }>(
    em,
    `update messages m set claimed_until = ?
      where m.queued and m.status = 'Processing' and m.direction = 'Transmit' and m.claimed_until < ?
      returning m.sid`,
    [until, now],
  );
  return held.map((r) => r.sid);
}

/** Claims again, until `until`, the given messages whose hold still ends at heldUntil (not settled, not taken over). */
export function claimHeldMessages(em: Em, sids: string[], heldUntil: Date, until: Date): Promise<ClaimedRow[]> {
  // (Sids are [A-Z0-9]: a comma-joined list is a safe single parameter.)
  return executeBound<ClaimDbRow>(
    em,
    `update messages m set claimed_until = ?, attempts = m.attempts + 1
      where m.sid = any(string_to_array(?, ',')) and m.status = 'Processing' and m.claimed_until = ?
      returning ${RETURNING}`,
    [until, sids.join(","), heldUntil],
  ).then(claimedRows);
}

/**
 * Cancels every queued message of an account that no dispatcher holds a claim on (Scheduled, or
 * Processing and waiting for a dispatcher or a retry), through messages_account_queue_idx; returns
 * each one's Sid and lease. One UPDATE: a row a dispatcher claimed first has a claim when this
 * statement reaches it (PostgreSQL re-checks the condition after waiting on its lock) and is left
 * alone, as is a send stored claimed at accept (messaging/claim-at-accept.ts: on its way to the
 * carrier from the start); a row canceled first is no longer queued, so no claim takes it.
 */
export function cancelQueuedMessages(em: Em, accountSid: string): Promise<{ sid: string; lease_sid: string | null }[]> {
  return executeBound<{ sid: string; lease_sid: string | null }>(
    em,
    `update messages m set status = 'Canceled'
      where m.account_sid = ? and m.queued and m.direction = 'Transmit' and m.claimed_until is null
      returning m.sid, m.lease_sid`,
    [accountSid],
  );
}

/** A queued message failed because its recipient opted out: what its lease and delivery receipt webhook need. */
export type OptedOutRow = FinalRow & { lease_sid: string | null };

/**
 * Fails, with ErrorCode RecipientOptedOut, every message of the account to `recipient` still
 * queued and held by no dispatcher (Scheduled, or Processing and waiting for a dispatcher or a
 * retry), through messages_account_queue_idx, but the Sids in `spare`; returns each one. The same conditional UPDATE as
 * cancelQueuedMessages: a row a dispatcher claimed first has a claim when this statement reaches
 * it and is left alone (it is on its way to the carrier); a row failed first is no longer queued,
 * so no claim takes it.
 */
export function failQueuedToOptedOut(em: Em, accountSid: string, recipient: string, spare: readonly string[] = []): Promise<OptedOutRow[]> {
  return executeBound<OptedOutRow>(
    em,
    `update messages m set status = 'Failed', error_code = 'RecipientOptedOut'
      where m.account_sid = ? and m.recipient = ? and m.queued and m.direction = 'Transmit' and m.claimed_until is null
        and m.sid <> all(?::text[])
      returning m.sid, m.account_sid, m.property_sid, m.sender, m.recipient, m.delivery_receipt, m.dr_webhook_uri, m.dr_webhook_method, m.lease_sid`,
    [accountSid, recipient, spare],
  );
}

/**
 * Ends the claims a process took when it stored sends already claimed (delivery/hand-off.ts) and
 * whose messages it never handed to the carrier (it is stopping): each is queued again at once,
 * its attempt not counted, as if it had never been claimed. Only a claim still exactly the one
 * set (`untils`, per Sid) is released: a message another dispatcher took over after the claim
 * expired, or one settled meanwhile, is left alone. One statement.
 */
export async function releaseClaims(em: Em, sids: string[], untils: Date[]): Promise<number> {
  if (sids.length === 0) return 0;
  const rows = await executeBound<{ sid: string }>(
    em,
    `update messages m set claimed_until = null, attempts = greatest(m.attempts - 1, 0)
       from unnest(?::text[], ?::timestamptz[]) as r(sid, until)
      where m.sid = r.sid and m.status = 'Processing' and m.claimed_until = r.until
      returning m.sid`,
    [sids, untils],
  );
  return rows.length;
}

/** Puts a claimed message back in the queue, due at retryAt, after a temporary carrier error. */
export async function scheduleRetry(em: Em, sid: string, retryAt: Date, errorCode: string): Promise<void> {
  await executeBound(em, `update messages set send_at = ?, claimed_until = null, error_code = ? where sid = ? and status = 'Processing'`, [
    retryAt,
    errorCode,
    sid,
  ]);
}

/**
 * Gives claimed messages back to the queue, due again at `sendAts` (the dispatch rate of their
 * account: docs/limits.md). Only while still Processing: a message a report or a cancel settled
 * meanwhile is left alone. Their attempts are not counted: the carrier never saw them.
 */
export async function deferMessages(em: Em, sids: string[], sendAts: Date[]): Promise<void> {
  if (sids.length === 0) return;
  await executeBound(
    em,
    `update messages m set send_at = d.at, claimed_until = null from unnest(?::text[], ?::timestamptz[]) as d(sid, at) where m.sid = d.sid and m.status = 'Processing'`,
    [sids, sendAts],
  );
}

/** Of the given messages, those whose ValidityPeriod ended before `now` (QueueTimeout). */
export async function pastValidity(em: Em, sids: string[], now: Date): Promise<Set<string>> {
  if (sids.length === 0) return new Set();
  const rows = await executeBound<{ sid: string }>(em, `select sid from messages where sid = any(?::text[]) and valid_until < ?`, [sids, now]);
  return new Set(rows.map((r) => r.sid));
}

/** A message moved to its final state: what its delivery receipt webhook needs (the outbox's row). */
export type FinalRow = ReceiptRow;

/** One final state to apply: Delivered (with when) or Failed (with why). */
export interface FinalState {
  messageSid: string;
  status: "Delivered" | "Failed";
  deliveredAt: Date | null;
  errorCode: string;
  carrierError: string;
}

/**
 * Moves messages still Processing or Submitted to their final state (sids unique); returns those
 * changed. The UPDATE is the function sb_apply_final_states (sql/sb_apply_final_states.sql): one cached
 * plan that reaches each row by its key, whatever the table's statistics say.
 */
export function updateFinalStates(tx: Em, states: FinalState[]): Promise<FinalRow[]> {
  return executeBound<FinalRow>(
    tx,
    "select * from sb_apply_final_states(?::text[], ?::text[], ?::timestamptz[], ?::text[], ?::text[])",
    finalStateColumns(states),
    "sb_apply_final_states",
  );
}

/** A batch of final states as the final-state functions take it: one array per column (sid, status, delivered_at, error_code, carrier_error). */
function finalStateColumns(states: FinalState[]): unknown[][] {
  return [
    states.map((s) => s.messageSid),
    states.map((s) => s.status),
    states.map((s) => s.deliveredAt),
    states.map((s) => s.errorCode),
    states.map((s) => s.carrierError),
  ];
}

/** Of a batch of final states: a message changed, or one left alone because it needs a delivery receipt webhook. */
export interface PlainFinalRow {
  sid: string;
  needs_webhook: boolean;
}

/**
 * updateFinalStates for the messages that need no delivery receipt webhook, in one statement that
 * needs no transaction (sql/sb_apply_plain_final_states.sql); returns those it
 * changed, and those it left alone that updateFinalStates would change and that need the webhook
 * (needs_webhook): they go through updateFinalStates and the webhook in a transaction.
 */
export function updatePlainFinalStates(em: Em, states: FinalState[]): Promise<PlainFinalRow[]> {
  return executeBound<PlainFinalRow>(
    em,
    "select * from sb_apply_plain_final_states(?::text[], ?::text[], ?::timestamptz[], ?::text[], ?::text[])",
    finalStateColumns(states),
    "sb_apply_plain_final_states",
  );
}

/** One submission the carrier holds: the message, when, and the carrier's reference if known. */
export interface Submission {
  messageSid: string;
  at: Date;
  carrierRef: string | null;
  /** The name of the carrier that took it; absent or null: unknown (the recorded name is kept). */
  carrier?: string | null;
}

/**
 * Records submissions (sids unique): Processing becomes Submitted, a message already final keeps
 * its status but gets its submission time; the claim ends. Returns the Sids of the rows changed.
 */
export async function updateSubmissions(em: Em, subs: Submission[]): Promise<string[]> {
  // The function sb_record_submissions (sql/sb_record_submissions.sql), as in updateFinalStates.
  const rows = await executeBound<{ sid: string }>(
    em,
    "select sid from sb_record_submissions(?::text[], ?::text[], ?::timestamptz[], ?::text[])",
    [subs.map((x) => x.messageSid), subs.map((x) => x.carrierRef), subs.map((x) => x.at), subs.map((x) => x.carrier ?? null)],
    "sb_record_submissions",
  );
  return rows.map((r) => r.sid);
}
