-- sb_apply_final_states for the messages that need no delivery-receipt webhook, outside a
-- transaction (message-store.ts updatePlainFinalStates): it leaves the messages that do want one alone and returns their Sids
-- (needs_webhook) for the engine's transaction; the others it returns are those it changed.
-- Settings (measured, issue 14): sent as a plain statement, the planner, told by the table's
-- statistics that few messages are Processing or Submitted, chose a sequential scan of messages
-- joined row by row to the arrays: 10,000-35,000 comparisons and 15-40 ms for one report batch of
-- 100 (auto_explain, bench REST run). With no sequential or bitmap scan and no hash or merge join
-- the plan left is the nested loop over the arrays, one primary-key probe each, whatever the
-- table's size or statistics; force_generic_plan keeps that one plan per connection (PL/pgSQL
-- would otherwise plan the first five calls anew). test/db/hot-statements.test.ts pins the plan.
create or replace function sb_apply_plain_final_states(p_sids text[], p_statuses text[], p_delivered_at timestamptz[], p_error_codes text[], p_carrier_errors text[])
  returns table (sid text, needs_webhook boolean)
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  with v as (
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
   where m.direction = 'Transmit' and m.status in ('Processing', 'Submitted') and m.delivery_receipt and m.dr_webhook_uri <> '';
end
$fn$;
