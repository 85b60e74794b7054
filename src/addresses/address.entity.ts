import { defineEntity, p } from "@mikro-orm/core";

/** Review state of an address (docs/api.md#add-an-address). */
export type AddressStatus = "Active" | "Pending" | "Rejected";

/** Schema of a postal address (table `addresses`). */
export const AddressEntity = defineEntity({
  name: "Address",
  tableName: "addresses",
  properties: {
    sid: p.string().length(32).primary(),
    accountSid: p.string().length(32),
    friendly: p.string().default(""),
    reference: p.string().default(""),
    line1: p.string(),
    line2: p.string().default(""),
    city: p.string(),
    region: p.string().default(""),
    countryCode: p.string().length(2),
    postalCode: p.string().default(""),
    status: p.string().length(16).$type<AddressStatus>(),
    createdAt: p.datetime(),
  },
});

/** A postal address of an account; numbers are registered against Active ones. */
export class Address extends AddressEntity.class {}
AddressEntity.setClass(Address);
