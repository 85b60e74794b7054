import type { FastifyInstance } from "fastify";

/** One SMS handed to a carrier. */
export interface OutboundSms {
  messageSid: string;
  from: string;
  to: string;
  text: string;
  /** Whether the carrier should report delivery (we always track state; this is the client's wish). */
  deliveryReceipt: boolean;
}

/**
 * A report heard from the carrier: final (Delivered, Failed), or Submitted, the carrier confirming
 * it holds the message (which also settles a submission whose answer a crash lost).
 */
export interface DeliveryReport {
  messageSid: string;
  status: "Submitted" | "Delivered" | "Failed";
  /** Stable PascalCase reason on failure, "" otherwise. */
  errorCode: string;
  at: Date;
  /** The carrier's reference, when the report carries one (Submitted reports). */
  carrierRef?: string;
}

/** An SMS a handset sent into the service (a reply to a leased number, say). */
export interface InboundSms {
  from: string;
  to: string;
  text: string;
  at: Date;
}

/** Where a carrier delivers what it hears: implemented by the delivery engine. */
export interface CarrierEvents {
  deliveryReport(report: DeliveryReport): Promise<void>;
  /** Stores the SMS; returns the inbound MessageSid and the outbound one it answered ("" when unmatched). */
  inbound(sms: InboundSms): Promise<{ messageSid: string; inReplyTo: string }>;
}

/** A refusal from the carrier; permanent ones are not retried. */
export class CarrierError extends Error {
  constructor(
    message: string,
    readonly errorCode: string,
    readonly permanent: boolean,
  ) {
    super(message);
    this.name = "CarrierError";
  }
}

/** A way to hand SMS to the network and hear back reports and inbound messages. */
export interface Carrier {
  readonly name: string;
  /**
   * How long the carrier may still confirm (with a Submitted report) a submission whose answer was
   * lost in a crash; the dispatcher holds such a message this long before submitting it again.
   * Undefined: the carrier never confirms, so the message is submitted again at once.
   */
  readonly confirmWaitMs?: number;
  /** Submits one SMS; resolves with the carrier's reference, throws CarrierError on refusal. */
  submit(sms: OutboundSms): Promise<{ carrierRef: string }>;
  /** Starts listening for reports and inbound SMS (timers, connections). */
  start(events: CarrierEvents): Promise<void>;
  /** Stops timers and connections. */
  stop(): Promise<void>;
  /** HTTP routes the carrier's gateway calls back on (delivery reports, inbound SMS), if any. */
  routes?: (app: FastifyInstance) => Promise<void>;
}
