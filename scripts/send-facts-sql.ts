// Writes src/messaging/sql/sb_send_facts.sql, the send batch's facts function, from the send rules' entries
// (src/messaging/send-steps.ts SEND_RULES); test/messaging/send-facts-sql.test.ts checks it is current.
import { writeFileSync } from "node:fs";
import { sendFactsFunctionSql } from "../src/messaging/message-send-store.js";
import { factsSpec, SEND_RULES } from "../src/messaging/send-steps.js";

const path = new URL("../src/messaging/sql/sb_send_facts.sql", import.meta.url);
writeFileSync(path, sendFactsFunctionSql(factsSpec(SEND_RULES)));
console.log(`wrote ${path.pathname}`);
