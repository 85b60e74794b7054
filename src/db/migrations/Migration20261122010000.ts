import { Migration } from "@mikro-orm/migrations";

/**
 * The delivery engine: a claim lease on queued messages (so a crashed dispatcher's claims expire
 * and are taken again), the webhook outbox written in the same transaction as the state change
 * that causes a call, and a record of every attempt.
 */
export class Migration20261122010000 extends Migration {
  override name = "Migration20261122010000";

  override up(): void {
    this.addSql(`alter table messages add column claimed_until timestamptz null`);
    this.addSql(`create index messages_carrier_ref_idx on messages (carrier_ref) where carrier_ref is not null`);
    this.addSql(`
create table webhook_deliveries (
  id varchar(40) primary key,
  account_sid varchar(32) not null references accounts (sid) deferrable initially deferred,
  message_sid varchar(32) not null references messages (sid) deferrable initially deferred,
  event_type varchar(32) not null,
  url text not null,
  method varchar(8) not null,
  payload jsonb not null,
  status varchar(16) not null default 'Pending' check (status in ('Pending', 'Delivered', 'Failed')),
  attempts integer not null default 0,
  next_attempt_at timestamptz not null,
  claimed_until timestamptz null,
  last_status_code integer null,
  last_error text not null default '',
  created_at timestamptz not null,
  delivered_at timestamptz null
)`);
    this.addSql(`create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'Pending'`);
    this.addSql(`create index webhook_deliveries_message_idx on webhook_deliveries (message_sid)`);
    this.addSql(`
create table webhook_attempts (
  id bigserial primary key,
  delivery_id varchar(40) not null references webhook_deliveries (id) on delete cascade,
  attempted_at timestamptz not null,
  status_code integer null,
  error text not null default '',
  duration_ms integer not null
)`);
    this.addSql(`create index webhook_attempts_delivery_idx on webhook_attempts (delivery_id)`);
  }

  override down(): void {
    this.addSql(`drop table if exists webhook_attempts`);
    this.addSql(`drop table if exists webhook_deliveries`);
    this.addSql(`drop index if exists messages_carrier_ref_idx`);
    this.addSql(`alter table messages drop column if exists claimed_until`);
  }
}
