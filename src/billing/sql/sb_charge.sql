-- The conditional charge (docs/billing.md, src/billing/balance-store.ts): charges the i-th send
-- p_amounts[i] micro-units (> 0) on account p_accounts[i], in the order given, only when it fits:
-- a Prepaid account's balance may go down to -credit_limit (null: 0), a Postpaid account's to
-- -credit_limit when it has one and without limit when not. A send that does not fit is refused
-- and changes nothing; the ones after it are still tried (a batch refuses only what does not fit).
-- Each charge is a ledger entry (type Charge, the amount negative, the balance after it, the
-- message), with an id of its own from the ledger's sequence; an account's charges of one call are
-- one row: a single charge a Charge row, several a Charges row holding them as arrays (the view
-- balance_ledger shows each as its entry), so a batch of the send path writes one ledger row per
-- account, not one per send. A zero amount is accepted and writes nothing.
-- Exact under any concurrency: the balance rows are locked first, in account order (so two calls
-- never wait for each other in a cycle), and read once each under that lock; the checks run in
-- memory in send order, then each account's row is updated once and the entries inserted in one
-- statement. A batch of the send path is one update per account, not one per send: the balance
-- row is every send of its account's hot spot. Written to run inside the caller's transaction, e.g. the send's facts statement, so that
-- the charge commits or rolls back with the messages it pays for.
create or replace function sb_charge(p_accounts text[], p_amounts bigint[], p_message_sids text[], p_now timestamptz)
  returns table (ord integer, accepted boolean, balance_after bigint)
  language plpgsql
as $fn$
#variable_conflict use_column
declare
  n int := coalesce(array_length(p_accounts, 1), 0);
  acct record;
  i int;
  bal bigint;
  lowest bigint;
  taken bigint;
  crossed boolean;
  ok boolean[] := array_fill(false, array[n]);
  after bigint[] := array_fill(null::bigint, array[n]);
  -- The account's entries of this call (Charge or Charges row).
  ids bigint[];
  sids varchar(32)[];
  amounts bigint[];
  balances bigint[];
begin
  if n = 0 then
    return;
  end if;
  insert into account_balances as ab (account_sid, balance, updated_at)
    select distinct a.sid, 0::bigint, p_now from accounts a where a.sid = any (p_accounts) order by a.sid
    on conflict (account_sid) do nothing;
  for acct in
    select ab.account_sid, ab.balance, a.billing_mode, a.credit_limit,
           ab.low_balance_state, a.low_balance_threshold, a.low_balance_webhook_uri
      from account_balances ab join accounts a on a.sid = ab.account_sid
     where ab.account_sid = any (p_accounts)
     order by ab.account_sid
       for update of ab
  loop
    bal := acct.balance;
    -- null: no floor (Postpaid without a credit limit).
    lowest := case when acct.billing_mode = 'Postpaid' and acct.credit_limit is null then null else -coalesce(acct.credit_limit, 0) end;
    taken := 0;
    ids := '{}';
    sids := '{}';
    amounts := '{}';
    balances := '{}';
    for i in 1 .. n loop
      continue when p_accounts[i] <> acct.account_sid;
      if p_amounts[i] = 0 or lowest is null or bal - p_amounts[i] >= lowest then
        bal := bal - p_amounts[i];
        taken := taken + p_amounts[i];
        ok[i] := true;
        after[i] := bal;
        if p_amounts[i] <> 0 then
          ids := ids || nextval('balance_entries_id_seq');
          sids := sids || p_message_sids[i]::varchar(32);
          amounts := amounts || -p_amounts[i];
          balances := balances || bal;
        end if;
      end if;
    end loop;
    -- Low balance (docs/billing.md#low-balance): an armed account (Above) with a threshold and a
    -- webhook that these charges leave below the threshold records the crossing in the same
    -- update (Pending, the balance after, the time); the worker queues its BalanceLow webhook.
    -- Any other charge runs the plain update below, unchanged.
    crossed := taken <> 0 and acct.low_balance_state = 'Above' and acct.low_balance_webhook_uri is not null
               and bal < acct.low_balance_threshold;
    if crossed then
      update account_balances ab
         set balance = bal, updated_at = p_now, low_balance_state = 'Pending', low_balance_balance = bal, low_balance_at = p_now
       where ab.account_sid = acct.account_sid;
    elsif taken <> 0 then
      update account_balances ab set balance = bal, updated_at = p_now where ab.account_sid = acct.account_sid;
    end if;
    if cardinality(ids) = 1 then
      insert into balance_entries (id, account_sid, type, amount, balance_after, message_sid, reference, created_at)
        values (ids[1], acct.account_sid, 'Charge', amounts[1], balances[1], sids[1], '', p_now);
    elsif cardinality(ids) > 1 then
      -- The row's id is its last charge's, so the rows' order (the primary key) is the charges'.
      insert into balance_entries (id, account_sid, type, amount, balance_after, message_sid, reference, created_at,
                                   charge_ids, charge_message_sids, charge_amounts, charge_balances)
        values (ids[cardinality(ids)], acct.account_sid, 'Charges', -taken, bal, null, '', p_now, ids, sids, amounts, balances);
    end if;
  end loop;
  return query select k, ok[k], after[k] from generate_subscripts(p_accounts, 1) as k order by k;
end
$fn$;
