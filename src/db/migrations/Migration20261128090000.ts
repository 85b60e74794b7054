import { Migration } from "@mikro-orm/migrations";

/**
 * Issue 27 (9): a message whose delivery report never comes (the carrier lost it, or a simulator
 * died with it) stayed Submitted for ever, unnoticed. The receipt-timeout sweep and a restarted
 * simulator walk the submitted messages in submission order from where they stopped, through this
 * index: each statement reads a bounded range of it, however large the table. It holds only
 * columns a message's submission sets once (never its status), so a final report stays a
 * heap-only update; the submission update already writes new index entries (queued changes).
 */
export class Migration20261128090000 extends Migration {
  override name = "Migration20261128090000";

  override up(): void {
    this.addSql(`create index messages_submitted_at_idx on messages (submitted_at, sid) where submitted_at is not null`);
  }

  override down(): void {
    this.addSql(`drop index if exists messages_submitted_at_idx`);
  }
}
