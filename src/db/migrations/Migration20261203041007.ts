import { Migration } from "@mikro-orm/migrations";

/**
 * The service sends' outbox (messaging/service-send-outbox-store.ts): the forward of a reply by SMS
 * and the answer to a keyword, written in the inbound SMS's transaction and deleted by the
 * transaction that stores their message, so that a process stopping between the two loses neither
 * (the delivery engine's sweep sends what is left after a grace period). No foreign key: a row
 * whose account is gone is deleted by the sweep, and a row never outlives its give-up age (24 h).
 */
export class Migration20261203041007 extends Migration {
  override name = "Migration20261203041007";

  override up(): void {
    this.addSql(`
create table service_send_outbox (
  id varchar(40) primary key,
  kind text not null check (kind in ('forward', 'answer')),
  account_sid varchar(32) not null,
  payload jsonb not null,
  created_at timestamptz not null,
  attempts integer not null default 0,
  claimed_until timestamptz null
)`);
    this.addSql(`create index service_send_outbox_created_idx on service_send_outbox (created_at)`);
  }

  override down(): void {
    this.addSql(`drop table if exists service_send_outbox`);
  }
}
