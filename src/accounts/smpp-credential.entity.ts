import { defineEntity, p } from "@mikro-orm/core";

/**
 * Schemas of the SMPP server's tables (`smpp_credentials`, `smpp_binds`; docs/smpp-server.md).
 * Declared for the schema only: every statement on them is in smpp-store.ts.
 */
export const SmppCredentialEntity = defineEntity({
  name: "SmppCredential",
  tableName: "smpp_credentials",
  properties: {
    accountSid: p.string().length(32).primary(),
    // The bind's system_id, unique across accounts.
    systemId: p.string().length(15),
    // A salted scrypt hash of the password (accounts/password-hash.ts), never the password.
    passwordHash: p.text(),
    // The account's property its submit_sm sends are made for.
    propertySid: p.string().length(32),
    maxBinds: p.integer(),
    // CIDRs a bind may come from; empty: any address.
    allowedAddresses: p.array().columnType("text[]").default([]),
    // Whether replies to the account's numbers go to its binds as deliver_sm.
    deliverReplies: p.boolean().default(false),
    updatedAt: p.datetime(),
  },
});

/** One account's SMPP credentials. */
export class SmppCredential extends SmppCredentialEntity.class {}
SmppCredentialEntity.setClass(SmppCredential);

export const SmppBindEntity = defineEntity({
  name: "SmppBind",
  tableName: "smpp_binds",
  properties: {
    bindId: p.string().length(32).primary(),
    accountSid: p.string().length(32),
    systemId: p.string().length(15),
    // The client's address and port.
    address: p.string().length(64),
    // Transmitter, Receiver or Transceiver.
    mode: p.string().length(16),
    since: p.datetime(),
    // submit_sm received and not yet answered, as of the last heartbeat.
    inFlight: p.integer().default(0),
    // Renewed by the process holding the bind; a bind whose heartbeat stopped is gone.
    heartbeatAt: p.datetime(),
  },
});

/** One open bind, on whichever process holds it. */
export class SmppBind extends SmppBindEntity.class {}
SmppBindEntity.setClass(SmppBind);
