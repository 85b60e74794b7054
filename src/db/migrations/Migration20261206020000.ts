import { Migration } from "@mikro-orm/migrations";

const FIVE = "text[], text[], timestamptz[], text[], text[]";
const EIGHT = `${FIVE}, text[], timestamptz[], text[]`;

/**
 * Issue 46, two writes per delivered message: a submission the dispatcher holds until its carrier's
 * report is written with the final state, so the final-state functions take the submission as three
 * more arrays (carrier reference, submitted time, carrier; null where none is held). Their old
 * five-array forms are dropped; the new definitions are src/messaging/sql/sb_apply_final_states.sql
 * and sb_apply_plain_final_states.sql, which the repeatable step (src/db/repeatable-sql.ts) creates
 * right after the migrations, with sb_submission_on_final (the submission columns they write) and
 * sb_submission_cost (the carrier's cost, shared with sb_record_submissions).
 */
export class Migration20261206020000 extends Migration {
  override name = "Migration20261206020000";

  override up(): void {
    this.addSql(`drop function if exists sb_apply_final_states(${FIVE})`);
    this.addSql(`drop function if exists sb_apply_plain_final_states(${FIVE})`);
  }

  override down(): void {
    this.addSql(`drop function if exists sb_apply_final_states(${EIGHT})`);
    this.addSql(`drop function if exists sb_apply_plain_final_states(${EIGHT})`);
    this.addSql(`drop function if exists sb_submission_on_final(timestamptz, text, text, bigint, timestamptz, text, text, timestamptz, text, integer)`);
    this.addSql(`drop function if exists sb_submission_cost(text, text, timestamptz, integer)`);
  }
}
