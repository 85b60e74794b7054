-- The rate of one send (docs/billing.md, src/billing/rate-card-store.ts): on card p_card, the longest
-- prefix of p_destination (E164, "+" and digits) with a rate in effect at p_at, and of that
-- prefix the rate with the latest effective_from not after p_at (a future rate takes over at its
-- exact second). No row: the card has no rate for the destination (or there is no such card).
-- Cheap however large the card: the prefixes of a number are at most 15, and each is one probe of
-- the primary key (card, prefix, effective_from); the ordering picks among those few rows.
-- A plain SQL function (stable, no SET clause) so that the planner inlines it where it is called
-- as `left join lateral sb_rate_for(card, destination, at) r on true`, as the send's facts
-- statement does for a whole batch (sb_rate_for_batch.sql shows the form).
create or replace function sb_rate_for(p_card text, p_destination text, p_at timestamptz)
  returns table (prefix text, price_per_segment bigint, effective_from timestamptz)
  language sql
  stable
as $fn$
  select r.prefix::text, r.price_per_segment, r.effective_from
    from rates r
   where r.card = p_card
     and r.prefix = any (array(select left(p_destination, n) from generate_series(2, least(length(p_destination), 16)) as n))
     and r.effective_from <= p_at
   order by length(r.prefix) desc, r.effective_from desc
   limit 1
$fn$;
