-- The submission columns a final state writes (sb_apply_final_states, sb_apply_plain_final_states):
-- a submission the dispatcher held until this report (src/delivery/held-submissions.ts) is recorded
-- with the final state, as sb_record_submissions would record it (the submitted time no later than
-- the delivery, the carrier's reference and name, the operator's cost by sb_submission_cost), so a
-- delivered message is written once after its insert. None held (p_submitted_at and p_carrier null)
-- or one recorded already (p_row_submitted_at set): the row's own values stay. Called as
-- `(submitted_at, carrier_ref, carrier, cost) = (select h.* from sb_submission_on_final(...) h)`:
-- a plain SQL function returning a table (stable, no SET clause), so the planner inlines it.
create or replace function sb_submission_on_final(
    p_row_submitted_at timestamptz, p_row_carrier_ref text, p_row_carrier text, p_row_cost bigint,
    p_submitted_at timestamptz, p_carrier_ref text, p_carrier text, p_delivered_at timestamptz,
    p_recipient text, p_segments integer)
  returns table (submitted_at timestamptz, carrier_ref text, carrier text, cost bigint)
  language sql
  stable
as $fn$
  select case when p_submitted_at is null or p_row_submitted_at is not null then p_row_submitted_at
              else least(p_submitted_at, p_delivered_at) end,
         case when p_submitted_at is null or p_row_submitted_at is not null then p_row_carrier_ref
              else coalesce(p_carrier_ref, p_row_carrier_ref) end,
         case when p_carrier is null or p_row_submitted_at is not null then p_row_carrier else p_carrier end,
         case when p_carrier is null or p_row_submitted_at is not null then p_row_cost
              else (select c.cost from sb_submission_cost(p_carrier, p_recipient, p_submitted_at, p_segments) c) end
$fn$;
