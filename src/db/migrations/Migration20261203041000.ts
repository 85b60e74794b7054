import { Migration } from "@mikro-orm/migrations";

/**
 * Issue 41 (8): a lease whose messages all failed before reaching a carrier is released with the
 * failure (leases/lease-store.ts releaseUnsubmittedLeases), a statement that looks up every message
 * naming the lease. Partial: only leased sends have a lease_sid.
 */
export class Migration20261203041000 extends Migration {
  override name = "Migration20261203041000";

  override up(): void {
    this.addSql(`create index messages_lease_sid_idx on messages (lease_sid) where lease_sid is not null`);
  }

  override down(): void {
    this.addSql(`drop index if exists messages_lease_sid_idx`);
  }
}
