-- Whether each property of each account may send SMS now, and its account's AllowedCountries: the
-- one place the SMS-enabled condition is written. A message goes out only when both its account
-- and its property are enabled; `sms_off` names which is not ('Account' first, then 'Property'),
-- '' when both are. The send rules read it when a send is accepted (send-steps.ts, the
-- "SMS enabled" entry) and the dispatcher's claims when a queued message is claimed
-- (sb_claim_due.sql, sb_claim_fair.sql, message-store.ts claimHeldMessages), so that a message
-- claimed after a disable fails instead of going out. A view: the planner inlines it into each
-- statement, one primary-key probe of properties and one of accounts per row.
create or replace view sb_sms_status as
  select p.sid as property_sid, p.account_sid,
         case when not a.sms_enabled then 'Account' when not p.sms_enabled then 'Property' else '' end as sms_off,
         a.allowed_countries
    from properties p join accounts a on a.sid = p.account_sid;
