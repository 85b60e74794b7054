import { Migration } from "@mikro-orm/migrations";

/**
 * Issue 41 (docs/api.md#opt-out-stop-start-help): the cap on keyword answers. One row per account,
 * recipient and keyword kind, holding the UTC day of the last answer and its message's Sid (an
 * opt-out spares that message: optouts/opt-out.ts); a claim is one conditional
 * upsert (optouts/answer-cap-store.ts), so two processes answering the same handset the same day
 * cannot both send. A row is overwritten the next day it is claimed, so the table holds at most
 * three rows per account and handset that ever texted a keyword.
 */
export class Migration20261203041003 extends Migration {
  override name = "Migration20261203041003";

  override up(): void {
    this.addSql(`
create table keyword_answers (
  account_sid varchar(32) not null references accounts (sid) deferrable initially deferred,
  recipient text not null,
  kind text not null check (kind in ('Stop', 'Start', 'Help')),
  day date not null,
  message_sid varchar(32) not null,
  primary key (account_sid, recipient, kind)
)`);
  }

  override down(): void {
    this.addSql(`drop table if exists keyword_answers`);
  }
}
