import { Migration } from "@mikro-orm/migrations";

/**
 * The ledger's row per charged send made cheaper (issue 43's speed target): a Charge entry is
 * written for every priced send, in the statement that stores it, so each index and check on
 * `balance_entries` is paid per send. The account's entries are read by (account_sid, id) only,
 * so that pair becomes the primary key and the separate id key goes; the foreign key to
 * `accounts` (a lookup and a row lock of the account per entry) goes too: every writer of an
 * entry (sql/sb_charge.sql, sql/sb_refund.sql, balance-store.ts) first locks the account's
 * `account_balances` row, whose own foreign key holds, and accounts are never deleted.
 */
export class Migration20261205010000 extends Migration {
  override name = "Migration20261205010000";

  override up(): void {
    this.addSql(`alter table balance_entries drop constraint if exists balance_entries_account_sid_fkey`);
    this.addSql(`alter table balance_entries drop constraint balance_entries_pkey`);
    this.addSql(`drop index balance_entries_account_idx`);
    this.addSql(`alter table balance_entries add primary key (account_sid, id)`);
  }

  override down(): void {
    this.addSql(`alter table balance_entries drop constraint balance_entries_pkey`);
    this.addSql(`alter table balance_entries add primary key (id)`);
    this.addSql(`create index balance_entries_account_idx on balance_entries (account_sid, id)`);
    this.addSql(
      `alter table balance_entries add constraint balance_entries_account_sid_fkey foreign key (account_sid) references accounts (sid) on delete cascade`,
    );
  }
}
