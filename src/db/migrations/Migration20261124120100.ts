import { Migration } from "@mikro-orm/migrations";

/**
 * Webhook calls are limited per (account, destination host) and dealt round-robin across
 * accounts (issue 12): each call keeps the host name of its URI, written once when it is queued.
 * Calls queued before this migration get it from their URI here (scheme://[userinfo@]host[:port]).
 * The claim walks the pending calls by (account, host) and, within one, by due time.
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
    this.addSql(`create index webhook_deliveries_target_idx on webhook_deliveries (account_sid, target_host, next_attempt_at) where status = 'Pending'`);
  }

  override down(): void {
    this.addSql(`drop index if exists webhook_deliveries_target_idx`);
    this.addSql(`alter table webhook_deliveries drop column if exists target_host`);
  }
}
