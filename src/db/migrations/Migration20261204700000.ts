import { Migration } from "@mikro-orm/migrations";

/**
 * A message's price (issue 43, docs/billing.md#price-on-the-message): its segments times the rate
 * of its destination on the account's rate card at accept, in micro-units of the deployment's
 * currency; null for an unpriced account (no card). Fixed when the message is stored (the send
 * statement takes it from the send's facts) and charged in the same statement.
 */
export class Migration20261204700000 extends Migration {
  override name = "Migration20261204700000";

  override up(): void {
    this.addSql(`alter table messages add column price bigint null check (price >= 0)`);
  }

  override down(): void {
    this.addSql(`alter table messages drop column if exists price`);
  }
}
