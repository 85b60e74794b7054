import { Migration } from "@mikro-orm/migrations";

/**
 * The operator's review queue (ListAddresses, default Status=Pending, oldest first) reads
 * addresses by status in creation order across all accounts: without this index each page and
 * its count scanned the whole table.
 */
export class Migration20261122040000 extends Migration {
  override name = "Migration20261122040000";

  override up(): void {
    this.addSql(`create index addresses_status_created_at_idx on addresses (status, created_at, sid)`);
  }

  override down(): void {
    this.addSql(`drop index if exists addresses_status_created_at_idx`);
  }
}
