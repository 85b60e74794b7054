import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Carrier } from "../delivery/carrier.js";
import { createCarrier, createCarrierFromRow } from "./index.js";
import { createSimulatorNetwork, type SimulatorNetwork } from "./simulator.js";
import { systemClock } from "../common/clock.js";
import type { Config } from "../config.js";
import { dnsServersResolver } from "../webhooks/webhook-client.js";
import { createDeliveryEngine, type DeliveryEngine } from "../delivery/engine.js";
import { createCarrierRouter, type CarrierRouter } from "../delivery/carrier-router.js";
import type { SharedAllowance } from "../limits/shared-allowance.js";
import type { LimitCounters } from "../limits/account-limits.js";
import type { SendCounters } from "../messaging/send-counters.js";

/**
 * The carriers and delivery engine the configuration asks for, as the service and the worker both
 * run them: the environment's carrier (CARRIER) and the router over the configured carriers, which
 * falls back to the environment's carrier while none is configured. Every simulator among them
 * (CARRIER=simulator, `simulator`-kind rows) delivers to one simulated network, the one returned.
 */
export async function createConfiguredEngine(
  config: Config,
  orm: MikroORM,
  log: Logger,
  shared?: SharedAllowance,
  counters?: LimitCounters,
  sendCounters?: SendCounters,
): Promise<{ carrier: Carrier; router: CarrierRouter; engine: DeliveryEngine; network: SimulatorNetwork }> {
  // `shared`: the accounts' MessagesPerSecond and the carriers' Tps hold for the whole deployment (docs/limits.md).
  const network = createSimulatorNetwork();
  const carrier = await createCarrier(config, systemClock, log, shared, network);
  const router = createCarrierRouter({
    orm,
    log,
    fallback: carrier,
    clock: systemClock,
    build: (row) => createCarrierFromRow(row, config, systemClock, { log, shared, network }),
  });
  const mailTransport = config.smtpUrl ? (await import("nodemailer")).createTransport(config.smtpUrl) : undefined;
  const engine = createDeliveryEngine({
    orm,
    clock: systemClock,
    carrier: router,
    webhookAllowPrivate: config.webhookAllowPrivate,
    log,
    mailTransport,
    noAlphaCountries: config.noAlphaCountries,
    senderIdRegistration: config.senderIdRegistration,
    // A reply's forward and a keyword's answer are priced and charged as the account's sends.
    defaultRateCard: config.billing.defaultRateCard,
    // The PriceUnit of BalanceLow webhooks.
    currency: config.billing.currency,
    destinations: config.destinations,
    // Forwards and keyword answers pass the admit step with the API's defaults and counters.
    sendRate: { ratePerSecond: config.sendRateLimit, burst: config.sendRateBurst },
    limitCounters: counters,
    sendCounters,
    dispatcher: {
      claimMs: config.dispatchClaimMs,
      submissionHoldMs: config.submissionHoldMs,
      shared,
      onPaced: counters ? (sid, throttled, timedOut) => counters.paced(sid, throttled, timedOut) : undefined,
    },
    receiptTimeoutMs: config.receiptTimeoutMs,
    retention: config.retention,
    webhooks: {
      concurrency: config.webhookConcurrency,
      concurrencyPerHost: config.webhookConcurrencyPerHost,
      concurrencyPerAccount: config.webhookConcurrencyPerAccount,
      resolve: config.webhookDnsServers.length > 0 ? dnsServersResolver(config.webhookDnsServers) : undefined,
    },
  });
  return { carrier, router, engine, network };
}
