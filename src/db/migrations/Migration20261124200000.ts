import { Migration } from "@mikro-orm/migrations";

/**
 * The SMPP carrier: the carrier's own reason on a failed message (messages.carrier_error), one row
 * per submitted segment with the SMSC's message_id (receipts come per segment, naming that id),
 * the receipts that named no known id yet (the submission was not committed when the receipt
 * came, possibly on another process's bind), and the parts of concatenated inbound SMS waiting
 * for the rest. The id columns hold the forms a receipt may name the id in (README: Carriers).
 */
export class Migration20261124200000 extends Migration {
  override name = "Migration20261124200000";

  override up(): void {
    this.addSql(`alter table messages add column carrier_error text not null default ''`);
    this.addSql(`
create table carrier_segments (
  message_sid varchar(32) not null,
  seq smallint not null,
  carrier_id varchar(80) not null,
  id_key varchar(80) not null,
  id_alt varchar(80) null,
  status varchar(16) not null default 'Submitted' check (status in ('Submitted', 'Delivered', 'Failed')),
  carrier_error text not null default '',
  created_at timestamptz not null,
  primary key (message_sid, seq)
)`);
    this.addSql(`create index carrier_segments_id_key_idx on carrier_segments (id_key)`);
    this.addSql(`create index carrier_segments_id_alt_idx on carrier_segments (id_alt)`);
    this.addSql(`
create table carrier_pending_receipts (
  id bigserial primary key,
  carrier_id varchar(80) not null,
  id_key varchar(80) not null,
  id_hex_value varchar(80) null,
  status varchar(16) not null check (status in ('Delivered', 'Failed')),
  carrier_error text not null default '',
  received_at timestamptz not null
)`);
    this.addSql(`create index carrier_pending_receipts_id_key_idx on carrier_pending_receipts (id_key)`);
    this.addSql(`create index carrier_pending_receipts_id_hex_value_idx on carrier_pending_receipts (id_hex_value)`);
    this.addSql(`
create table inbound_parts (
  id bigserial primary key,
  sender varchar(32) not null,
  recipient varchar(32) not null,
  ref integer not null,
  total smallint not null,
  part smallint not null,
  text text not null,
  received_at timestamptz not null,
  unique (sender, recipient, ref, total, part)
)`);
    this.addSql(`create index inbound_parts_received_at_idx on inbound_parts (received_at)`);
  }

  override down(): void {
    this.addSql(`drop table if exists inbound_parts`);
    this.addSql(`drop table if exists carrier_pending_receipts`);
    this.addSql(`drop table if exists carrier_segments`);
    this.addSql(`alter table messages drop column if exists carrier_error`);
  }
}
