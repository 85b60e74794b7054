import { Migration } from "@mikro-orm/migrations";

/**
 * Issue 32: where the receipt-timeout sweep (src/delivery/receipt-timeout.ts) stopped, shared by
 * every process and kept across restarts, so that a start resumes there instead of walking the
 * whole of messages_submitted_at_idx again (months of messages). One row per sweep, by name.
 */
export class Migration20261202000000 extends Migration {
  override name = "Migration20261202000000";

  override up(): void {
    this.addSql(`
create table sweep_positions (
  name varchar(64) primary key,
  submitted_at timestamptz not null,
  sid varchar(32) not null
)`);
  }

  override down(): void {
    this.addSql(`drop table if exists sweep_positions`);
  }
}
