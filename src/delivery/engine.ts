import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Carrier, CarrierEvents } from "../carriers/carrier.js";
import type { Clock } from "../common/clock.js";
import type { Transporter } from "nodemailer";
import { createMailWorker } from "../mail/mail-outbox.js";
import { createWebhookWorker, type WebhookWorker, type WebhookWorkerOptions } from "../webhooks/webhook-worker.js";
import { createDispatcher, type Dispatcher, type DispatcherOptions } from "./dispatcher.js";
import { receiveInbound } from "./inbound.js";
import { applyFinalState } from "./receipts.js";
import { createWorkerLoop, type WorkerLoop } from "./worker-loop.js";

/** Options of the delivery engine. */
export interface DeliveryEngineOptions {
  orm: MikroORM;
  clock: Clock;
  carrier: Carrier;
  webhookAllowPrivate: boolean;
  log?: Logger;
  /** Poll interval when idle, ms (default 250). */
  pollMs?: number;
  dispatcher?: Partial<Pick<DispatcherOptions, "batchSize" | "claimMs" | "retryWindowMs">>;
  webhooks?: Partial<Pick<WebhookWorkerOptions, "timeoutMs" | "retryForMs" | "batchSize">>;
  /** SMTP transport for forwarded e-mails; without one they are kept for the operator. */
  mailTransport?: Transporter;
}

/** The dispatcher, the webhook sender and the carrier's event sink, started and stopped together. */
export interface DeliveryEngine {
  dispatcher: Dispatcher;
  webhooks: WebhookWorker;
  mail: { tick(): Promise<number> };
  events: CarrierEvents;
  /** Starts the carrier and (unless `loops` is false) the background loops. */
  start(opts?: { loops?: boolean }): Promise<void>;
  /** Wakes the dispatcher: a message was just queued. */
  nudge(): void;
  /** Stops the loops after their current round, then the carrier. */
  stop(): Promise<void>;
}

/** Creates the delivery engine; tests call `dispatcher.tick()` and `webhooks.tick()` themselves. */
export function createDeliveryEngine(opts: DeliveryEngineOptions): DeliveryEngine {
  const dispatcher = createDispatcher({ orm: opts.orm, clock: opts.clock, carrier: opts.carrier, log: opts.log, ...opts.dispatcher });
  const webhooks = createWebhookWorker({ orm: opts.orm, clock: opts.clock, allowPrivate: opts.webhookAllowPrivate, log: opts.log, ...opts.webhooks });
  const mail = createMailWorker({ orm: opts.orm, clock: opts.clock, transport: opts.mailTransport, log: opts.log });
  const pollMs = opts.pollMs ?? 250;
  let loops: WorkerLoop[] = [];
  let webhookLoop: WorkerLoop | undefined;

  const events: CarrierEvents = {
    async deliveryReport(report) {
      const changed = await applyFinalState(opts.orm.em.fork(), { ...report, now: opts.clock.now() });
      if (changed) webhookLoop?.nudge();
    },
    async inbound(sms) {
      const result = await receiveInbound(opts.orm.em.fork(), sms, opts.clock.now());
      for (const l of loops) l.nudge();
      return result;
    },
  };

  return {
    dispatcher,
    webhooks,
    mail,
    events,
    async start(startOpts) {
      await opts.carrier.start(events);
      if (startOpts?.loops === false) return;
      webhookLoop = createWorkerLoop("webhooks", () => webhooks.tick(), { intervalMs: pollMs * 4, log: opts.log });
      loops = [
        createWorkerLoop("dispatcher", () => dispatcher.tick(), { intervalMs: pollMs, log: opts.log }),
        webhookLoop,
        createWorkerLoop("mail", () => mail.tick(), { intervalMs: pollMs * 4, log: opts.log }),
      ];
      for (const l of loops) l.start();
    },
    nudge() {
      loops[0]?.nudge();
    },
    async stop() {
      await Promise.all(loops.map((l) => l.stop()));
      loops = [];
      webhookLoop = undefined;
      await opts.carrier.stop();
    },
  };
}
