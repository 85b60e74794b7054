-- The dispatcher's claim in due order (message-store.ts claimInOrder): one statement outside a
-- transaction. With p_confirmed (a carrier that confirms by report) an expired claim is never
-- taken here: holdExpiredClaims first (which claims may be taken: sb_claimable.sql). Each
-- claimed message also returns what its account and property say now (sb_sms_status.sql, joined
-- to the claimed rows: one primary-key probe of each): whether it may go out (both enabled for
-- SMS), and the account's AllowedCountries; so that a message claimed after a disable fails
-- instead of going out, and the destination permissions apply again at dispatch (issue 41: the
-- dispatcher checks them with destination-rules.ts, no query of its own).
-- Settings, measured (bench/planner-settings.ts: the statement's generic plan, cached per
-- connection, on PostgreSQL 15 with an analyzed messages table of 30 rows, as when a new
-- deployment's first call makes the plan, and of 300,000 rows, 50 accounts; every setting
-- off but one, in turn):
-- enable_seqscan = off: without it, at 30 rows, a sort of a sequential scan of messages instead of
--   the ordered walk of messages_queue_idx that stops at the limit, and sequential scans of
--   accounts and properties for the enabled checks (also at 300,000 rows: 7.0 against 4.3 ms).
-- enable_bitmapscan = off: a bitmap scan of the queue index visits the heap for every dead entry
--   (messages submitted since the last vacuum), ~4 ms per round under load (docs/benchmarks.md,
--   "Session 4: ordered claim"); the fresh tables above show no difference.
-- No hash or merge join setting: with the two above the plan was the same with or without them.
-- plan_cache_mode = force_generic_plan: one plan per connection, no planning per call (PL/pgSQL
-- would plan the first five calls anew, and again whenever the generic estimate looks dearer).
drop function if exists sb_claim_due(timestamptz, timestamptz, integer, boolean);
create function sb_claim_due(p_until timestamptz, p_now timestamptz, p_limit integer, p_confirmed boolean)
  returns table (sid text, account_sid text, sender text, recipient text, text text, delivery_receipt boolean, attempts integer,
  send_at timestamptz, scheduled_at timestamptz, created_at timestamptz, sms_enabled boolean, allowed_countries text[])
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  with claimed as (
  update messages m
     set status = 'Processing', claimed_until = p_until, attempts = m.attempts + 1
   where m.sid in (
     select q.sid from messages q
      where q.queued and q.direction = 'Transmit'
        and q.send_at <= p_now and sb_claimable(q.claimed_until, p_confirmed, p_now)
      order by q.send_at
      limit p_limit
      for update skip locked)
  returning m.sid, m.account_sid, m.property_sid, m.sender, m.recipient, m.text, m.delivery_receipt, m.attempts, m.send_at, m.scheduled_at, m.created_at)
  select c.sid::text, c.account_sid::text, c.sender::text, c.recipient::text, c.text, c.delivery_receipt, c.attempts, c.send_at, c.scheduled_at, c.created_at,
         coalesce(s.sms_off = '', false), coalesce(s.allowed_countries, '{}')::text[]
    from claimed c left join sb_sms_status s on s.property_sid = c.property_sid;
end
$fn$;
