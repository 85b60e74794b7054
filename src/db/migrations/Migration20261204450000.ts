import { Migration } from "@mikro-orm/migrations";

/**
 * Smart encoding (issue 45, docs/api.md#smart-encoding): the account's SmartEncoding and the
 * message's SmartEncoded. Accounts that exist keep their texts as they send them (false); new
 * accounts get it on (the column's default from now on). Both adds are catalogue-only changes
 * (a constant default), so the messages table is not rewritten.
 */
export class Migration20261204450000 extends Migration {
  override name = "Migration20261204450000";

  override up(): void {
    this.addSql(`alter table accounts add column smart_encoding boolean not null default false`);
    this.addSql(`alter table accounts alter column smart_encoding set default true`);
    this.addSql(`alter table messages add column smart_encoded boolean not null default false`);
  }

  override down(): void {
    this.addSql(`alter table messages drop column if exists smart_encoded`);
    this.addSql(`alter table accounts drop column if exists smart_encoding`);
  }
}
