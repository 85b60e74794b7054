-- The conditional charge (docs/billing.md, src/billing/balance-store.ts): charges the i-th send
-- p_amounts[i] micro-units (> 0) on account p_accounts[i], in the order given, only when it fits:
-- a Prepaid account's balance may go down to -credit_limit (null: 0), a Postpaid account's to
-- -credit_limit when it has one and without limit when not. A send that does not fit is refused
-- and changes nothing; the ones after it are still tried (a batch refuses only what does not fit).
-- Each charge writes a ledger entry (type Charge, the amount negative, the balance after it, the
-- message). A zero amount is accepted and writes nothing.
-- Exact under any concurrency: the balance rows are locked first, in account order (so two calls
-- never wait for each other in a cycle), and each check and update is one statement on a locked
-- row. Written to run inside the caller's transaction, e.g. the send's facts statement, so that
-- the charge commits or rolls back with the messages it pays for.
create or replace function sb_charge(p_accounts text[], p_amounts bigint[], p_message_sids text[], p_now timestamptz)
  returns table (ord integer, accepted boolean, balance_after bigint)
  language plpgsql
as $fn$
declare
  i int;
  b bigint;
begin
  insert into account_balances as ab (account_sid, balance, updated_at)
    select distinct a.sid, 0::bigint, p_now from accounts a where a.sid = any (p_accounts) order by a.sid
    on conflict (account_sid) do nothing;
  perform 1 from account_balances ab where ab.account_sid = any (p_accounts) order by ab.account_sid for update;
  for i in 1 .. coalesce(array_length(p_accounts, 1), 0) loop
    ord := i;
    if p_amounts[i] = 0 then
      accepted := true;
      select ab.balance into balance_after from account_balances ab where ab.account_sid = p_accounts[i];
      return next;
      continue;
    end if;
    update account_balances ab set balance = ab.balance - p_amounts[i], updated_at = p_now
      from accounts a
     where ab.account_sid = p_accounts[i] and a.sid = ab.account_sid
       and ((a.billing_mode = 'Postpaid' and a.credit_limit is null)
            or ab.balance - p_amounts[i] >= -coalesce(a.credit_limit, 0))
    returning ab.balance into b;
    if found then
      insert into balance_entries (account_sid, type, amount, balance_after, message_sid, reference, created_at)
        values (p_accounts[i], 'Charge', -p_amounts[i], b, p_message_sids[i], '', p_now);
      accepted := true;
      balance_after := b;
    else
      accepted := false;
      balance_after := null;
    end if;
    return next;
  end loop;
end
$fn$;
