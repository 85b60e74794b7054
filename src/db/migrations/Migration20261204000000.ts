import { Migration } from "@mikro-orm/migrations";

/**
 * Rate cards (docs/billing.md, src/billing/rate-card-store.ts). A card is a name; its rates are
 * (prefix, effective_from) → price per segment in micro-units (bigint: exact, see
 * src/common/money.ts). The primary key (card, prefix, effective_from) is also the index the
 * per-send lookup reads: one index probe per prefix of the destination (sb_rate_for).
 * rate_count is kept with each replace, so that reading a page of a large card never counts it.
 * rate_imports stages a CSV import sent in chunks (each request is under the body limit) until
 * the commit swaps the card's rates for it in one transaction.
 */
export class Migration20261204000000 extends Migration {
  override name = "Migration20261204000000";

  override up(): void {
    this.addSql(`
create table rate_cards (
  name varchar(64) primary key,
  rate_count integer not null,
  created_at timestamptz not null,
  updated_at timestamptz not null
)`);
    this.addSql(`
create table rates (
  card varchar(64) not null references rate_cards (name) on delete cascade,
  prefix varchar(16) not null check (prefix ~ '^\\+[0-9]{1,15}$'),
  price_per_segment bigint not null check (price_per_segment between 0 and 999999999999999999),
  effective_from timestamptz not null,
  primary key (card, prefix, effective_from)
)`);
    this.addSql(`
create table rate_imports (
  import_sid varchar(32) not null,
  line integer not null,
  card varchar(64) not null,
  prefix varchar(16) not null,
  price_per_segment bigint not null,
  effective_from timestamptz not null,
  created_at timestamptz not null,
  primary key (import_sid, line)
)`);
    this.addSql(`create index rate_imports_created_idx on rate_imports (created_at)`);
  }

  override down(): void {
    this.addSql(`drop table if exists rate_imports`);
    this.addSql(`drop table if exists rates`);
    this.addSql(`drop table if exists rate_cards`);
  }
}
