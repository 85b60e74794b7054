import { defineEntity, p } from "@mikro-orm/core";

/** Schema of a property (table `properties`). */
export const PropertyEntity = defineEntity({
  name: "Property",
  tableName: "properties",
  properties: {
    sid: p.string().length(32).primary(),
    accountSid: p.string().length(32),
    name: p.string().default(""),
    smsEnabled: p.boolean().default(true),
    createdAt: p.datetime(),
  },
});

/** A property of an account: the unit messages are sent from and listed by. */
export class Property extends PropertyEntity.class {}
PropertyEntity.setClass(Property);
