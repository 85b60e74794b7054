-- A send batch in one statement (message-store.ts storeSendBatch; send-writer.ts takes it for a
-- batch with no Idempotency-Key, leased sender or E164 ForwardFromSms): it checks every send (the
-- account's token hash and SMS flag, the property of that account, an E164 sender's ownership) and
-- stores, in the same statement, the messages of the sends that pass. One round trip and one
-- commit per batch, where BEGIN, the check, the insert and COMMIT were several. A send is stored
-- when p_store is true (the service found no problem in the request) and the checks pass; the
-- service answers each send from its returned row and `stored` flag, so an answer of success
-- always means a stored row. The arguments after p_store are MESSAGE_COLUMNS in order.
-- Settings, those of the send batch's check (SEND_BATCH_SETTINGS in message-store.ts, the same
-- joins): a plan made while the tables were small could hash-join a sequential scan of a table and
-- keep it as the table grows (40 ms per batch at 100,000 idempotency keys); with sequential scans
-- and hash or merge joins off every row is looked up through an index at any size. No bitmap
-- scan setting: the check's plan, pinned by test/db/hot-statements.test.ts, has none without it.
-- plan_cache_mode = force_generic_plan: one plan per connection, no planning per call (PL/pgSQL
-- would plan the first five calls anew, and again whenever the generic estimate looks dearer).
create or replace function sb_send_batch(p_i int[], p_check_account text[], p_check_property text[], p_owned_sender text[], p_token_hash text[], p_store boolean[],
  p_sid text[], p_account_sid text[], p_property_sid text[], p_direction text[], p_status text[], p_sender_kind text[], p_sender text[], p_recipient text[], p_text text[], p_encoding text[], p_num_segments int[], p_delivery_receipt bool[], p_dr_webhook_uri text[], p_dr_webhook_method text[], p_forward_to_sms text[], p_forward_from_sms text[], p_forward_to_email text[], p_forward_from_email text[], p_webhook_uri text[], p_webhook_method text[], p_lease_sid text[], p_scheduled_at timestamptz[], p_send_at timestamptz[], p_created_at timestamptz[])
  returns table (i int, account_token_hash text, account_sms boolean, property_sms boolean, owned boolean, stored boolean)
  language plpgsql
  set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  with c as materialized (
    select v.*, a.token_hash::text as account_token_hash, a.sms_enabled as account_sms, p.sms_enabled as property_sms, n.sid is not null as owned,
           coalesce(v.store and a.token_hash = v.token_hash and a.sms_enabled and p.sms_enabled and (v.sender_kind <> 'E164' or n.sid is not null), false) as stored
      from unnest(p_i, p_check_account, p_check_property, p_owned_sender, p_token_hash, p_store, p_sid, p_account_sid, p_property_sid, p_direction, p_status, p_sender_kind, p_sender, p_recipient, p_text, p_encoding, p_num_segments, p_delivery_receipt, p_dr_webhook_uri, p_dr_webhook_method, p_forward_to_sms, p_forward_from_sms, p_forward_to_email, p_forward_from_email, p_webhook_uri, p_webhook_method, p_lease_sid, p_scheduled_at, p_send_at, p_created_at)
           as v(i, check_account_sid, check_property_sid, owned_sender, token_hash, store, sid, account_sid, property_sid, direction, status, sender_kind, sender, recipient, text, encoding, num_segments, delivery_receipt, dr_webhook_uri, dr_webhook_method, forward_to_sms, forward_from_sms, forward_to_email, forward_from_email, webhook_uri, webhook_method, lease_sid, scheduled_at, send_at, created_at)
      left join accounts a on a.sid = v.check_account_sid
      left join properties p on p.sid = v.check_property_sid and p.account_sid = v.check_account_sid
      left join numbers n on n.number = v.owned_sender and n.account_sid = v.check_account_sid
  ), ins as (
    insert into messages (sid, account_sid, property_sid, direction, status, sender_kind, sender, recipient, text, encoding, num_segments, delivery_receipt, dr_webhook_uri, dr_webhook_method, forward_to_sms, forward_from_sms, forward_to_email, forward_from_email, webhook_uri, webhook_method, lease_sid, scheduled_at, send_at, created_at)
    select c.sid, c.account_sid, c.property_sid, c.direction, c.status, c.sender_kind, c.sender, c.recipient, c.text, c.encoding, c.num_segments, c.delivery_receipt, c.dr_webhook_uri, c.dr_webhook_method, c.forward_to_sms, c.forward_from_sms, c.forward_to_email, c.forward_from_email, c.webhook_uri, c.webhook_method, c.lease_sid, c.scheduled_at, c.send_at, c.created_at from c where c.stored
  )
  select c.i, c.account_token_hash, c.account_sms, c.property_sms, c.owned, c.stored from c;
end
$fn$;
