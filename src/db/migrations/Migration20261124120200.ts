import { Migration } from "@mikro-orm/migrations";

/**
 * The dispatcher's queue by account (issue 12): while due messages wait longer than one round,
 * the claim takes them round-robin across accounts. It finds each account with queued messages
 * and its oldest one by a loose scan of this index (one probe per account, however many messages
 * the account has queued), then each due account's oldest due messages. Partial on `queued`, like
 * messages_queue_idx: the flag flips once, so claim and final-state updates stay heap-only
 * (Migration20261122030000); a send adds one entry here besides the one in messages_queue_idx.
 */
export class Migration20261124120200 extends Migration {
  override name = "Migration20261124120200";

  override up(): void {
    this.addSql(`create index messages_account_queue_idx on messages (account_sid, send_at) where queued`);
  }

  override down(): void {
    this.addSql(`drop index if exists messages_account_queue_idx`);
  }
}
