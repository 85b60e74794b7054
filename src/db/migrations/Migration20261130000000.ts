import { Migration } from "@mikro-orm/migrations";

/**
 * Issue 33, retention and redaction: an account's RetentionDays and RedactAfterDays (null: the
 * deployment's MESSAGE_RETENTION_DAYS, and never redact), and whether a message's text was
 * redacted. Adding a column with a constant default changes the catalogue only (PostgreSQL 11+):
 * no rewrite of `messages`. The purge deletes a message's e-mails and Idempotency-Keys by its Sid:
 * both tables get an index on it (e-mails are few; keys are written only by keyed sends).
 */
export class Migration20261130000000 extends Migration {
  override name = "Migration20261130000000";

  override up(): void {
    this.addSql(`alter table accounts add column retention_days integer null check (retention_days between 1 and 36500)`);
    this.addSql(`alter table accounts add column redact_after_days integer null check (redact_after_days between 1 and 36500)`);
    this.addSql(`alter table messages add column redacted boolean not null default false`);
    this.addSql(`create index emails_message_idx on emails (message_sid)`);
    this.addSql(`create index idempotency_keys_message_idx on idempotency_keys (message_sid) where message_sid is not null`);
  }

  override down(): void {
    this.addSql(`drop index if exists idempotency_keys_message_idx`);
    this.addSql(`drop index if exists emails_message_idx`);
    this.addSql(`alter table messages drop column if exists redacted`);
    this.addSql(`alter table accounts drop column if exists redact_after_days`);
    this.addSql(`alter table accounts drop column if exists retention_days`);
  }
}
