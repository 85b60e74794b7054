import { Migration } from "@mikro-orm/migrations";

/**
 * Carrier costs (issue 43, docs/billing.md#carrier-costs-and-least-cost-routing): a carrier names
 * the rate card of what the operator pays it per segment (`carriers.cost_card`, null: none), and a
 * message keeps what its carrier cost (`messages.cost`, micro-units, null until it is handed to a
 * carrier with a known cost). The cost is the operator's: never shown on /v2.
 */
export class Migration20261205000000 extends Migration {
  override name = "Migration20261205000000";

  override up(): void {
    this.addSql(`alter table carriers add column cost_card varchar(64) null`);
    this.addSql(`alter table messages add column cost bigint null check (cost >= 0)`);
  }

  override down(): void {
    this.addSql(`alter table messages drop column if exists cost`);
    this.addSql(`alter table carriers drop column if exists cost_card`);
  }
}
