import { Migration } from "@mikro-orm/migrations";

/**
 * Usage statements (issue 43, docs/billing.md#usage): the rollup of closed hours into UTC days. A
 * message's usage (count, segments, price after refunds, carrier cost) is summed per account, UTC
 * day, destination country and carrier into `usage_days` once it can no longer change, so that a
 * month's statement reads a few hundred rows whatever the traffic, and survives the retention
 * purge that deletes the messages. `usage_rollups.rolled_until` is each account's watermark: every
 * message accepted before it is in `usage_days` (those after it are read live from `messages`).
 * Nothing is written on the send path.
 */
export class Migration20261205710000 extends Migration {
  override name = "Migration20261205710000";

  override up(): void {
    this.addSql(`
create table usage_days (
  account_sid varchar(32) not null references accounts (sid) on delete cascade,
  day date not null,
  country varchar(2) not null,
  carrier varchar(64) not null,
  messages bigint not null,
  segments bigint not null,
  price bigint not null,
  cost bigint not null,
  primary key (account_sid, day, country, carrier)
)`);
    // The operator's statement of every account reads by day first.
    this.addSql(`create index usage_days_day_idx on usage_days (day)`);
    // Messages still queued when their hour was rolled up (they may yet be refunded or get their
    // cost): added to their day once they leave the queue, read live until then.
    this.addSql(`
create table usage_pending (
  message_sid varchar(32) primary key,
  account_sid varchar(32) not null references accounts (sid) on delete cascade
)`);
    this.addSql(`create index usage_pending_account_idx on usage_pending (account_sid)`);
    this.addSql(`
create table usage_rollups (
  account_sid varchar(32) primary key references accounts (sid) on delete cascade,
  rolled_until timestamptz null
)`);
  }

  override down(): void {
    this.addSql(`drop table if exists usage_rollups`);
    this.addSql(`drop table if exists usage_pending`);
    this.addSql(`drop table if exists usage_days`);
  }
}
