import { Migration } from "@mikro-orm/migrations";

/**
 * Issue 31: limits that hold for the whole deployment (docs/limits.md). `limit_buckets` holds the
 * shared token buckets (PostgreSQL is the default store; with REDIS_URL the same buckets live in
 * Redis and this table stays empty): one row per key (an account's request rate, dispatch rate or
 * day of quota, a carrier's Tps), taken from and given back to only by sb_take_tokens
 * (src/limits/sql/). The accounts get their limits; null: the deployment's default (request rate)
 * or no limit (MessagesPerSecond, DailySegmentQuota); a message its ValidityPeriod's end.
 */
export class Migration20261201000000 extends Migration {
  override name = "Migration20261201000000";

  override up(): void {
    this.addSql(`
create table limit_buckets (
  key text primary key,
  tokens double precision not null,
  burst double precision not null,
  at_ms bigint not null,
  expires_ms bigint not null
)`);
    this.addSql(`create index limit_buckets_expires on limit_buckets (expires_ms)`);
    this.addSql(`alter table accounts add column send_rate_per_second double precision null`);
    this.addSql(`alter table accounts add column send_rate_burst integer null`);
    this.addSql(`alter table accounts add column messages_per_second double precision null`);
    this.addSql(`alter table accounts add column daily_segment_quota integer null`);
    // ValidityPeriod: the end of a message's wait in the queue (null: rows stored before it, no end).
    this.addSql(`alter table messages add column valid_until timestamptz null`);
  }

  override down(): void {
    this.addSql(`alter table messages drop column if exists valid_until`);
    this.addSql(`alter table accounts drop column if exists daily_segment_quota`);
    this.addSql(`alter table accounts drop column if exists messages_per_second`);
    this.addSql(`alter table accounts drop column if exists send_rate_burst`);
    this.addSql(`alter table accounts drop column if exists send_rate_per_second`);
    this.addSql(`drop table if exists limit_buckets`);
  }
}
