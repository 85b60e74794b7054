-- Refunds (docs/billing.md#the-charge-on-the-send, src/billing/balance-store.ts refundMessages): gives back the
-- price of each message of p_message_sids that was priced (messages.price > 0: a priced message
-- is charged its price in the statement that stores it), once: a message refunded already (the
-- unique index balance_entries_refund_key) is left alone, whatever races with this call. Each
-- refund is a ledger entry (type Refund, the amount positive, the balance after it, the message).
-- The balance rows are locked in account order, as sb_charge locks them, so a refund and a charge
-- never wait for each other in a cycle. An unpriced message costs one primary-key probe.
-- Written to run inside the caller's transaction: the refund commits with the message's final
-- state (failed before a carrier took it, canceled).
create or replace function sb_refund(p_message_sids text[], p_now timestamptz)
  returns table (message_sid text, account_sid text, amount bigint, balance_after bigint)
  language plpgsql
as $fn$
#variable_conflict use_column
declare
  r record;
  b bigint;
begin
  for r in
    select m.sid::text as sid, m.account_sid::text as account_sid, m.price
      from messages m
     where m.sid = any (p_message_sids) and m.price > 0
       and not exists (select 1 from balance_entries e where e.message_sid = m.sid and e.type = 'Refund')
     order by m.account_sid, m.sid
  loop
    insert into account_balances (account_sid, balance, updated_at) values (r.account_sid, 0, p_now)
      on conflict (account_sid) do nothing;
    perform 1 from account_balances ab where ab.account_sid = r.account_sid for update;
    -- Checked again under the lock: a concurrent refund of the same message committed first.
    if exists (select 1 from balance_entries e where e.message_sid = r.sid and e.type = 'Refund') then
      continue;
    end if;
    -- A refund that brings the balance back to the LowBalanceThreshold arms its webhook again
    -- (docs/billing.md#low-balance): Sent becomes Above; a Pending crossing stays for the worker.
    update account_balances ab set balance = ab.balance + r.price, updated_at = p_now,
           low_balance_state = case when ab.low_balance_state = 'Sent' and ab.balance + r.price >= a.low_balance_threshold
                                    then 'Above' else ab.low_balance_state end
      from accounts a
     where ab.account_sid = r.account_sid and a.sid = ab.account_sid
    returning ab.balance into b;
    insert into balance_entries (account_sid, type, amount, balance_after, message_sid, reference, created_at)
      values (r.account_sid, 'Refund', r.price, b, r.sid, '', p_now);
    message_sid := r.sid;
    account_sid := r.account_sid;
    amount := r.price;
    balance_after := b;
    return next;
  end loop;
end
$fn$;
