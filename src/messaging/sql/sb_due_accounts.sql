-- The accounts with due messages (message-store.ts listDueAccounts), for the round-robin claim: a
-- loose scan of messages_account_queue_idx, one probe per account.
-- Settings (measured): no bitmap or sequential scan, so the scan walks the account queue index in order
-- and stops at the limit: a bitmap scan of it visited the heap for every dead entry of the index,
-- ~4 ms per round (docs/benchmarks.md, "Session 4: ordered claim"); no hash or merge join, so each
-- claimed row is reached by its key. force_generic_plan: under these settings the plan's shape does
-- not depend on the parameters (the ordered scan stopped by the limit is the cheapest plan left for
-- any value), so a custom plan would only add planning to every round (PL/pgSQL plans the first
-- five calls anew, and again whenever the generic estimate looks dearer, which a limit of unknown
-- value makes likely). test/db/hot-statements.test.ts pins the generic plan.
create or replace function sb_due_accounts(p_now timestamptz)
  returns table (account_sid text)
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off set enable_hashjoin = off set enable_mergejoin = off
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
