import { Migration } from "@mikro-orm/migrations";

/**
 * Idempotency-Key for batch sends too, and a key reused for another request refused (422): each
 * key remembers a fingerprint of the request it first answered (request_hash), and a batch's key
 * the batch response it gave (response; a single send's answer is rebuilt from its message, so
 * message_sid is now null for a batch). Keys stored before have no fingerprint and match any
 * repeat until they expire (24 hours).
 */
export class Migration20261124150000 extends Migration {
  override name = "Migration20261124150000";

  override up(): void {
    this.addSql(`alter table idempotency_keys add column request_hash varchar(64) null`);
    this.addSql(`alter table idempotency_keys add column response bytea null`);
    this.addSql(`alter table idempotency_keys alter column message_sid drop not null`);
    // Exactly one of the two answers: a single send's message, or a batch's stored response.
    this.addSql(`alter table idempotency_keys add constraint idempotency_keys_answer_check check ((message_sid is null) <> (response is null))`);
  }

  override down(): void {
    this.addSql(`delete from idempotency_keys where message_sid is null`);
    this.addSql(`alter table idempotency_keys drop constraint if exists idempotency_keys_answer_check`);
    this.addSql(`alter table idempotency_keys alter column message_sid set not null`);
    this.addSql(`alter table idempotency_keys drop column if exists response`);
    this.addSql(`alter table idempotency_keys drop column if exists request_hash`);
  }
}
