import { defineEntity, p } from "@mikro-orm/core";

/** Schema of an account's opted-out number (table `opt_outs`); its statements are in opt-out-store.ts. */
export const OptOutEntity = defineEntity({
  name: "OptOut",
  tableName: "opt_outs",
  properties: {
    accountSid: p.string().length(32).primary(),
    number: p.text().primary(),
    source: p.text().$type<"Keyword" | "Api">(),
    createdAt: p.datetime(),
  },
});

/** A number opted out of an account's messages. */
export class OptOut extends OptOutEntity.class {}
OptOutEntity.setClass(OptOut);
