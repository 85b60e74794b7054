import { Migration } from "@mikro-orm/migrations";

/**
 * A function returning what its one statement returns, declared in PL/pgSQL (its plans are cached
 * per connection) with the planner settings the class comment below explains. Later migrations
 * (Migration20261127000000, Migration20261128070000) hold a copy of it, so that each migration,
 * history once run, stands alone: its output must never change.
 */
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
 * The delivery engine's submission and final-state updates as server-side functions (issue 14).
 * Each passes a round's messages as arrays and reaches every row by its primary key. Sent as plain
 * statements they were planned on every call, and the planner, told by the table's statistics
 * that few messages are Processing or Submitted, chose a sequential scan of `messages` joined
 * row by row to the arrays: 10,000–35,000 comparisons and 15–40 ms for one report batch of 100
 * (auto_explain, bench REST run). A PL/pgSQL function keeps one generic plan per connection, made
 * under its own settings (no sequential scan, no hash or merge join: the nested loop over the
 * arrays, one primary-key probe each), whatever the table's size or statistics.
 */
export class Migration20261125000000 extends Migration {
  override name = "Migration20261125000000";

  override up(): void {
    this.addSql(
      planByKey(
        "sb_record_submissions(p_sids text[], p_refs text[], p_ats timestamptz[])",
        "sid text",
        `update messages m
     set status = case when m.status = 'Processing' then 'Submitted' else m.status end,
         submitted_at = least(v.at, m.delivered_at), carrier_ref = coalesce(v.carrier_ref, m.carrier_ref), claimed_until = null
    from unnest(p_sids, p_refs, p_ats) as v(sid, carrier_ref, at)
   where m.sid = v.sid and m.direction = 'Transmit'
     and (m.status = 'Processing' or (m.status in ('Delivered', 'Failed') and m.submitted_at is null))
  returning m.sid::text`,
      ),
    );
    this.addSql(
      planByKey(
        "sb_apply_final_states(p_sids text[], p_statuses text[], p_delivered_at timestamptz[], p_error_codes text[], p_carrier_errors text[])",
        "sid text, account_sid text, property_sid text, sender text, recipient text, delivery_receipt boolean, dr_webhook_uri text, dr_webhook_method text",
        `update messages m
     set status = v.status, delivered_at = v.delivered_at, error_code = v.error_code, carrier_error = v.carrier_error, claimed_until = null
    from unnest(p_sids, p_statuses, p_delivered_at, p_error_codes, p_carrier_errors) as v(sid, status, delivered_at, error_code, carrier_error)
   where m.sid = v.sid and m.direction = 'Transmit' and m.status in ('Processing', 'Submitted')
  returning m.sid::text, m.account_sid::text, m.property_sid::text, m.sender::text, m.recipient::text, m.delivery_receipt, m.dr_webhook_uri, m.dr_webhook_method::text`,
      ),
    );
  }

  override down(): void {
    this.addSql(`drop function if exists sb_apply_final_states(text[], text[], timestamptz[], text[], text[])`);
    this.addSql(`drop function if exists sb_record_submissions(text[], text[], timestamptz[])`);
  }
}
