import { Migration } from "@mikro-orm/migrations";

/**
 * Balances (docs/billing.md): an account's billing settings, its balance row and its ledger.
 * Amounts are bigint micro-units (src/common/money.ts). The balance lives in its own table, one
 * row per account, so that the conditional charge (sql/sb_charge.sql) locks and updates a small
 * row and never the accounts row every request reads; the ledger is append-only and the balance
 * always equals the sum of its entries' amounts.
 */
export class Migration20261204010000 extends Migration {
  override name = "Migration20261204010000";

  override up(): void {
    this.addSql(`
alter table accounts
  add column rate_card varchar(64) null,
  add column billing_mode text not null default 'Postpaid' check (billing_mode in ('Postpaid', 'Prepaid')),
  add column credit_limit bigint null check (credit_limit >= 0),
  add column low_balance_threshold bigint null,
  add column low_balance_webhook_uri text null`);
    this.addSql(`
create table account_balances (
  account_sid varchar(32) primary key references accounts (sid) on delete cascade,
  balance bigint not null,
  updated_at timestamptz not null
)`);
    this.addSql(`
create table balance_entries (
  id bigserial primary key,
  account_sid varchar(32) not null references accounts (sid) on delete cascade,
  type text not null check (type in ('Charge', 'Refund', 'TopUp', 'Adjustment')),
  amount bigint not null,
  balance_after bigint not null,
  message_sid varchar(32) null,
  reference text not null default '',
  created_at timestamptz not null
)`);
    this.addSql(`create index balance_entries_account_idx on balance_entries (account_sid, id)`);
    // A message is refunded once, whatever races with the refund.
    this.addSql(`create unique index balance_entries_refund_key on balance_entries (message_sid) where type = 'Refund'`);
  }

  override down(): void {
    this.addSql(`drop table if exists balance_entries`);
    this.addSql(`drop table if exists account_balances`);
    this.addSql(`alter table accounts drop column rate_card, drop column billing_mode, drop column credit_limit,
      drop column low_balance_threshold, drop column low_balance_webhook_uri`);
  }
}
