import { Migration } from "@mikro-orm/migrations";

// sb_send_batch's arguments: the batch's check arrays, then one array per message column as it was.
const SEND_BATCH_ARGS = [
  ...["int", "text", "text", "text", "text", "boolean"],
  ...[
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "int",
    "bool",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
  ],
  ...["timestamptz", "timestamptz", "timestamptz"],
]
  .map((t) => `${t}[]`)
  .join(", ");

/**
 * The one send pipeline (src/messaging/send-pipeline.ts) reads a batch's facts with
 * `sb_send_facts` (src/messaging/sql/sb_send_facts.sql, applied by the repeatable step) and stores
 * in the statement around it; `sb_send_batch`, which held the send's rules a second time, goes.
 */
export class Migration20261129100000 extends Migration {
  override name = "Migration20261129100000";

  override up(): void {
    this.addSql(`drop function if exists sb_send_batch(${SEND_BATCH_ARGS})`);
  }

  override down(): void {
    // Going below this migration means running Migration20261126000000's up() again (its function is not kept here twice).
    this.addSql(`drop function if exists sb_send_facts(int[], text[], text[], text[], text[], text[], text[], text[], timestamptz[])`);
  }
}
