-- The round-robin claim of a backlog (message-store.ts claimFair): each listed account's oldest
-- due messages from its range of messages_account_queue_idx, each claimed row reached by its key;
-- returns what sb_claim_due returns (SMS flags, the account's AllowedCountries).
-- Settings, measured (bench/planner-settings.ts: the statement's generic plan, cached per
-- connection, on PostgreSQL 15 with an analyzed messages table of 30 rows, as when a new
-- deployment's first call makes the plan, and of 300,000 rows, 50 accounts; every setting
-- off but one, in turn):
-- enable_seqscan = off: without it, at 30 rows, a sort of a sequential scan of messages per account
--   instead of its range of messages_account_queue_idx, and sequential scans of accounts and
--   properties (also at 300,000 rows: 5.9 against 4.3 ms).
-- enable_bitmapscan = off: as sb_claim_due (dead entries of the queue index, Session 4).
-- enable_hashjoin = off: this claim underestimates its rows and hash-joined a full scan of the
--   primary key, 80 ms for 50,000 queued (dispatcher.ts tick()).
-- No merge join setting: the plan was the same with or without it.
-- enable_sort = off: on a grown table (10 million messages, analyzed while none was queued, then
--   a backlog of 100,000; bench/growth.ts) the statistics say the queue is empty, and the plan took
--   messages_queue_idx (send_at) and sorted its whole range by account: 345 ms and 53,000 buffers for a claim of 500,
--   against 2.4 ms and 1,400.
--   Without a sort, the index that gives the order (messages_account_queue_idx) is the one left.
-- plan_cache_mode = force_generic_plan: one plan per connection, no planning per call (PL/pgSQL
-- would plan the first five calls anew, and again whenever the generic estimate looks dearer).
drop function if exists sb_claim_fair(timestamptz, text[], timestamptz, integer, boolean);
create function sb_claim_fair(p_until timestamptz, p_accounts text[], p_now timestamptz, p_share integer, p_confirmed boolean)
  returns table (sid text, account_sid text, sender text, recipient text, text text, delivery_receipt boolean, attempts integer,
  send_at timestamptz, scheduled_at timestamptz, created_at timestamptz, sms_enabled boolean, allowed_countries text[])
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off set enable_hashjoin = off set enable_sort = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  with claimed as (
  update messages m
     set status = 'Processing', claimed_until = p_until, attempts = m.attempts + 1
   where m.sid in (
     select c.sid from unnest(p_accounts) as d(account_sid)
      cross join lateral (
        select q.sid from messages q
         where q.queued and (q.account_sid, q.send_at) >= (d.account_sid, '-infinity') and (q.account_sid, q.send_at) <= (d.account_sid, p_now)
           and q.direction = 'Transmit' and sb_claimable(q.claimed_until, p_confirmed, p_now)
         order by q.account_sid, q.send_at
         limit p_share
         for update skip locked) c)
  returning m.sid, m.account_sid, m.property_sid, m.sender, m.recipient, m.text, m.delivery_receipt, m.attempts, m.send_at, m.scheduled_at, m.created_at)
  select c.sid::text, c.account_sid::text, c.sender::text, c.recipient::text, c.text, c.delivery_receipt, c.attempts, c.send_at, c.scheduled_at, c.created_at,
         coalesce(s.sms_off = '', false), coalesce(s.allowed_countries, '{}')::text[]
    from claimed c left join sb_sms_status s on s.property_sid = c.property_sid;
end
$fn$;
