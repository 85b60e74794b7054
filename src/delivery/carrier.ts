import type { FastifyInstance } from "fastify";

/** One SMS handed to a carrier. */
export interface OutboundSms {
  messageSid: string;
  from: string;
  to: string;
  text: string;
  /** Whether the carrier should report delivery (we always track state; this is the client's wish). */
  deliveryReceipt: boolean;
  /** The sending account (routes may be per account). */
  accountSid?: string;
  /**
   * Aborts a submission still waiting for the carrier's link, window or rate (the carrier then
   * refuses it as temporary): the router moves it to the next carrier when this one's link drops.
   */
  signal?: AbortSignal;
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
  /** The carrier's own reason for a failure (SMPP: the receipt's err), "" or absent otherwise. */
  carrierError?: string;
}

/** A receipt for one submitted segment, naming the id the carrier gave it (SMPP deliver_sm). */
export interface SegmentReceipt {
  /** The id as the receipt names it: hex, decimal, leading zeros dropped, whatever the SMSC does. */
  carrierId: string;
  status: "Delivered" | "Failed";
  /** The carrier's reason on failure, e.g. "err:034 stat:UNDELIV"; "" otherwise. */
  carrierError: string;
  at: Date;
  /** The name of the carrier that sent it (set by the router): it matches only that carrier's ids. */
  carrier?: string;
}

/** One part of a concatenated inbound SMS (the UDH's reference, part count and part number). */
export interface InboundPartSms extends InboundSms {
  ref: number;
  total: number;
  part: number;
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
  /** Records a per-segment receipt (kept until its submission is recorded if that has not happened yet). */
  segmentReceipt?(receipt: SegmentReceipt): Promise<void>;
  /** Stores one part of a concatenated inbound SMS; delivers the whole once every part is in. */
  inboundPart?(part: InboundPartSms): Promise<void>;
  /**
   * Periodic upkeep of a carrier with per-segment receipts: applies kept receipts whose submission
   * has since been recorded, and delivers incomplete inbound SMS whose first part is older than
   * `partsBefore` (the parts that arrived, in order).
   */
  housekeeping?(partsBefore: Date): Promise<void>;
  /**
   * The messages still Submitted (no final report yet) that were submitted before `before`, and
   * not longer ago than the receipt timeout: a carrier that keeps its pending reports in memory
   * (the simulator) reports them again after a restart.
   */
  awaitingReports?(before: Date): Promise<Pick<OutboundSms, "messageSid" | "from" | "to" | "text">[]>;
}

/** A refusal from the carrier; permanent ones are not retried. */
export class CarrierError extends Error {
  constructor(
    message: string,
    readonly errorCode: string,
    readonly permanent: boolean,
    /** The carrier's own reason (SMPP: "0x0000000B ESME_RINVDSTADR"), recorded as the message's CarrierError. */
    readonly carrierError = "",
  ) {
    super(message);
    this.name = "CarrierError";
  }
}

/** A carrier's answer to a submission. */
export interface SubmitResult {
  carrierRef: string;
  /** For a carrier that reports per segment: each segment's id, in order. */
  segmentIds?: string[];
  /** The name of the carrier that took it (set by the router; recorded as the message's Carrier). */
  carrier?: string;
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
  /**
   * Submits one SMS; resolves with the carrier's reference (and, for a carrier that reports per
   * segment, each segment's id in order), throws CarrierError on refusal.
   */
  submit(sms: OutboundSms): Promise<SubmitResult>;
  /**
   * Called by the dispatcher with a round's messages before it submits them one by one, at the
   * round's time: a carrier that needs something per message from the database (the router's
   * LeastCost costs) looks it up for the whole round in one statement. Never throws.
   */
  prepare?(batch: readonly OutboundSms[], at: Date): Promise<void>;
  /**
   * How many messages the carrier can take within `withinMs` (its window and rate, minus what it
   * already queues); the dispatcher claims no more. Absent: no limit but the dispatcher's batch.
   */
  capacity?(withinMs: number): number;
  /** The link's state, for the operator API and the metrics. */
  status?(): CarrierStatusInfo;
  /** Starts listening for reports and inbound SMS (timers, connections). */
  start(events: CarrierEvents): Promise<void>;
  /** Stops timers and connections. */
  stop(): Promise<void>;
  /** HTTP routes the carrier's gateway calls back on (delivery reports, inbound SMS), if any. */
  routes?: (app: FastifyInstance) => Promise<void>;
}

/** What a carrier says about itself (AdminService.GetCarrierStatus). */
export interface CarrierStatusInfo {
  /** "Bound", "Connecting" or "Down" for a carrier with a standing link; "" otherwise. */
  link: "Bound" | "Connecting" | "Down" | "";
  since: Date | null;
  lastError: string;
  inFlight: number;
  window: number;
  /** Submissions per second allowed; 0 for no limit. */
  tps: number;
  queued: number;
}
