import { defineEntity, p } from "@mikro-orm/core";

/** The REST response formats an account can choose: Switchboard's own, or Fone Dynamics' SDK shapes. */
export const REST_COMPATIBILITIES = ["None", "FoneDynamics"] as const;
/** One of REST_COMPATIBILITIES. */
export type RestCompatibility = (typeof REST_COMPATIBILITIES)[number];

/** How an account pays: Postpaid (no balance check unless a CreditLimit is set) or Prepaid. */
export const BILLING_MODES = ["Postpaid", "Prepaid"] as const;
/** One of BILLING_MODES. */
export type BillingMode = (typeof BILLING_MODES)[number];

/** Schema of a customer account (table `accounts`). */
export const AccountEntity = defineEntity({
  name: "Account",
  tableName: "accounts",
  properties: {
    sid: p.string().length(32).primary(),
    name: p.string().default(""),
    smsEnabled: p.boolean().default(true),
    // Only the sha256 hex of the token is kept: the token is shown once and never stored.
    tokenHash: p.string().length(64),
    webhookSecret: p.string(),
    // REST response format of the message methods (src/rest/rest-compat.ts).
    restCompatibility: p.text().$type<RestCompatibility>().default("None"),
    // Days a message is kept (by its creation); null: the deployment's MESSAGE_RETENTION_DAYS.
    retentionDays: p.integer().nullable(),
    // Days after which a message's text is emptied (Redacted); null: never.
    redactAfterDays: p.integer().nullable(),
    createdAt: p.datetime(),
    // Consent (docs/api.md#opt-out-stop-start-help): the answers to STOP, START and HELP ("" = the default text), and
    // whether keywords are handled at all (an account that handles consent itself turns them off).
    optOutText: p.text().default(""),
    optInText: p.text().default(""),
    helpText: p.text().default(""),
    optOutKeywords: p.boolean().default(true),
    // Destination permissions (docs/api.md#destination-permissions): ISO alpha-2 codes; empty = DEFAULT_ALLOWED_COUNTRIES.
    allowedCountries: p.array().columnType("text[]").default([]),
    // Limits for the whole deployment (docs/limits.md): request rate in segments per second and its
    // burst (null: SEND_RATE_LIMIT / SEND_RATE_BURST), segments per second handed to carriers, and
    // segments per UTC day (null: no cap).
    sendRatePerSecond: p.double().nullable(),
    sendRateBurst: p.integer().nullable(),
    messagesPerSecond: p.double().nullable(),
    dailySegmentQuota: p.integer().nullable(),
    // Billing (docs/billing.md): the rate card (null: DEFAULT_RATE_CARD), Postpaid or Prepaid, the
    // credit below zero the balance may go (micro-units; null: none for Prepaid, no limit for
    // Postpaid), and the low-balance webhook's threshold and address.
    rateCard: p.string().length(64).nullable(),
    billingMode: p.text().$type<BillingMode>().default("Postpaid"),
    creditLimit: p.bigint().nullable(),
    lowBalanceThreshold: p.bigint().nullable(),
    lowBalanceWebhookUri: p.text().nullable(),
    // Smart encoding (docs/api.md#smart-encoding): look-alike characters replaced before segmenting; on for new accounts.
    smartEncoding: p.boolean().default(true),
  },
});

/** A customer account: the tenant every other row belongs to. */
export class Account extends AccountEntity.class {}
AccountEntity.setClass(Account);
