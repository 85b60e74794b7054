import { defineEntity, p } from "@mikro-orm/core";

/** Review state of a sender ID (docs/api.md#sender-ids). */
export type SenderIdStatus = "Pending" | "Registered" | "Rejected";

/** Schema of an account's application for an alphanumeric sender ID in a country (table `sender_ids`). */
export const SenderIdEntity = defineEntity({
  name: "SenderIdApplication",
  tableName: "sender_ids",
  properties: {
    sid: p.string().length(32).primary(),
    accountSid: p.string().length(32),
    senderId: p.string().length(11),
    country: p.string().length(2),
    useCase: p.string().length(500),
    status: p.string().length(16).$type<SenderIdStatus>(),
    createdAt: p.datetime(),
  },
});

/** An account's sender ID in one country; sends from it there pass the registration rule once Registered. */
export class SenderIdApplication extends SenderIdEntity.class {}
SenderIdEntity.setClass(SenderIdApplication);
