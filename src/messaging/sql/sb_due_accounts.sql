-- The accounts with due messages (message-store.ts listDueAccounts), for the round-robin claim: a
-- loose scan of messages_account_queue_idx, one probe per account.
-- Settings, measured (bench/planner-settings.ts: the statement's generic plan, cached per
-- connection, on PostgreSQL 15 with an analyzed messages table of 30 rows, as when a new
-- deployment's first call makes the plan, and of 300,000 rows, 50 accounts; every setting
-- off but one, in turn):
-- enable_seqscan = off: without it, at 30 rows, each step of the loose scan sorts a sequential scan
--   of messages instead of one probe of messages_account_queue_idx.
-- No bitmap, hash or merge join setting: the plan was the same with or without each.
-- enable_sort = off: on a grown table (10 million messages, analyzed while none was queued, then
--   a backlog of 100,000; bench/growth.ts) the statistics say the queue is empty, and the plan took
--   messages_queue_idx (send_at) and sorted its whole range by account: 367 ms and 105,000 buffers per call,
--   against 0.24 ms and 430.
--   Without a sort, the index that gives the order (messages_account_queue_idx) is the one left.
-- plan_cache_mode = force_generic_plan: one plan per connection, no planning per call (PL/pgSQL
-- would plan the first five calls anew, and again whenever the generic estimate looks dearer).
create or replace function sb_due_accounts(p_now timestamptz)
  returns table (account_sid text)
  language plpgsql
  set enable_seqscan = off set enable_sort = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  with recursive heads(account_sid, send_at) as (
      (select q.account_sid, q.send_at from messages q where q.queued order by q.account_sid, q.send_at limit 1)
    union all
      select n.account_sid, n.send_at
        from heads h
        cross join lateral (
          select q.account_sid, q.send_at from messages q
           where q.queued and q.account_sid > h.account_sid
           order by q.account_sid, q.send_at limit 1) n
  )
  select h.account_sid::text from heads h where h.send_at <= p_now;
end
$fn$;
