import type { EntityManager } from "@mikro-orm/sql";
import { bindByName, executeBound } from "../db/bound-sql.js";
import type { ReceiptRow } from "../webhooks/outbox.js";

/**
 * The store of the `messages` table: its raw SQL statements live here, but those that store a send
 * (message-send-store.ts) and the reads of the API, the operator, receipts and retention
 * (message-*-store.ts); its `idempotency_keys` have theirs in idempotency-key-store.ts. The hot
 * ones (a send batch, the dispatcher's claim, submissions, final states) are hand-tuned: bound
 * parameters, prepared names (src/db/bound-sql.ts), plans pinned by test/db/hot-statements.test.ts.
 */

/** An EntityManager, or the transaction a statement runs in. */
type Em = EntityManager;

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

/** Each column an inbound message sets, by name, and the InboundMessage field it holds. */
const INBOUND_COLUMNS = {
  sid: "sid",
  account_sid: "accountSid",
  property_sid: "propertySid",
  direction: "direction",
  status: "status",
  sender_kind: "senderKind",
  sender: "sender",
  recipient: "recipient",
  text: "text",
  encoding: "encoding",
  num_segments: "numSegments",
  lease_sid: "leaseSid",
  in_reply_to: "inReplyTo",
  send_at: "sendAt",
  created_at: "createdAt",
  received_at: "receivedAt",
  error_code: "errorCode",
} as const satisfies Record<string, keyof InboundMessage>;

// Every field of InboundMessage has its column: a field added without one does not compile.
const everyInboundField: Exclude<keyof InboundMessage, (typeof INBOUND_COLUMNS)[keyof typeof INBOUND_COLUMNS]> extends never ? true : never = true;
void everyInboundField;

const INBOUND_FIELDS = Object.values(INBOUND_COLUMNS);
const INSERT_INBOUND_SQL = `insert into messages (${Object.keys(INBOUND_COLUMNS).join(", ")}, delivery_receipt)
  values (${INBOUND_FIELDS.map(() => "?").join(", ")}, false)`;

/** Stores a reply or its forward (no delivery receipt: nobody asked for one). */
export async function insertInboundMessage(tx: Em, m: InboundMessage): Promise<void> {
  await executeBound(
    tx,
    INSERT_INBOUND_SQL,
    INBOUND_FIELDS.map((f) => m[f]),
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
   * Its account's AllowedCountries when it was claimed from the database (sql/sb_sms_status.sql),
   * for the destination permissions checked again at dispatch (issue 41); null for a send stored
   * claimed at accept, which its own storing statement judged a moment ago.
   */
  allowed_countries: string[] | null;
}

/** The claimed rows with what sb_sms_status says of their account and property (a message whose property is gone may not go out). */
const CLAIMED_WITH_STATUS = `select c.sid, c.account_sid, c.sender, c.recipient, c.text, c.delivery_receipt, c.attempts, c.send_at, c.scheduled_at, c.created_at,
       coalesce(s.sms_off = '', false) as sms_enabled, coalesce(s.allowed_countries, '{}')::text[] as allowed_countries
  from claimed c left join sb_sms_status s on s.property_sid = c.property_sid`;

/** A message as an UPDATE of the claim returns it, for CLAIMED_WITH_STATUS. */
const CLAIM_RETURNING =
  "m.sid, m.account_sid, m.property_sid, m.sender, m.recipient, m.text, m.delivery_receipt, m.attempts, m.send_at, m.scheduled_at, m.created_at";

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
  return executeBound<ClaimedRow>(em, CLAIM_DUE_SQL, [until, now, limit, confirmed], "sb_claim_due");
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
  return executeBound<ClaimedRow>(
    em,
    "select * from sb_claim_fair(?::timestamptz, ?::text[], ?::timestamptz, ?::int, ?::boolean)",
    [until, accountSids, now, share, confirmed],
    "sb_claim_fair",
  );
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
  return executeBound<ClaimedRow>(
    em,
    `with claimed as (
       update messages m set claimed_until = ?, attempts = m.attempts + 1
        where m.sid = any(string_to_array(?, ',')) and m.status = 'Processing' and m.claimed_until = ?
        returning ${CLAIM_RETURNING})
     ${CLAIMED_WITH_STATUS}`,
    [until, sids.join(","), heldUntil],
  );
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
  /**
   * The submission the dispatcher held until this report (delivery/held-submissions.ts), recorded
   * with the final state unless one is recorded already: when the carrier took it, its reference and
   * its name. Null: none held (recorded by sb_record_submissions, or never submitted).
   */
  submittedAt: Date | null;
  carrierRef: string | null;
  carrier: string | null;
}

/**
 * Moves messages still Processing or Submitted to their final state (sids unique); returns those
 * changed. The UPDATE is the function sb_apply_final_states (sql/sb_apply_final_states.sql): one cached
 * plan that reaches each row by its key, whatever the table's statistics say.
 */
export function updateFinalStates(tx: Em, states: FinalState[]): Promise<FinalRow[]> {
  return executeBound<FinalRow>(
    tx,
    "select * from sb_apply_final_states(?::text[], ?::text[], ?::timestamptz[], ?::text[], ?::text[], ?::text[], ?::timestamptz[], ?::text[])",
    finalStateColumns(states),
    "sb_apply_final_states",
  );
}

/** The final-state functions' parameters, by FinalState field, in their order. */
const FINAL_STATE_PARAMS = [
  "messageSid",
  "status",
  "deliveredAt",
  "errorCode",
  "carrierError",
  "carrierRef",
  "submittedAt",
  "carrier",
] as const satisfies readonly (keyof FinalState)[];

/** A batch of final states as the final-state functions take them: one array per parameter. */
const finalStateColumns = (states: FinalState[]) => bindByName<FinalState>(FINAL_STATE_PARAMS, states);

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
    "select * from sb_apply_plain_final_states(?::text[], ?::text[], ?::timestamptz[], ?::text[], ?::text[], ?::text[], ?::timestamptz[], ?::text[])",
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
