import { Migration } from "@mikro-orm/migrations";

/**
 * Registered sender IDs (issue 45, docs/api.md#sender-ids): an account's applications for an
 * alphanumeric sender ID in a country, reviewed by the operator. A name is live for one account
 * per country: the unique index over the upper-cased name and the country, among applications
 * not Rejected, is the guard when two accounts apply at the same moment (the loser gets
 * SenderIdTaken, as when it applies just after). The send rule's probe (messaging/send-steps.ts,
 * "sender ID registered") is one entry of the same index. `messages.sender_id_registered`: the
 * check's outcome on the record, null where no check applied.
 */
export class Migration20261204600000 extends Migration {
  override name = "Migration20261204600000";

  override up(): void {
    this.addSql(`
create table sender_ids (
  sid varchar(32) primary key,
  account_sid varchar(32) not null references accounts (sid) deferrable initially deferred,
  sender_id varchar(11) not null,
  country varchar(2) not null,
  use_case varchar(500) not null,
  status varchar(16) not null check (status in ('Pending', 'Registered', 'Rejected')),
  created_at timestamptz not null
)`);
    this.addSql(`create unique index sender_ids_live_key on sender_ids (country, upper(sender_id)) where status <> 'Rejected'`);
    this.addSql(`create index sender_ids_account_sid_idx on sender_ids (account_sid, created_at)`);
    this.addSql(`create index sender_ids_status_idx on sender_ids (status, created_at)`);
    this.addSql(`alter table messages add column sender_id_registered boolean null`);
  }

  override down(): void {
    this.addSql(`alter table messages drop column if exists sender_id_registered`);
    this.addSql(`drop table if exists sender_ids`);
  }
}
