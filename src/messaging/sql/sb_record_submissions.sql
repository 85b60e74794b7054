-- The delivery engine's submission update (message-store.ts updateSubmissions): a round's
-- carrier references by Sid, in one statement outside a transaction.
-- Settings (measured, issue 14): sent as a plain statement, the planner, told by the table's
-- statistics that few messages are Processing or Submitted, chose a sequential scan of messages
-- joined row by row to the arrays: 10,000-35,000 comparisons and 15-40 ms for one report batch of
-- 100 (auto_explain, bench REST run). With no sequential or bitmap scan and no hash or merge join
-- the plan left is the nested loop over the arrays, one primary-key probe each, whatever the
-- table's size or statistics; force_generic_plan keeps that one plan per connection (PL/pgSQL
-- would otherwise plan the first five calls anew). test/db/hot-statements.test.ts pins the plan.
create or replace function sb_record_submissions(p_sids text[], p_refs text[], p_ats timestamptz[])
  returns table (sid text)
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  update messages m
     set status = case when m.status = 'Processing' then 'Submitted' else m.status end,
         submitted_at = least(v.at, m.delivered_at), carrier_ref = coalesce(v.carrier_ref, m.carrier_ref), claimed_until = null
    from unnest(p_sids, p_refs, p_ats) as v(sid, carrier_ref, at)
   where m.sid = v.sid and m.direction = 'Transmit'
     and (m.status = 'Processing' or (m.status in ('Delivered', 'Failed') and m.submitted_at is null))
  returning m.sid::text;
end
$fn$;
