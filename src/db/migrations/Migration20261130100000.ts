import { Migration } from "@mikro-orm/migrations";

/**
 * Issue 30: several carriers at once. `carriers` holds each configured carrier (its Url keeps the
 * password: the API never returns it), `routes` the ordered route table (replaced as a whole),
 * `messages.carrier` the name of the carrier that took a message, and `carrier_segments` /
 * `carrier_pending_receipts` the carrier a segment id belongs to, so a receipt matches only its
 * own carrier's ids. sb_record_submissions takes the carrier names as a fourth array: the old
 * three-array function is dropped; its new definition is src/messaging/sql/sb_record_submissions.sql,
 * which the repeatable step (src/db/repeatable-sql.ts) creates right after the migrations.
 */
export class Migration20261130100000 extends Migration {
  override name = "Migration20261130100000";

  override up(): void {
    this.addSql(`
create table carriers (
  sid varchar(32) primary key,
  name varchar(64) not null unique,
  kind varchar(16) not null,
  url text not null,
  tps double precision not null default 0,
  submit_window integer not null default 10,
  system_type varchar(16) not null default '',
  created_at timestamptz not null,
  updated_at timestamptz not null
)`);
    this.addSql(`
create table routes (
  position integer primary key,
  prefix varchar(16) null,
  account_sid varchar(32) null,
  carriers text[] not null,
  strategy varchar(16) not null,
  updated_at timestamptz not null
)`);
    this.addSql(`alter table messages add column carrier varchar(64) not null default ''`);
    this.addSql(`alter table carrier_segments add column carrier varchar(64) not null default ''`);
    this.addSql(`alter table carrier_pending_receipts add column carrier varchar(64) not null default ''`);
    this.addSql(`drop function if exists sb_record_submissions(text[], text[], timestamptz[])`);
  }

  override down(): void {
    this.addSql(`drop function if exists sb_record_submissions(text[], text[], timestamptz[], text[])`);
    this.addSql(`alter table carrier_pending_receipts drop column if exists carrier`);
    this.addSql(`alter table carrier_segments drop column if exists carrier`);
    this.addSql(`alter table messages drop column if exists carrier`);
    this.addSql(`drop table if exists routes`);
    this.addSql(`drop table if exists carriers`);
  }
}
