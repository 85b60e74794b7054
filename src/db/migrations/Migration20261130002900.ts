import { Migration } from "@mikro-orm/migrations";

/**
 * Issue 29 (docs/api.md#opt-out-stop-start-help, docs/api.md#destination-permissions): the opt-out list, one row per account and recipient (its primary
 * key is the one index a send's `left join opt_outs` reads), and the account's consent and
 * destination settings. Empty texts mean the built-in default text; an empty allowed_countries
 * means the deployment's DEFAULT_ALLOWED_COUNTRIES.
 */
export class Migration20261130002900 extends Migration {
  override name = "Migration20261130002900";

  override up(): void {
    this.addSql(`
create table opt_outs (
  account_sid varchar(32) not null references accounts (sid) deferrable initially deferred,
  number text not null,
  source text not null check (source in ('Keyword', 'Api')),
  created_at timestamptz not null,
  primary key (account_sid, number)
)`);
    this.addSql(`
alter table accounts
  add column opt_out_text text not null default '',
  add column opt_in_text text not null default '',
  add column help_text text not null default '',
  add column opt_out_keywords boolean not null default true,
  add column allowed_countries text[] not null default '{}'`);
  }

  override down(): void {
    this.addSql(`drop table if exists opt_outs`);
    this.addSql(`
alter table accounts
  drop column if exists opt_out_text, drop column if exists opt_in_text, drop column if exists help_text,
  drop column if exists opt_out_keywords, drop column if exists allowed_countries`);
  }
}
