import { Migration } from "@mikro-orm/migrations";

/**
 * The 5 concurrent leases to a recipient are counted per account (issue 27, docs/api.md#leased-senders): one
 * account holding a recipient's 5 slots must not lock every other account out of that recipient.
 * The slot becomes unique per (account, recipient) instead of per recipient, so the cap holds per
 * account under any concurrency; leases_live_pool_number_recipient_uniq stays, so a pool number is
 * still lent to a recipient once at a time whatever the account. Existing live leases already
 * have distinct slots per recipient, hence per (account, recipient).
 */
export class Migration20261128000300 extends Migration {
  override name = "Migration20261128000300";

  override up(): void {
    this.addSql(`create unique index leases_live_account_recipient_slot_uniq on leases (account_sid, recipient, slot) where not released`);
    this.addSql(`drop index leases_live_recipient_slot_uniq`);
  }

  override down(): void {
    // Fails while two accounts hold the same slot of one recipient: release those leases first.
    this.addSql(`create unique index leases_live_recipient_slot_uniq on leases (recipient, slot) where not released`);
    this.addSql(`drop index leases_live_account_recipient_slot_uniq`);
  }
}
