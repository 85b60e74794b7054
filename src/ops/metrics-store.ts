/**
 * The scrape's read of the database gauges. It lives with ops, not in the message, webhook and mail
 * stores, because it is one read-only statement across the three aggregates' tables: split by
 * aggregate it would cost three round trips per scrape instead of one, and it writes nothing.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";

/** One gauge value: messages per status, the webhook and mail backlogs, the dispatcher's lag, the oldest message's age. */
export interface GaugeRow {
  metric: "messages" | "webhook_backlog" | "mail_backlog" | "dispatcher_lag" | "oldest_message" | "account_queued";
  label: string;
  value: number | string | null;
}

// One round trip per scrape. The lag part has the dispatcher's own claim condition, so it measures
// how long the oldest message it could take right now has been waiting (0 when there is none).
const GAUGES_SQL = `
select 'messages' as metric, status as label, count(*)::float8 as value from messages group by status
union all
select 'webhook_backlog', '', count(*)::float8 from webhook_deliveries where status = 'Pending'
union all
select 'mail_backlog', '', count(*)::float8 from emails where status = 'Pending'
union all
select 'dispatcher_lag', '', coalesce(extract(epoch from (?::timestamptz - min(send_at))), 0)::float8
  from messages
 where queued and direction = 'Transmit'
   and send_at <= ? and (claimed_until is null or claimed_until < ?)
union all
select 'oldest_message', '', coalesce(extract(epoch from (?::timestamptz - min(o.created_at))), 0)::float8
  from properties p cross join lateral (select created_at from messages where property_sid = p.sid order by created_at limit 1) o
union all
select 'account_queued', account_sid, count(*)::float8 from messages where queued group by account_sid`;

/** Reads every database gauge at `now` in one statement, cancelled after `timeoutMs`. */
export function readGaugeRows(em: EntityManager, now: Date, timeoutMs: number): Promise<GaugeRow[]> {
  return executeBound<GaugeRow>(em, GAUGES_SQL, [now, now, now, now], undefined, AbortSignal.timeout(timeoutMs));
}
