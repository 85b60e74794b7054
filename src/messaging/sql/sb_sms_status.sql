-- Whether an account's property may send SMS now: the one place the SMS-enabled condition is
-- written. A message goes out only when both its account and its property are enabled; `sms_off`
-- names which is not ('Account' first, then 'Property'), '' when both are.
-- sb_sms_off(account, property) is the condition on the two flags, for a statement that has both
-- rows already (the send rules' facts, send-steps.ts "SMS enabled": no second probe of either
-- table per send); an immutable SQL function of one expression, which the planner inlines.
-- sb_sms_status is the same per property with its account's AllowedCountries, for the
-- dispatcher's claims when a queued message is claimed (sb_claim_due.sql, sb_claim_fair.sql,
-- message-store.ts claimHeldMessages), so that a message claimed after a disable fails instead of
-- going out. A view: the planner inlines it into each statement, one primary-key probe of
-- properties and one of accounts per row.
create or replace function sb_sms_off(account_sms boolean, property_sms boolean) returns text
  language sql immutable parallel safe
as $$ select case when not account_sms then 'Account' when not property_sms then 'Property' else '' end $$;

create or replace view sb_sms_status as
  select p.sid as property_sid, p.account_sid,
         sb_sms_off(a.sms_enabled, p.sms_enabled) as sms_off,
         a.allowed_countries
    from properties p join accounts a on a.sid = p.account_sid;
