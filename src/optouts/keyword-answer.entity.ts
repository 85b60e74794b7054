import { defineEntity, p } from "@mikro-orm/core";

/** Schema of the cap on keyword answers (table `keyword_answers`); its statements are in answer-cap-store.ts. */
export const KeywordAnswerEntity = defineEntity({
  name: "KeywordAnswer",
  tableName: "keyword_answers",
  properties: {
    accountSid: p.string().length(32).primary(),
    recipient: p.text().primary(),
    kind: p.text().primary().$type<"Stop" | "Start" | "Help">(),
    day: p.date(),
    // The answer's message: an opt-out does not fail it (it confirms the STOP, or answers a HELP).
    messageSid: p.string().length(32),
  },
});

/** The UTC day an account last answered a keyword of this kind to this handset. */
export class KeywordAnswer extends KeywordAnswerEntity.class {}
KeywordAnswerEntity.setClass(KeywordAnswer);
