import { Migration } from "@mikro-orm/migrations";

/**
 * The initial schema, written by hand: the partial unique indexes, CHECKs and foreign keys
 * below are the database's half of the leasing, queue and address rules, which the
 * entity metadata cannot express.
 */
export class Migration20261122000000 extends Migration {
  // Stable name in mikro_orm_migrations whatever a bundler does to the class name.
  override name = "Migration20261122000000";

  override up(): void {
    // Every foreign key is DEFERRABLE INITIALLY DEFERRED: references are plain columns, so the
    // unit of work knows no parent-first order and may insert a child before its parent within
    // one flush; deferred keys are checked at commit, when both rows exist.
    this.addSql(`
create table accounts (
  sid varchar(32) primary key,
  name varchar(255) not null default '',
  sms_enabled boolean not null default true,
  token_hash varchar(64) not null,
  webhook_secret varchar(255) not null,
  created_at timestamptz not null default now()
)`);

    this.addSql(`
create table properties (
  sid varchar(32) primary key,
  account_sid varchar(32) not null references accounts (sid) deferrable initially deferred,
  name varchar(255) not null default '',
  sms_enabled boolean not null default true,
  created_at timestamptz not null default now()
)`);
    this.addSql(`create index properties_account_sid_idx on properties (account_sid)`);

    this.addSql(`
create table addresses (
  sid varchar(32) primary key,
  account_sid varchar(32) not null references accounts (sid) deferrable initially deferred,
  friendly varchar(255) not null default '',
  reference varchar(255) not null default '',
  line1 varchar(255) not null,
  line2 varchar(255) not null default '',
  city varchar(255) not null,
  region varchar(255) not null default '',
  country_code varchar(2) not null,
  postal_code varchar(255) not null default '',
  status varchar(16) not null check (status in ('Active', 'Pending', 'Rejected')),
  created_at timestamptz not null default now()
)`);
    this.addSql(`create index addresses_account_sid_idx on addresses (account_sid)`);

    // RESTRICT, unlike NO ACTION, is checked at once even on a deferrable key: deleting an
    // address that a number uses fails on the DELETE itself.
    this.addSql(`
create table numbers (
  sid varchar(32) primary key,
  number varchar(16) not null unique,
  account_sid varchar(32) null references accounts (sid) deferrable initially deferred,
  friendly varchar(255) not null default '',
  address_sid varchar(32) null references addresses (sid) on delete restrict deferrable initially deferred,
  created_at timestamptz not null default now()
)`);
    this.addSql(`create index numbers_account_sid_idx on numbers (account_sid)`);
    this.addSql(`create index numbers_address_sid_idx on numbers (address_sid)`);

    this.addSql(`
create table messages (
  sid varchar(32) primary key,
  account_sid varchar(32) not null references accounts (sid) deferrable initially deferred,
  property_sid varchar(32) not null references properties (sid) deferrable initially deferred,
  direction varchar(16) not null check (direction in ('Transmit', 'Receive')),
  status varchar(16) not null
    check (status in ('Scheduled', 'Processing', 'Submitted', 'Delivered', 'Failed', 'Canceled', 'Received')),
  sender_kind varchar(16) not null default '' check (sender_kind in ('E164', 'Alphanumeric', 'Leased', '')),
  sender varchar(32) not null,
  recipient varchar(32) not null,
  text text not null,
  encoding varchar(8) not null check (encoding in ('GSM7', 'UCS2')),
  num_segments integer not null,
  delivery_receipt boolean not null default true,
  dr_webhook_uri text not null default '',
  dr_webhook_method varchar(8) not null default '',
  forward_to_sms varchar(32) not null default '',
  forward_from_sms varchar(32) not null default '',
  forward_to_email varchar(255) not null default '',
  forward_from_email varchar(255) not null default '',
  webhook_uri text not null default '',
  webhook_method varchar(8) not null default '',
  lease_sid varchar(32) null,
  in_reply_to varchar(32) null,
  scheduled_at timestamptz null,
  send_at timestamptz not null,
  created_at timestamptz not null default now(),
  submitted_at timestamptz null,
  delivered_at timestamptz null,
  received_at timestamptz null,
  error_code varchar(64) not null default '',
  attempts integer not null default 0,
  carrier_ref varchar(255) null
)`);
    this.addSql(`create index messages_property_sid_created_at_idx on messages (property_sid, created_at desc)`);
    // The dispatcher's queue: only rows still waiting to go out, in due order.
    this.addSql(`create index messages_queue_idx on messages (send_at) where status in ('Scheduled', 'Processing')`);

    this.addSql(`
create table leases (
  sid varchar(32) primary key,
  pool_number varchar(16) not null references numbers (number) deferrable initially deferred,
  recipient varchar(16) not null,
  account_sid varchar(32) not null,
  message_sid varchar(32) not null,
  slot smallint not null check (slot between 1 and 5),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  released boolean not null default false
)`);
    // These two make the lease rules hold under any concurrency: a pool number is lent to a
    // recipient at most once at a time, and a recipient has at most 5 live leases (one per slot).
    this.addSql(`create unique index leases_live_pool_number_recipient_uniq on leases (pool_number, recipient) where not released`);
    this.addSql(`create unique index leases_live_recipient_slot_uniq on leases (recipient, slot) where not released`);
    this.addSql(`create index leases_live_recipient_idx on leases (recipient) where not released`);

    this.addSql(`
create table idempotency_keys (
  account_sid varchar(32) not null,
  key varchar(255) not null,
  message_sid varchar(32) not null references messages (sid) deferrable initially deferred,
  created_at timestamptz not null default now(),
  primary key (account_sid, key)
)`);
    this.addSql(`create index idempotency_keys_created_at_idx on idempotency_keys (created_at)`);
  }

  override down(): void {
    this.addSql(`drop table if exists idempotency_keys`);
    this.addSql(`drop table if exists leases`);
    this.addSql(`drop table if exists messages`);
    this.addSql(`drop table if exists numbers`);
    this.addSql(`drop table if exists addresses`);
    this.addSql(`drop table if exists properties`);
    this.addSql(`drop table if exists accounts`);
  }
}
