import { randomUUID } from "node:crypto";
import type { Clock } from "../common/clock.js";
import { type Carrier, CarrierError, type CarrierEvents, type InboundSms, type OutboundSms } from "../delivery/carrier.js";

/** Documented test recipients of the simulator (docs/carriers.md#carriersimulator-default). */
export const SIMULATOR_TEST_NUMBERS = {
  /** Accepted, then a Failed delivery report with ErrorCode Unreachable. */
  unreachable: "+15005550001",
  /** Refused at submission with ErrorCode CarrierRejected (permanent, not retried). */
  rejected: "+15005550002",
  /** Refused at every submission with CarrierUnavailable (temporary: retried until the retry window ends). */
  unavailable: "+15005550003",
} as const;

/** How long after the report delay a started simulator looks for reports a previous one left owing, ms. */
export const RECOVER_AFTER_MS = 1000;

/** How many delivered messages the simulated network keeps in all, over every handset (the latest ones). */
export const SIMULATOR_KEEP = 10_000;

/** One SMS that reached a simulated handset. */
export interface HandsetMessage {
  messageSid: string;
  from: string;
  to: string;
  text: string;
  at: Date;
}

/**
 * The simulated network: the handsets and what reached them. One per process, shared by every
 * simulator carrier of the process (the environment's CARRIER=simulator and each `simulator`-kind
 * carrier row), so the operator's Handsets API sees whatever any of them delivered.
 */
export interface SimulatorNetwork {
  /** A message reached its handset. */
  remember(m: HandsetMessage): void;
  /** What the network delivered to a handset, oldest first. */
  handsetMessages(number: string): HandsetMessage[];
}

/** One handset's messages, oldest first from `head` (evicted ones are skipped, then compacted away). */
interface Inbox {
  items: HandsetMessage[];
  head: number;
}

/** A simulated network keeping its latest `keep` delivered messages over all handsets (default SIMULATOR_KEEP). */
export function createSimulatorNetwork(keep = SIMULATOR_KEEP): SimulatorNetwork {
  const size = Math.max(1, keep);
  // Memory stays bounded however long the process runs and however many handsets it sees: the
  // network keeps its latest `size` messages in all. `ring` holds them in delivery order; the
  // oldest leaves its handset's inbox (always that inbox's first) when a newer one takes its slot.
  const handsets = new Map<string, Inbox>();
  const ring: (HandsetMessage | undefined)[] = new Array(size);
  let next = 0;
  return {
    remember(m) {
      const old = ring[next];
      if (old) {
        const inbox = handsets.get(old.to)!;
        inbox.head++;
        if (inbox.head === inbox.items.length) handsets.delete(old.to);
        // Compacted in bulk, so that a busy handset does not pay for a copy per message.
        else if (inbox.head >= 1024 && inbox.head * 2 >= inbox.items.length) {
          inbox.items = inbox.items.slice(inbox.head);
          inbox.head = 0;
        }
      }
      ring[next] = m;
      next = (next + 1) % size;
      const inbox = handsets.get(m.to);
      if (inbox) inbox.items.push(m);
      else handsets.set(m.to, { items: [m], head: 0 });
    },
    handsetMessages(number) {
      const inbox = handsets.get(number);
      return inbox ? inbox.items.slice(inbox.head) : [];
    },
  };
}

/** Options of the simulator carrier. */
export interface SimulatorOptions {
  clock: Clock;
  /** Delay before a delivery report, ms (default 200). */
  reportDelayMs?: number;
  /** How many delivered messages are kept over all handsets (default SIMULATOR_KEEP), when the simulator makes its own network. */
  keep?: number;
  /** The network it delivers to (default: a network of its own). */
  network?: SimulatorNetwork;
}

/** The in-process network of simulated handsets, with operator hooks. */
export interface SimulatorCarrier extends Carrier {
  /** What the network delivered to a handset, oldest first (whichever simulator of the network delivered it). */
  handsetMessages(number: string): HandsetMessage[];
  /** Makes a handset send an SMS into the service. */
  injectInbound(sms: Omit<InboundSms, "at">): Promise<{ messageSid: string; inReplyTo: string }>;
}

/**
 * The default carrier: delivers to in-memory handsets and reports delivery after a short delay.
 * State is per process: with several processes, each simulates its own network.
 */
export function createSimulatorCarrier(opts: SimulatorOptions): SimulatorCarrier {
  const delay = opts.reportDelayMs ?? 200;
  const network = opts.network ?? createSimulatorNetwork(opts.keep);
  const remember = (m: HandsetMessage) => network.remember(m);
  const timers = new Set<NodeJS.Timeout>();
  let events: CarrierEvents | undefined;

  // Like a real carrier (Kannel's smsbox retries its dlr-url), a report the service could not take
  // (its database down) is tried again: every second for about a minute, then dropped.
  const report = (fn: () => Promise<void>, attempt = 1, firstDelay = delay) => {
    const t = setTimeout(
      () => {
        timers.delete(t);
        fn().catch(() => {
          if (events && attempt < 60) report(fn, attempt + 1);
        });
      },
      attempt === 1 ? firstDelay : 1000,
    );
    timers.add(t);
  };

  /** Delivers a submitted SMS to its handset and reports it (Failed Unreachable for that test number), after the delay. */
  const deliverLater = (sms: Pick<OutboundSms, "messageSid" | "from" | "to" | "text">) => {
    const unreachable = sms.to === SIMULATOR_TEST_NUMBERS.unreachable;
    let at: Date | undefined; // the handset gets it once; a retried report repeats the same time
    report(async () => {
      if (at === undefined) {
        at = opts.clock.now();
        if (!unreachable) remember({ messageSid: sms.messageSid, from: sms.from, to: sms.to, text: sms.text, at });
      }
      await events?.deliveryReport({
        messageSid: sms.messageSid,
        status: unreachable ? "Failed" : "Delivered",
        errorCode: unreachable ? "Unreachable" : "",
        at,
      });
    });
  };

  return {
    name: "simulator",
    async submit(sms: OutboundSms) {
      if (sms.to === SIMULATOR_TEST_NUMBERS.rejected) throw new CarrierError("the carrier rejected the recipient", "CarrierRejected", true);
      if (sms.to === SIMULATOR_TEST_NUMBERS.unavailable) throw new CarrierError("the carrier is temporarily unavailable", "CarrierUnavailable", false);
      const carrierRef = randomUUID();
      deliverLater(sms);
      return { carrierRef };
    },
    async start(e: CarrierEvents) {
      events = e;
      // The reports a stopped or crashed simulator still owed died with it: its messages would stay
      // Submitted. Once this one has run for the report delay and a second more (so that another
      // live process's reports for its own recent submissions have landed), it delivers and
      // reports every message still Submitted from before it started. A report that comes twice
      // changes nothing the second time (final states are conditional writes).
      const startedAt = opts.clock.now();
      const awaiting = e.awaitingReports;
      if (awaiting) {
        report(
          async () => {
            if (!events) return;
            for (const sms of await awaiting(startedAt)) deliverLater(sms);
          },
          1,
          delay + RECOVER_AFTER_MS,
        );
      }
    },
    async stop() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      events = undefined;
    },
    handsetMessages: (number: string) => network.handsetMessages(number),
    async injectInbound(sms) {
      if (!events) throw new Error("the simulator is not started");
      return events.inbound({ ...sms, at: opts.clock.now() });
    },
  };
}
