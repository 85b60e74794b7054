-- The rates of many sends in one statement (src/billing/rate-card-store.ts, priceSends), each
-- through sb_rate_for (this file runs after it: the repeatable files run in path order): the i-th
-- row answers (p_cards[i], p_destinations[i], p_ats[i]); a send without a rate has null prefix
-- and price. The form the send's facts statement uses for its batch.
create or replace function sb_rate_for_batch(p_cards text[], p_destinations text[], p_ats timestamptz[])
  returns table (ord integer, prefix text, price_per_segment bigint, effective_from timestamptz)
  language sql
  stable
as $fn$
  select s.ord::integer, r.prefix, r.price_per_segment, r.effective_from
    from unnest(p_cards, p_destinations, p_ats) with ordinality as s(card, destination, at, ord)
    left join lateral sb_rate_for(s.card, s.destination, s.at) r on true
   order by s.ord
$fn$;
