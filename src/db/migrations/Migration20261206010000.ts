import { Migration } from "@mikro-orm/migrations";

/**
 * The SMPP server's store-and-forward (issue 44, docs/smpp-server.md#receipts-and-replies): what
 * waits to go to an account's receiver and transceiver binds as deliver_sm. A receipt's row is
 * written when its submit_sm is answered and becomes due the moment its message's final state
 * commits (the row joins `messages`: no second write on the delivery path, and nothing between
 * the final state and the row to lose); a reply's row is written in the reply's own transaction.
 * A process holding a bind of the account claims due rows (claimed_until: a claim that expires,
 * so a process killed with a bind open loses nothing) and deletes each on its deliver_sm_resp.
 */
export class Migration20261206010000 extends Migration {
  override name = "Migration20261206010000";

  override up(): void {
    this.addSql(`
create table smpp_outbox (
  id bigserial primary key,
  account_sid varchar(32) not null references accounts (sid) on delete cascade,
  message_sid varchar(32) not null,
  kind varchar(8) not null,
  registered_delivery smallint not null default 0,
  created_at timestamptz not null,
  claimed_until timestamptz null
)`);
    this.addSql(`create index smpp_outbox_account_idx on smpp_outbox (account_sid, id)`);
    this.addSql(`create index smpp_outbox_created_idx on smpp_outbox (created_at)`);
  }

  override down(): void {
    this.addSql(`drop table if exists smpp_outbox`);
  }
}
