import { Migration } from "@mikro-orm/migrations";

/**
 * Webhook calls are limited per (account, destination host) and dealt round-robin across
 * accounts (issue 12): each call keeps the host name of its URI, written once when it is queued.
 * Calls queued before this migration get it from their URI here (scheme://[userinfo@]host[:port]).
 */
export class Migration20261124120100 extends Migration {
  override name = "Migration20261124120100";

  override up(): void {
    this.addSql(`alter table webhook_deliveries add column target_host text not null default ''`);
    this.addSql(
      `update webhook_deliveries
          set target_host = coalesce(lower(substring(url from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?(\\[[^]/?#]*\\]|[^:/?#]*)')), '')
        where status = 'Pending'`,
    );
  }

  override down(): void {
    this.addSql(`alter table webhook_deliveries drop column if exists target_host`);
  }
}
