import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Carrier } from "../delivery/carrier.js";
import { createCarrier } from "./index.js";
import { systemClock } from "../common/clock.js";
import type { Config } from "../config.js";
import { dnsServersResolver } from "../webhooks/webhook-client.js";
import { createDeliveryEngine, type DeliveryEngine } from "../delivery/engine.js";

/** The carrier and delivery engine the configuration asks for, as the service and the worker both run them. */
export async function createConfiguredEngine(config: Config, orm: MikroORM, log: Logger): Promise<{ carrier: Carrier; engine: DeliveryEngine }> {
  const carrier = await createCarrier(config, systemClock, log);
  const mailTransport = config.smtpUrl ? (await import("nodemailer")).createTransport(config.smtpUrl) : undefined;
  const engine = createDeliveryEngine({
    orm,
    clock: systemClock,
    carrier,
    webhookAllowPrivate: config.webhookAllowPrivate,
    log,
    mailTransport,
    noAlphaCountries: config.noAlphaCountries,
    dispatcher: { claimMs: config.dispatchClaimMs },
    receiptTimeoutMs: config.receiptTimeoutMs,
    retention: config.retention,
    webhooks: {
      concurrency: config.webhookConcurrency,
      concurrencyPerHost: config.webhookConcurrencyPerHost,
      concurrencyPerAccount: config.webhookConcurrencyPerAccount,
      resolve: config.webhookDnsServers.length > 0 ? dnsServersResolver(config.webhookDnsServers) : undefined,
    },
  });
  return { carrier, engine };
}
