import { Migration } from "@mikro-orm/migrations";

/**
 * A rate card's version (docs/billing.md#rate-lookup-per-send): a number from one sequence,
 * taken anew by every replace or import commit of the card, so that no two versions of any cards
 * are equal. A process that keeps a card in memory (billing/rate-cache.ts) prices a send from it
 * only where the statement that stores the send finds the card still at that version; anywhere
 * else the statement looks the rate up itself.
 */
export class Migration20261205020000 extends Migration {
  override name = "Migration20261205020000";

  override up(): void {
    this.addSql(`create sequence rate_card_versions`);
    // Existing cards take a version each; a new card's is given by its insert (rate-card-store.ts lockCard).
    this.addSql(`alter table rate_cards add column version bigint not null default nextval('rate_card_versions')`);
    this.addSql(`alter table rate_cards alter column version drop default`);
  }

  override down(): void {
    this.addSql(`alter table rate_cards drop column if exists version`);
    this.addSql(`drop sequence if exists rate_card_versions`);
  }
}
