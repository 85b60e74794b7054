-- sb_apply_final_states for the messages that need no delivery-receipt webhook, outside a
-- transaction (message-store.ts updatePlainFinalStates): it leaves the messages that do want one alone and returns their Sids
-- (needs_webhook) for the engine's transaction; the others it returns are those it changed.
-- Settings, measured (bench/planner-settings.ts: the statement's generic plan, cached per
-- connection, on PostgreSQL 15 with an analyzed messages table of 30 rows, as when a new
-- deployment's first call makes the plan, and of 300,000 rows, 50 accounts; every setting
-- off but one, in turn):
-- enable_seqscan = off: without it, at 30 rows, the arrays joined to a sequential scan of messages
--   (kept for the connection as the table grows; before these functions, planned per call, the
--   same shape took 15-40 ms for a batch of 100: issue 14, auto_explain).
-- enable_hashjoin = off: without it, at 30 rows, a hash join over a full scan of messages_pkey
--   instead of one primary-key probe per Sid.
-- No bitmap or merge join setting: the plan was the same with or without each.
-- plan_cache_mode = force_generic_plan: one plan per connection, no planning per call (PL/pgSQL
-- would plan the first five calls anew, and again whenever the generic estimate looks dearer).
create or replace function sb_apply_plain_final_states(p_sids text[], p_statuses text[], p_delivered_at timestamptz[], p_error_codes text[], p_carrier_errors text[],
    p_carrier_refs text[], p_submitted_ats timestamptz[], p_carriers text[])
  returns table (sid text, needs_webhook boolean)
  language plpgsql
  set enable_seqscan = off set enable_hashjoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  with v as (
    select * from unnest(p_sids, p_statuses, p_delivered_at, p_error_codes, p_carrier_errors, p_carrier_refs, p_submitted_ats, p_carriers)
      as v(sid, status, delivered_at, error_code, carrier_error, carrier_ref, submitted_at, carrier)
  ), changed as (
    update messages m
       set status = v.status, delivered_at = v.delivered_at, error_code = v.error_code, carrier_error = v.carrier_error, claimed_until = null,
           -- A submission the dispatcher held until this report, recorded with the final state (sb_submission_on_final.sql).
           (submitted_at, carrier_ref, carrier, cost) = (select h.* from sb_submission_on_final(m.submitted_at, m.carrier_ref, m.carrier, m.cost,
             v.submitted_at, v.carrier_ref, v.carrier, v.delivered_at, m.recipient::text, m.num_segments) h)
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
