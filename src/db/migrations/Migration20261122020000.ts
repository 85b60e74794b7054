import { Migration } from "@mikro-orm/migrations";

/**
 * Replies: the e-mail outbox (forwarded replies; sent over SMTP, or kept for the operator when no
 * SMTP server is configured) and the store of inbound SMS that matched no live lease.
 */
export class Migration20261122020000 extends Migration {
  override name = "Migration20261122020000";

  override up(): void {
    this.addSql(`
create table emails (
  id varchar(40) primary key,
  account_sid varchar(32) not null references accounts (sid) deferrable initially deferred,
  message_sid varchar(32) not null references messages (sid) deferrable initially deferred,
  mail_from text not null,
  mail_to text not null,
  subject text not null,
  body text not null,
  status varchar(16) not null default 'Pending' check (status in ('Pending', 'Sent', 'Kept', 'Failed')),
  attempts integer not null default 0,
  next_attempt_at timestamptz not null,
  claimed_until timestamptz null,
  last_error text not null default '',
  created_at timestamptz not null,
  sent_at timestamptz null
)`);
    this.addSql(`create index emails_due_idx on emails (next_attempt_at) where status = 'Pending'`);
    this.addSql(`create index emails_created_idx on emails (created_at)`);
    this.addSql(`
create table unmatched_inbound (
  id bigserial primary key,
  sender varchar(32) not null,
  recipient varchar(32) not null,
  text text not null,
  received_at timestamptz not null,
  reason varchar(32) not null
)`);
  }

  override down(): void {
    this.addSql(`drop table if exists unmatched_inbound`);
    this.addSql(`drop table if exists emails`);
  }
}
