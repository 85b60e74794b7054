-- Whether a queued message's claim lets a dispatcher take it: none, or (for a carrier that does not
-- confirm by report) one that expired before now. Written once for both claims (sb_claim_due.sql,
-- sb_claim_fair.sql). A plain SQL expression: the planner inlines it, so the claims' plans are the
-- same as with the expression written in place.
create or replace function sb_claimable(p_claimed_until timestamptz, p_confirmed boolean, p_now timestamptz) returns boolean
  language sql immutable parallel safe
  return p_claimed_until is null or (not p_confirmed and p_claimed_until < p_now);
