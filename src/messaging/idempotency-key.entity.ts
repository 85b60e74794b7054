import { defineEntity, p } from "@mikro-orm/core";

/** Schema of a remembered Idempotency-Key (table `idempotency_keys`). */
export const IdempotencyKeySchema = defineEntity({
  name: "IdempotencyKey",
  tableName: "idempotency_keys",
  primaryKeys: ["accountSid", "key"],
  properties: {
    accountSid: p.string().length(32).primary(),
    key: p.string().length(255).primary(),
    messageSid: p.string().length(32),
    createdAt: p.datetime(),
  },
});

/** The message a client's Idempotency-Key first created, so a retried send returns it. */
export class IdempotencyKey extends IdempotencyKeySchema.class {}
IdempotencyKeySchema.setClass(IdempotencyKey);
