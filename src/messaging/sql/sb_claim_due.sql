-- The dispatcher's claim in due order (message-store.ts claimInOrder): one statement outside a
-- transaction. With p_confirmed (a carrier that confirms by report) an expired claim is never
-- taken here: holdExpiredClaims first. Each claimed message also returns whether its account and
-- property are still enabled for SMS (one primary-key probe of each, in the RETURNING list), so
-- that a message claimed after a disable fails instead of going out.
-- Settings (measured): no bitmap or sequential scan, so the claim walks the queue index in order
-- and stops at the limit: a bitmap scan of it visited the heap for every dead entry of the index,
-- ~4 ms per round (docs/benchmarks.md, "Session 4: ordered claim"); no hash or merge join, so each
-- claimed row is reached by its key. force_generic_plan: under these settings the plan's shape does
-- not depend on the parameters (the ordered scan stopped by the limit is the cheapest plan left for
-- any value), so a custom plan would only add planning to every round (PL/pgSQL plans the first
-- five calls anew, and again whenever the generic estimate looks dearer, which a limit of unknown
-- value makes likely). test/db/hot-statements.test.ts pins the generic plan.
create or replace function sb_claim_due(p_until timestamptz, p_now timestamptz, p_limit integer, p_confirmed boolean)
  returns table (sid text, account_sid text, sender text, recipient text, text text, delivery_receipt boolean, attempts integer,
  send_at timestamptz, scheduled_at timestamptz, created_at timestamptz, sms_enabled boolean)
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  update messages m
     set status = 'Processing', claimed_until = p_until, attempts = m.attempts + 1
   where m.sid in (
     select q.sid from messages q
      where q.queued and q.direction = 'Transmit'
        and q.send_at <= p_now and (q.claimed_until is null or (not p_confirmed and q.claimed_until < p_now))
      order by q.send_at
      limit p_limit
      for update skip locked)
  returning m.sid::text, m.account_sid::text, m.sender::text, m.recipient::text, m.text, m.delivery_receipt, m.attempts, m.send_at, m.scheduled_at, m.created_at, coalesce((select a.sms_enabled from accounts a where a.sid = m.account_sid), false) and coalesce((select p.sms_enabled from properties p where p.sid = m.property_sid), false);
end
$fn$;
