import { Migration } from "@mikro-orm/migrations";

/**
 * The SMPP server (issue 44, docs/smpp-server.md): each account's SMPP credentials, and the binds
 * open on every process. `smpp_binds` is what makes MaxBinds hold across processes (a bind is
 * inserted under the lock of its account's credentials row, counting the live ones) and what the
 * operator's ListSmppBinds reads; a row whose heartbeat stopped (its process died) no longer counts.
 */
export class Migration20261206000000 extends Migration {
  override name = "Migration20261206000000";

  override up(): void {
    this.addSql(`
create table smpp_credentials (
  account_sid varchar(32) primary key references accounts (sid) on delete cascade,
  system_id varchar(15) not null unique,
  password_hash text not null,
  property_sid varchar(32) not null references properties (sid) on delete cascade,
  max_binds int not null,
  allowed_addresses text[] not null default '{}',
  deliver_replies boolean not null default false,
  updated_at timestamptz not null
)`);
    this.addSql(`
create table smpp_binds (
  bind_id varchar(32) primary key,
  account_sid varchar(32) not null references accounts (sid) on delete cascade,
  system_id varchar(15) not null,
  address varchar(64) not null,
  mode varchar(16) not null,
  since timestamptz not null,
  in_flight int not null default 0,
  heartbeat_at timestamptz not null
)`);
    this.addSql(`create index smpp_binds_account_idx on smpp_binds (account_sid)`);
  }

  override down(): void {
    this.addSql(`drop table if exists smpp_binds`);
    this.addSql(`drop table if exists smpp_credentials`);
  }
}
