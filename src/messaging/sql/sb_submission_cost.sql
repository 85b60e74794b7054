-- What the operator pays a carrier for a message it took (docs/billing.md#carrier-costs-and-least-cost-routing):
-- the message's segments times the rate of the carrier's CostCard for its recipient in effect at
-- the hand-over (sb_rate_for, as the send's price at accept). Null when there is no such carrier,
-- the carrier has no CostCard or the card no rate, or when the product would leave the storable
-- range (src/common/money.ts MAX_MICROS; a refused update would lose the submissions written with
-- it). The carrier is found by its name (carriers_name_key): one probe. Every statement that
-- records a submission computes the cost here: sb_record_submissions, and the final states that
-- carry a submission held until its report (through sb_submission_on_final), as
-- a scalar subquery `(select c.cost from sb_submission_cost(...) c)`: a plain SQL function returning
-- a table (stable, no SET clause), so the planner inlines it and each row's cost is two index
-- probes (carriers_name_key, rates_pkey), which the statement's plan shows.
create or replace function sb_submission_cost(p_carrier text, p_recipient text, p_at timestamptz, p_segments integer)
  returns table (cost bigint)
  language sql
  stable
as $fn$
  select case when r.price_per_segment::numeric * p_segments <= 999999999999999999 then r.price_per_segment * p_segments end
    from carriers c
    cross join lateral sb_rate_for(c.cost_card::text, p_recipient, p_at) r
   where c.name = p_carrier
$fn$;
