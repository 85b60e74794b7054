import { Migration } from "@mikro-orm/migrations";

/** What the claim returns of each message (ClaimedRow in src/messaging/message-store.ts). */
const CLAIMED = `sid text, account_sid text, sender text, recipient text, text text, delivery_receipt boolean, attempts integer,
  send_at timestamptz, scheduled_at timestamptz, created_at timestamptz`;

/** The two claims' shared parts: what a claim sets, which queued message it may take, and what it returns (CLAIMED). */
const CLAIM_SET = `update messages m
     set status = 'Processing', claimed_until = p_until, attempts = m.attempts + 1`;
const CLAIMABLE = "(q.claimed_until is null or (not p_confirmed and q.claimed_until < p_now))";
const CLAIMED_RETURNING =
  "returning m.sid::text, m.account_sid::text, m.sender::text, m.recipient::text, m.text, m.delivery_receipt, m.attempts, m.send_at, m.scheduled_at, m.created_at";

/** This migration's copy of planByKey (Migration20261125000000): history, its output never changes. */
function planByKey(signature: string, returns: string, update: string): string {
  return `
create function ${signature}
  returns table (${returns})
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  ${update};
end
$fn$`;
}

/**
 * The delivery engine's two most frequent writes as single statements outside an explicit
 * transaction (issue 14): a count of the statements of a REST load run found the engine sending
 * ~80 % of them, and each one costs the service a write to its socket and a turn of its event loop.
 *
 * `sb_claim_due` is the dispatcher's claim in due order (claimSql): it was BEGIN, the planner
 * settings (ORDERED_QUEUE_SCAN), the UPDATE and COMMIT, four round trips per round, the
 * transaction there only for the settings. As a function's `SET` clauses they hold for its
 * statement alone: no bitmap or sequential scan (the ordered walk of messages_queue_idx that stops
 * at the limit: a bitmap scan visits the heap for every dead entry of the index, ~4 ms per round,
 * docs/benchmarks.md "Session 4: ordered claim"), no hash or merge join (each claimed row reached
 * by its key). `force_generic_plan`: with those settings the plan's shape does not depend on `now`
 * or the limit (the ordered scan of the only index in send_at order, stopped by the limit, is the
 * cheapest plan left for any value; test/db/hot-statements.test.ts pins the generic one), so a
 * custom plan would only add planning to every round (PL/pgSQL's default plans the first five
 * calls each anew, and keeps doing so whenever the generic plan's estimate looks dearer than
 * theirs, which a `limit` parameter of unknown value makes likely). With p_confirmed
 * (a carrier that confirms by report) an expired claim is never taken here: holdUnconfirmed first.
 * The round-robin claim of a backlog (DUE_ACCOUNTS_SQL and fairClaimSql before) likewise:
 * `sb_due_accounts` (the loose scan of messages_account_queue_idx, one probe per account) and
 * `sb_claim_fair` (each account's oldest due messages from its range of that index, each claimed
 * row reached by its key); their plans do not depend on the parameters' values either. That round
 * keeps its transaction (its statements claim all or nothing), without the settings statement.
 *
 * `sb_apply_plain_final_states` is sb_apply_final_states for the messages that need no delivery
 * receipt webhook: the report batch was BEGIN, the UPDATE and COMMIT, the transaction there only
 * so that a webhook is queued with its message's final state, and most messages ask for none. It
 * leaves the messages that do ask for one alone and returns their Sids (needs_webhook), for the
 * engine's transaction (sb_apply_final_states and the webhook); the others it returns are those
 * it changed. Same settings as Migration20261125000000 (one primary-key probe per Sid).
 */
export class Migration20261127000000 extends Migration {
  override name = "Migration20261127000000";

  override up(): void {
    this.addSql(
      planByKey(
        `sb_claim_due(p_until timestamptz, p_now timestamptz, p_limit integer, p_confirmed boolean)`,
        CLAIMED,
        `${CLAIM_SET}
   where m.sid in (
     select q.sid from messages q
      where q.queued and q.direction = 'Transmit'
        and q.send_at <= p_now and ${CLAIMABLE}
      order by q.send_at
      limit p_limit
      for update skip locked)
  ${CLAIMED_RETURNING}`,
      ),
    );
    this.addSql(
      planByKey(
        `sb_due_accounts(p_now timestamptz)`,
        `account_sid text`,
        `with recursive heads(account_sid, send_at) as (
      (select q.account_sid, q.send_at from messages q where q.queued order by q.account_sid, q.send_at limit 1)
    union all
      select n.account_sid, n.send_at
        from heads h
        cross join lateral (
          select q.account_sid, q.send_at from messages q
           where q.queued and q.account_sid > h.account_sid
           order by q.account_sid, q.send_at limit 1) n
  )
  select h.account_sid::text from heads h where h.send_at <= p_now`,
      ),
    );
    this.addSql(
      planByKey(
        `sb_claim_fair(p_until timestamptz, p_accounts text[], p_now timestamptz, p_share integer, p_confirmed boolean)`,
        CLAIMED,
        `${CLAIM_SET}
   where m.sid in (
     select c.sid from unnest(p_accounts) as d(account_sid)
      cross join lateral (
        select q.sid from messages q
         where q.queued and (q.account_sid, q.send_at) >= (d.account_sid, '-infinity') and (q.account_sid, q.send_at) <= (d.account_sid, p_now)
           and q.direction = 'Transmit' and ${CLAIMABLE}
         order by q.account_sid, q.send_at
         limit p_share
         for update skip locked) c)
  ${CLAIMED_RETURNING}`,
      ),
    );
    this.addSql(
      planByKey(
        `sb_apply_plain_final_states(p_sids text[], p_statuses text[], p_delivered_at timestamptz[], p_error_codes text[], p_carrier_errors text[])`,
        `sid text, needs_webhook boolean`,
        `with v as (
    select * from unnest(p_sids, p_statuses, p_delivered_at, p_error_codes, p_carrier_errors) as v(sid, status, delivered_at, error_code, carrier_error)
  ), changed as (
    update messages m
       set status = v.status, delivered_at = v.delivered_at, error_code = v.error_code, carrier_error = v.carrier_error, claimed_until = null
      from v
     where m.sid = v.sid and m.direction = 'Transmit' and m.status in ('Processing', 'Submitted')
       and not (m.delivery_receipt and m.dr_webhook_uri <> '')
    returning m.sid
  )
  select c.sid::text, false from changed c
  union all
  -- The statement's snapshot: none of these is one the UPDATE changed (the conditions exclude each other).
  select m.sid::text, true from v join messages m on m.sid = v.sid
   where m.direction = 'Transmit' and m.status in ('Processing', 'Submitted') and m.delivery_receipt and m.dr_webhook_uri <> ''`,
      ),
    );
  }

  override down(): void {
    this.addSql(`drop function if exists sb_apply_plain_final_states(text[], text[], timestamptz[], text[], text[])`);
    this.addSql(`drop function if exists sb_claim_fair(timestamptz, text[], timestamptz, integer, boolean)`);
    this.addSql(`drop function if exists sb_due_accounts(timestamptz)`);
    this.addSql(`drop function if exists sb_claim_due(timestamptz, timestamptz, integer, boolean)`);
  }
}
