import { defineEntity, p } from "@mikro-orm/core";

/** Schema of a phone number (table `numbers`). */
export const PhoneNumberEntity = defineEntity({
  name: "PhoneNumber",
  tableName: "numbers",
  properties: {
    sid: p.string().length(32).primary(),
    // E164 with the leading +; unique so a number has one owner (or sits in the pool) at a time.
    number: p.string().length(16).unique(),
    // null puts the number in the shared pool that leased senders are drawn from.
    accountSid: p.string().length(32).nullable(),
    friendly: p.string().default(""),
    addressSid: p.string().length(32).nullable(),
    createdAt: p.datetime(),
  },
});

/** A phone number owned by an account, or in the shared lease pool. */
export class PhoneNumber extends PhoneNumberEntity.class {}
PhoneNumberEntity.setClass(PhoneNumber);
