-- The shared token buckets (src/limits/bucket-store.ts, docs/limits.md): takes tokens from, or gives
-- them back to, several buckets at once, one call per group commit or dispatcher round.
-- Per key, in the order given (callers sort the keys, so two calls never wait for each other's row
-- locks in a cycle): the row is created full, locked, refilled at p_rates tokens per second up to
-- p_bursts (a burst changed by the operator moves the tokens by the difference, so a raised quota
-- counts what was already used today), then
--   p_wants < 0: the tokens are given back (never past the burst);
--   otherwise:  p_wants is granted if the bucket holds it, or (all or nothing: p_leasts = p_wants)
--               is full and p_wants is more than it can ever hold (the tokens go below zero: a debt
--               that delays the next takes), else
--               every whole token it holds if that is at least p_leasts, else nothing.
-- The clock is the caller's (p_now_ms): an injectable clock in tests; a clock behind the row's
-- refills nothing until it passes it. expires_ms is when the row holds no information any more
-- (full again; for a bucket that never refills, p_expires_ms): rows past it are deleted by
-- the sweep (bucket-store.ts). Returns per key what was granted (negative: given back) and the tokens left.
-- Settings: none off (every statement reaches its row by the primary key, whatever the planner
-- thinks); plan_cache_mode = force_generic_plan, as every function here: one plan per connection.
create or replace function sb_take_tokens(p_keys text[], p_rates float8[], p_bursts float8[], p_wants float8[], p_leasts float8[], p_expires_ms bigint[], p_now_ms bigint)
  returns table (key text, granted float8, tokens float8)
  language plpgsql
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
declare
  i int;
  t float8;
  old_burst float8;
  last_ms bigint;
  g float8;
  until_ms bigint;
begin
  for i in 1 .. coalesce(array_length(p_keys, 1), 0) loop
    insert into limit_buckets as b (key, tokens, burst, at_ms, expires_ms)
      values (p_keys[i], p_bursts[i], p_bursts[i], p_now_ms, p_now_ms)
      on conflict (key) do nothing;
    select b.tokens, b.burst, b.at_ms into t, old_burst, last_ms from limit_buckets b where b.key = p_keys[i] for update;
    t := t + (p_bursts[i] - old_burst);
    if p_now_ms > last_ms then
      t := t + (p_now_ms - last_ms) * p_rates[i] / 1000.0;
      last_ms := p_now_ms;
    end if;
    t := least(p_bursts[i], t);
    if p_wants[i] < 0 then
      g := p_wants[i];
    elsif t >= p_wants[i] or (p_wants[i] > p_bursts[i] and t >= p_bursts[i] and p_leasts[i] >= p_wants[i]) then
      g := p_wants[i];
    elsif floor(t) >= p_leasts[i] and t >= 1 then
      g := floor(t);
    else
      g := 0;
    end if;
    t := least(p_bursts[i], t - g);
    if p_rates[i] > 0 then
      until_ms := last_ms + ceil(greatest(0, p_bursts[i] - t) * 1000.0 / p_rates[i])::bigint;
    else
      until_ms := p_expires_ms[i];
    end if;
    update limit_buckets b set tokens = t, burst = p_bursts[i], at_ms = last_ms, expires_ms = until_ms where b.key = p_keys[i];
    key := p_keys[i];
    granted := g;
    tokens := t;
    return next;
  end loop;
end
$fn$;
