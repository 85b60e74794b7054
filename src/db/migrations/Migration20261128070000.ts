import { Migration } from "@mikro-orm/migrations";

/** What the claim returns of each message (ClaimedRow in src/messaging/message-store.ts), now with whether it may still go out. */
const CLAIMED = `sid text, account_sid text, sender text, recipient text, text text, delivery_receipt boolean, attempts integer,
  send_at timestamptz, scheduled_at timestamptz, created_at timestamptz, sms_enabled boolean`;
/** The claims' columns before this migration (Migration20261127000000), for down(). */
const CLAIMED_BEFORE = `sid text, account_sid text, sender text, recipient text, text text, delivery_receipt boolean, attempts integer,
  send_at timestamptz, scheduled_at timestamptz, created_at timestamptz`;

const CLAIM_SET = `update messages m
     set status = 'Processing', claimed_until = p_until, attempts = m.attempts + 1`;
const CLAIMABLE = "(q.claimed_until is null or (not p_confirmed and q.claimed_until < p_now))";
const RETURNING_BEFORE =
  "returning m.sid::text, m.account_sid::text, m.sender::text, m.recipient::text, m.text, m.delivery_receipt, m.attempts, m.send_at, m.scheduled_at, m.created_at";
/** Whether the message's account and property are both still enabled for SMS: one primary-key probe of each per claimed row. */
const SMS_ENABLED =
  "coalesce((select a.sms_enabled from accounts a where a.sid = m.account_sid), false) and coalesce((select p.sms_enabled from properties p where p.sid = m.property_sid), false)";
const RETURNING = `${RETURNING_BEFORE}, ${SMS_ENABLED}`;

function claimDue(returning: string): string {
  return `${CLAIM_SET}
   where m.sid in (
     select q.sid from messages q
      where q.queued and q.direction = 'Transmit'
        and q.send_at <= p_now and ${CLAIMABLE}
      order by q.send_at
      limit p_limit
      for update skip locked)
  ${returning}`;
}

function claimFair(returning: string): string {
  return `${CLAIM_SET}
   where m.sid in (
     select c.sid from unnest(p_accounts) as d(account_sid)
      cross join lateral (
        select q.sid from messages q
         where q.queued and (q.account_sid, q.send_at) >= (d.account_sid, '-infinity') and (q.account_sid, q.send_at) <= (d.account_sid, p_now)
           and q.direction = 'Transmit' and ${CLAIMABLE}
         order by q.account_sid, q.send_at
         limit p_share
         for update skip locked) c)
  ${returning}`;
}

const DUE = "sb_claim_due(p_until timestamptz, p_now timestamptz, p_limit integer, p_confirmed boolean)";
const FAIR = "sb_claim_fair(p_until timestamptz, p_accounts text[], p_now timestamptz, p_share integer, p_confirmed boolean)";

/** This migration's copy of planByKey (Migration20261125000000): history, its output never changes. */
function planByKey(signature: string, returns: string, update: string): string {
  return `
create function ${signature}
  returns table (${returns})
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  ${update};
end
$fn$`;
}

/**
 * Issue 27 (7): an operator who disables an account or a property must stop its queue, and a
 * message scheduled before that must not go out after it. The two claims now also return, per
 * claimed message, whether its account and property are still enabled for SMS, read in the claim's
 * own statement (no other round trip; a disable committed by any process before the claim is seen).
 * The dispatcher fails a message claimed while disabled with SmsNotEnabled instead of submitting
 * it. Each check is a primary-key probe of accounts and properties per claimed row, in the
 * RETURNING list: the claim's scans of messages and their plans are unchanged
 * (test/db/hot-statements.test.ts). A function's result type cannot be replaced, so each is
 * dropped and declared again, with the same settings (planByKey).
 */
export class Migration20261128070000 extends Migration {
  override name = "Migration20261128070000";

  override up(): void {
    this.addSql(`drop function sb_claim_due(timestamptz, timestamptz, integer, boolean)`);
    this.addSql(`drop function sb_claim_fair(timestamptz, text[], timestamptz, integer, boolean)`);
    this.addSql(planByKey(DUE, CLAIMED, claimDue(RETURNING)));
    this.addSql(planByKey(FAIR, CLAIMED, claimFair(RETURNING)));
  }

  override down(): void {
    this.addSql(`drop function sb_claim_due(timestamptz, timestamptz, integer, boolean)`);
    this.addSql(`drop function sb_claim_fair(timestamptz, text[], timestamptz, integer, boolean)`);
    this.addSql(planByKey(DUE, CLAIMED_BEFORE, claimDue(RETURNING_BEFORE)));
    this.addSql(planByKey(FAIR, CLAIMED_BEFORE, claimFair(RETURNING_BEFORE)));
  }
}
