import { defineEntity, p } from "@mikro-orm/core";

/** Schema of a remembered Idempotency-Key (table `idempotency_keys`). */
export const IdempotencyKeyEntity = defineEntity({
  name: "IdempotencyKey",
  tableName: "idempotency_keys",
  primaryKeys: ["accountSid", "key"],
  properties: {
    accountSid: p.string().length(32).primary(),
    key: p.string().length(255).primary(),
    /** The message a single send created (its answer is rebuilt from it); null for a batch. */
    messageSid: p.string().length(32).nullable(),
    /** Hex SHA-256 of the method and the request message's protobuf binary; null on keys stored before it existed. */
    requestHash: p.string().length(64).nullable(),
    /** A batch send's SendBatchResponse, protobuf binary, every item included; null for a single send. */
    response: p.blob().nullable(),
    createdAt: p.datetime(),
  },
});

/** A client's Idempotency-Key: which request it first answered, and with what, so a retry gets the same answer. */
export class IdempotencyKey extends IdempotencyKeyEntity.class {}
IdempotencyKeyEntity.setClass(IdempotencyKey);
