import { Migration } from "@mikro-orm/migrations";

/**
 * Issue 28: the server-side functions' sources move out of migrations into `.sql` files beside
 * the store that calls them (src/messaging/sql/), applied after the migrations whenever a file
 * changes (src/db/repeatable-sql.ts). This table records the hash of each file as last applied.
 * The functions themselves stay as the earlier migrations made them until the first start-up
 * with this table, which records each file's hash after running it.
 */
export class Migration20261129000000 extends Migration {
  override name = "Migration20261129000000";

  override up(): void {
    this.addSql(`create table repeatable_sql (name text primary key, hash text not null, applied_at timestamptz not null)`);
  }

  override down(): void {
    this.addSql(`drop table if exists repeatable_sql`);
  }
}
