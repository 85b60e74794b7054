import { Migration } from "@mikro-orm/migrations";

/**
 * The dispatcher's claims now also return whether the message's account and property are still
 * enabled for SMS (`sms_enabled`), so a message claimed after a disable fails instead of going out.
 * A function's result type cannot be changed in place, so this drops the two claim functions;
 * their new definitions are src/messaging/sql/sb_claim_due.sql and sb_claim_fair.sql, which the
 * repeatable step (src/db/repeatable-sql.ts) creates right after the migrations have run.
 */
export class Migration20261128070000 extends Migration {
  override name = "Migration20261128070000";

  override up(): void {
    this.addSql(`drop function if exists sb_claim_due(timestamptz, timestamptz, integer, boolean)`);
    this.addSql(`drop function if exists sb_claim_fair(timestamptz, text[], timestamptz, integer, boolean)`);
  }

  override down(): void {
    // The definitions before this one are Migration20261127000000's: going below this migration
    // means running that migration's up() again (its functions are not kept here twice).
    this.addSql(`drop function if exists sb_claim_due(timestamptz, timestamptz, integer, boolean)`);
    this.addSql(`drop function if exists sb_claim_fair(timestamptz, text[], timestamptz, integer, boolean)`);
  }
}
