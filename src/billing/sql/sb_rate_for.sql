-- The rate of one send (docs/billing.md, src/billing/rate-card-store.ts): on card p_card, the longest
-- prefix of p_destination (E164, "+" and digits) with a rate in effect at p_at, and of that
-- prefix the rate with the latest effective_from not after p_at (a future rate takes over at its
-- exact second). No row: the card has no rate for the destination (or there is no such card).
-- Cheap however large the card: the destination's prefixes are tried longest first, each one probe
-- of the primary key (card, prefix, effective_from) that reads its newest rate in effect, and the
-- first found ends the search (the lateral join emits in generate_series' order). Each probe's
-- condition names the whole key, so no plan (a generic one included) can read the card's other
-- prefixes. A null p_card tries nothing: generate_series(1, 2, -1) is empty.
-- A plain SQL function (stable, no SET clause) so that the planner inlines it where it is called
-- as `left join lateral sb_rate_for(card, destination, at) r on true`, as the send's facts
-- statement does for a whole batch (sb_rate_for_batch.sql shows the form).
create or replace function sb_rate_for(p_card text, p_destination text, p_at timestamptz)
  returns table (prefix text, price_per_segment bigint, effective_from timestamptz)
  language sql
  stable
as $fn$
  select r.prefix::text, r.price_per_segment, r.effective_from
    from generate_series(case when p_card is null then 1 else least(length(p_destination), 16) end, 2, -1) as n
    cross join lateral (
      select x.prefix, x.price_per_segment, x.effective_from
        from rates x
       where x.card = p_card and x.prefix = left(p_destination, n) and x.effective_from <= p_at
       order by x.effective_from desc
       limit 1) r
   limit 1
$fn$;
