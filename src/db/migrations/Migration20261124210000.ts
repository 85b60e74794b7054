import { Migration } from "@mikro-orm/migrations";

/**
 * An account's REST response format for the message methods: Switchboard's own ("None") or the
 * shapes Fone Dynamics' SDKs read ("FoneDynamics"). Existing accounts keep today's format.
 */
export class Migration20261124210000 extends Migration {
  override name = "Migration20261124210000";

  override up(): void {
    this.addSql(
      `alter table accounts add column rest_compatibility text not null default 'None'
         constraint accounts_rest_compatibility_check check (rest_compatibility in ('None', 'FoneDynamics'))`,
    );
  }

  override down(): void {
    this.addSql(`alter table accounts drop column if exists rest_compatibility`);
  }
}
