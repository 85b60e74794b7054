import { Migration } from "@mikro-orm/migrations";

/**
 * Low-balance webhooks (docs/billing.md#low-balance): where each account stands with its
 * LowBalanceThreshold, on its balance row, which every charge already locks and updates.
 * `low_balance_state` is `Above` (armed: the next charge that leaves the balance below the
 * threshold makes it `Pending`), `Pending` (a crossing whose BalanceLow webhook is not queued yet;
 * `low_balance_balance` and `low_balance_at` are the balance after that charge and its time) or
 * `Sent` (queued; armed again when a top-up, refund or adjustment brings the balance back to the
 * threshold). A webhook call may now be about no message (`webhook_deliveries.message_sid` null:
 * BalanceLow is the account's). The partial index is what the worker's poll reads: only the few Pending rows, and an
 * update that leaves the state as it was (every charge but a crossing) stays a HOT update.
 */
export class Migration20261205100000 extends Migration {
  override name = "Migration20261205100000";

  override up(): void {
    this.addSql(`
alter table account_balances
  add column low_balance_state text not null default 'Above' check (low_balance_state in ('Above', 'Pending', 'Sent')),
  add column low_balance_balance bigint null,
  add column low_balance_at timestamptz null`);
    this.addSql(`create index account_balances_low_balance_pending_idx on account_balances (account_sid) where low_balance_state = 'Pending'`);
    // A BalanceLow call is the account's, about no message.
    this.addSql(`alter table webhook_deliveries alter column message_sid drop not null`);
  }

  override down(): void {
    // message_sid stays nullable: making it not null again would mean deleting the BalanceLow calls (data, not schema).
    this.addSql(`drop index if exists account_balances_low_balance_pending_idx`);
    this.addSql(`alter table account_balances drop column low_balance_state, drop column low_balance_balance, drop column low_balance_at`);
  }
}
