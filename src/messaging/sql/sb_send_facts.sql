-- The facts a batch of sends is judged on (messaging/send-pipeline.ts), read in one statement:
-- per send (v.i), its account's token hash and SMS flag, whether the property is that account's
-- and its SMS flag, whether the account owns the E164 sender and the E164 ForwardFromSms, whether
-- the ForwardToSms and the recipient are any of the deployment's numbers, whether the recipient
-- opted out of the account's messages (opt_outs), and its Idempotency-Key
-- with the message the key answered. It judges nothing: the rules live in the pipeline, and the
-- store's statement around it (message-store.ts sendFactsAndStore) inserts a send only where
-- each fact is the value the pipeline says the send needs.
-- Settings: a plan made while the tables were small could hash-join a sequential scan of a table
-- and keep it as the table grows (40 ms per batch at 100,000 idempotency keys,
-- bench/planner-settings.ts); with sequential scans and hash or merge joins off every row is looked
-- up through an index at any size. No bitmap scan setting: the plan, pinned by
-- test/db/hot-statements.test.ts, has none without it. plan_cache_mode = force_generic_plan: one
-- plan per connection, no planning per call (PL/pgSQL would plan the first five calls anew, and
-- again whenever the generic estimate looks dearer).
drop function if exists sb_send_facts(int[], text[], text[], text[], text[], text[], text[], text[], timestamptz[]);
create function sb_send_facts(p_i int[], p_account text[], p_property text[], p_sender text[], p_forward_from text[], p_forward_to text[], p_recipient text[], p_idem_key text[], p_expire_before timestamptz[])
  returns table (i int, token_hash text, account_sms boolean, property_found boolean, property_sms boolean, sender_owned boolean, forward_from_owned boolean, forward_to_ours boolean, recipient_ours boolean, opted_out boolean,
                 key_expired boolean, key_hash text, m_sid text, m_account_sid text, m_property_sid text, m_sender text, m_recipient text, m_text text)
  language plpgsql stable
  set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
begin
  return query
  select v.i, a.token_hash::text, a.sms_enabled, p.sid is not null, p.sms_enabled, s.sid is not null, ff.sid is not null, ft.sid is not null, r.sid is not null, o.number is not null,
         k.created_at <= v.expire_before, k.request_hash::text, m.sid::text, m.account_sid::text, m.property_sid::text, m.sender::text, m.recipient::text, m.text
    from unnest(p_i, p_account, p_property, p_sender, p_forward_from, p_forward_to, p_recipient, p_idem_key, p_expire_before)
         as v(i, account_sid, property_sid, sender, forward_from, forward_to, recipient, idem_key, expire_before)
    left join accounts a on a.sid = v.account_sid
    left join properties p on p.sid = v.property_sid and p.account_sid = v.account_sid
    left join numbers s on s.number = v.sender and s.account_sid = v.account_sid
    left join numbers ff on ff.number = v.forward_from and ff.account_sid = v.account_sid
    left join numbers ft on ft.number = v.forward_to
    left join numbers r on r.number = v.recipient
    left join opt_outs o on o.account_sid = v.account_sid and o.number = v.recipient
    left join idempotency_keys k on k.account_sid = v.account_sid and k.key = v.idem_key
    left join messages m on m.sid = k.message_sid;
end
$fn$;
