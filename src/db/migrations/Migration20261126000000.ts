import { Migration } from "@mikro-orm/migrations";

/** The columns a send stores, in MESSAGE_COLUMNS order (src/messaging/message-store.ts), and their array types. */
const COLUMNS: [string, string][] = [
  ["sid", "text"],
  ["account_sid", "text"],
  ["property_sid", "text"],
  ["direction", "text"],
  ["status", "text"],
  ["sender_kind", "text"],
  ["sender", "text"],
  ["recipient", "text"],
  ["text", "text"],
  ["encoding", "text"],
  ["num_segments", "int"],
  ["delivery_receipt", "bool"],
  ["dr_webhook_uri", "text"],
  ["dr_webhook_method", "text"],
  ["forward_to_sms", "text"],
  ["forward_from_sms", "text"],
  ["forward_to_email", "text"],
  ["forward_from_email", "text"],
  ["webhook_uri", "text"],
  ["webhook_method", "text"],
  ["lease_sid", "text"],
  ["scheduled_at", "timestamptz"],
  ["send_at", "timestamptz"],
  ["created_at", "timestamptz"],
];

/**
 * A send batch in one statement (issue 14): `sb_send_batch` checks every send of the batch (the
 * account's token hash and SMS flag, the property, the E164 sender's ownership: the send check's
 * joins) and stores, in the same statement, the messages of the sends that pass. Sent outside an
 * explicit transaction it is one round trip and one commit per batch, where BEGIN, the planner
 * settings, the check, the insert and COMMIT were five, each a wake-up of the backend and a turn
 * of the service's event loop while the batch's sends wait. Only batches without an
 * Idempotency-Key, a leased sender or an E164 ForwardFromSms take it (src/messaging/send-writer.ts);
 * the others keep the transaction, whose work in between (leases, keys) is the service's.
 *
 * A send is stored when p_store is true (the service found no problem in the request) and the
 * checks pass: its token hash is the one the service authenticated, the account and the property
 * (of that account) are enabled for SMS, and an E164 sender is the account's. The service answers
 * each send from the returned row and its `stored` flag, so an answer of success always means a
 * stored row. The settings are the send batch's (one generic plan per connection, every row looked
 * up through an index, whatever the tables' statistics).
 */
export class Migration20261126000000 extends Migration {
  override name = "Migration20261126000000";

  override up(): void {
    const names = COLUMNS.map(([c]) => c);
    this.addSql(`
create function sb_send_batch(p_i int[], p_check_account text[], p_check_property text[], p_owned_sender text[], p_token_hash text[], p_store boolean[],
  ${COLUMNS.map(([c, t]) => `p_${c} ${t}[]`).join(", ")})
  returns table (i int, account_token_hash text, account_sms boolean, property_sms boolean, owned boolean, stored boolean)
  language plpgsql
  set enable_seqscan = off set enable_bitmapscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  with c as materialized (
    select v.*, a.token_hash::text as account_token_hash, a.sms_enabled as account_sms, p.sms_enabled as property_sms, n.sid is not null as owned,
           coalesce(v.store and a.token_hash = v.token_hash and a.sms_enabled and p.sms_enabled and (v.sender_kind <> 'E164' or n.sid is not null), false) as stored
      from unnest(p_i, p_check_account, p_check_property, p_owned_sender, p_token_hash, p_store, ${names.map((c) => `p_${c}`).join(", ")})
           as v(i, check_account_sid, check_property_sid, owned_sender, token_hash, store, ${names.join(", ")})
      left join accounts a on a.sid = v.check_account_sid
      left join properties p on p.sid = v.check_property_sid and p.account_sid = v.check_account_sid
      left join numbers n on n.number = v.owned_sender and n.account_sid = v.check_account_sid
  ), ins as (
    insert into messages (${names.join(", ")})
    select ${names.map((c) => `c.${c}`).join(", ")} from c where c.stored
  )
  select c.i, c.account_token_hash, c.account_sms, c.property_sms, c.owned, c.stored from c;
end
$fn$`);
  }

  override down(): void {
    this.addSql(
      `drop function if exists sb_send_batch(${["int", "text", "text", "text", "text", "boolean", ...COLUMNS.map(([, t]) => t)].map((t) => `${t}[]`).join(", ")})`,
    );
  }
}
