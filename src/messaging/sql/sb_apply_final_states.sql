-- The final states of a report batch whose messages want a delivery-receipt webhook
-- (message-store.ts updateFinalStates): run in the engine's transaction with the webhook rows.
-- Settings (measured, issue 14): sent as a plain statement, the planner, told by the table's
-- statistics that few messages are Processing or Submitted, chose a sequential scan of messages
-- joined row by row to the arrays: 10,000-35,000 comparisons and 15-40 ms for one report batch of
-- 100 (auto_explain, bench REST run). With no sequential or bitmap scan and no hash or merge join
-- the plan left is the nested loop over the arrays, one primary-key probe each, whatever the
-- table's size or statistics; force_generic_plan keeps that one plan per connection (PL/pgSQL
-- would otherwise plan the first five calls anew). test/db/hot-statements.test.ts pins the plan.
create or replace function sb_apply_final_states(p_sids text[], p_statuses text[], p_delivered_at timestamptz[], p_error_codes text[], p_carrier_errors text[])
  returns table (sid text, account_sid text, property_sid text, sender text, recipient text, delivery_receipt boolean, dr_webhook_uri text, dr_webhook_method text)
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  update messages m
     set status = v.status, delivered_at = v.delivered_at, error_code = v.error_code, carrier_error = v.carrier_error, claimed_until = null
    from unnest(p_sids, p_statuses, p_delivered_at, p_error_codes, p_carrier_errors) as v(sid, status, delivered_at, error_code, carrier_error)
   where m.sid = v.sid and m.direction = 'Transmit' and m.status in ('Processing', 'Submitted')
  returning m.sid::text, m.account_sid::text, m.property_sid::text, m.sender::text, m.recipient::text, m.delivery_receipt, m.dr_webhook_uri, m.dr_webhook_method::text;
end
$fn$;
