import { defineEntity, p } from "@mikro-orm/core";

/** Schema of the service sends' outbox (table `service_send_outbox`); its statements are in service-send-outbox-store.ts. */
export const ServiceSendOutboxEntity = defineEntity({
  name: "ServiceSendOutboxRow",
  tableName: "service_send_outbox",
  properties: {
    id: p.string().length(40).primary(),
    kind: p.text().$type<"forward" | "answer">(),
    accountSid: p.string().length(32),
    // The ReplyForward or KeywordAnswer (messaging/service-sends.ts), its dates as ISO strings.
    payload: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(),
    // The sweep's claims of this row so far, and until when the last one holds.
    attempts: p.integer().default(0),
    claimedUntil: p.datetime().nullable(),
  },
});

/** A forward or keyword answer accepted with its inbound SMS and not yet stored as a message. */
export class ServiceSendOutboxRow extends ServiceSendOutboxEntity.class {}
ServiceSendOutboxEntity.setClass(ServiceSendOutboxRow);
