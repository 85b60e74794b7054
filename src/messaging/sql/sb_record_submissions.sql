-- The delivery engine's submission update (message-store.ts updateSubmissions): a round's
-- carrier references by Sid, in one statement outside a transaction, with the name of the carrier
-- that took each (null: unknown, as in a carrier's own Submitted report; the column is kept).
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
--
-- The operator's Cost is written here too, with the carrier (sb_submission_cost); a row without a
-- carrier name (a carrier's own Submitted report) keeps the cost it had.
create or replace function sb_record_submissions(p_sids text[], p_refs text[], p_ats timestamptz[], p_carriers text[])
  returns table (sid text)
  language plpgsql
  set enable_seqscan = off set enable_hashjoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  update messages m
     set status = case when m.status = 'Processing' then 'Submitted' else m.status end,
         submitted_at = least(v.at, m.delivered_at), carrier_ref = coalesce(v.carrier_ref, m.carrier_ref),
         carrier = coalesce(v.carrier, m.carrier), claimed_until = null,
         cost = case when v.carrier is null then m.cost else (select c.cost from sb_submission_cost(v.carrier, m.recipient::text, v.at, m.num_segments) c) end
    from unnest(p_sids, p_refs, p_ats, p_carriers) as v(sid, carrier_ref, at, carrier)
   where m.sid = v.sid and m.direction = 'Transmit'
     and (m.status = 'Processing' or (m.status in ('Delivered', 'Failed') and m.submitted_at is null))
  returning m.sid::text;
end
$fn$;
