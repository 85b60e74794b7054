import { defineEntity, p } from "@mikro-orm/core";

/** The kinds of carrier a row may configure. */
export const CARRIER_KINDS = ["smpp", "kannel", "simulator"] as const;
/** One of CARRIER_KINDS. */
export type CarrierKind = (typeof CARRIER_KINDS)[number];

/** Schema of a configured carrier (table `carriers`); its Url keeps the password, never returned. */
export const CarrierRowEntity = defineEntity({
  name: "CarrierRow",
  tableName: "carriers",
  properties: {
    sid: p.string().length(32).primary(),
    name: p.string().length(64).unique(),
    kind: p.string().length(16).$type<CarrierKind>(),
    url: p.text(),
    tps: p.double().default(0),
    submitWindow: p.integer().default(10),
    systemType: p.string().length(16).default(""),
    // The rate card of what the operator pays it per segment (docs/billing.md); null: no cost known.
    costCard: p.string().length(64).nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});

/** A carrier the operator configured (`/admin/v1/Carriers`). */
export class CarrierRow extends CarrierRowEntity.class {}
CarrierRowEntity.setClass(CarrierRow);
