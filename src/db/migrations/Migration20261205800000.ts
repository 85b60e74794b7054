import { Migration } from "@mikro-orm/migrations";

/**
 * The charges of one send statement as one ledger row (issue 43, docs/billing.md#balances-and-the-ledger): a
 * statement that charges an account for several sends writes one `Charges` row holding them as
 * arrays (each charge's entry id, message, amount and balance after), instead of a row and an
 * index entry per send. The ledger is read through the view `balance_ledger`, one entry per
 * charge as before; single `Charge` rows (one send, and every row written before) stay as they are.
 */
export class Migration20261205800000 extends Migration {
  override name = "Migration20261205800000";

  override up(): void {
    this.addSql(`alter table balance_entries
  add column charge_ids bigint[],
  add column charge_message_sids text[],
  add column charge_amounts bigint[],
  add column charge_balances bigint[]`);
    this.addSql(`alter table balance_entries drop constraint balance_entries_type_check`);
    this.addSql(`alter table balance_entries add constraint balance_entries_type_check
  check (type in ('Charge', 'Refund', 'TopUp', 'Adjustment', 'Charges'))`);
    // row_id orders the entries with the table's primary key; a Charges row's id is its last charge's.
    this.addSql(`create view balance_ledger as
select e.id as row_id, e.id, e.account_sid, e.type, e.amount, e.balance_after, e.message_sid, e.reference, e.created_at
  from balance_entries e
 where e.type <> 'Charges'
union all
select e.id as row_id, c.id, e.account_sid, 'Charge'::text as type, c.amount, c.balance_after, c.message_sid, ''::text as reference, e.created_at
  from balance_entries e
 cross join lateral unnest(e.charge_ids, e.charge_message_sids, e.charge_amounts, e.charge_balances) as c (id, message_sid, amount, balance_after)
 where e.type = 'Charges'`);
  }

  override down(): void {
    // Schema only: a Charges row written meanwhile keeps its total (amount, balance_after) and loses
    // its arrays; the old check is added NOT VALID so that such a row does not stop the way back.
    this.addSql(`drop view if exists balance_ledger`);
    this.addSql(`alter table balance_entries drop constraint balance_entries_type_check`);
    this.addSql(`alter table balance_entries add constraint balance_entries_type_check check (type in ('Charge', 'Refund', 'TopUp', 'Adjustment')) not valid`);
    this.addSql(`alter table balance_entries drop column charge_ids, drop column charge_message_sids, drop column charge_amounts, drop column charge_balances`);
  }
}
