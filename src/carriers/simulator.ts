import { randomUUID } from "node:crypto";
import type { Clock } from "../common/clock.js";
import { type Carrier, CarrierError, type CarrierEvents, type InboundSms, type OutboundSms } from "./carrier.js";

/** Documented test recipients of the simulator (docs/carriers.md#carriersimulator-default). */
export const SIMULATOR_TEST_NUMBERS = {
  /** Accepted, then a Failed delivery report with ErrorCode Unreachable. */
  unreachable: "+15005550001",
  /** Refused at submission with ErrorCode CarrierRejected (permanent, not retried). */
  rejected: "+15005550002",
  /** Refused at every submission with CarrierUnavailable (temporary: retried until the retry window ends). */
  unavailable: "+15005550003",
} as const;

/** How many of the latest messages each simulated handset keeps. */
export const HANDSET_KEEP = 1000;

/** One SMS that reached a simulated handset. */
export interface HandsetMessage {
  messageSid: string;
  from: string;
  to: string;
  text: string;
  at: Date;
}

/** Options of the simulator carrier. */
export interface SimulatorOptions {
  clock: Clock;
  /** Delay before a delivery report, ms (default 200). */
  reportDelayMs?: number;
}

/** The in-process network of simulated handsets, with operator hooks. */
export interface SimulatorCarrier extends Carrier {
  /** What the network delivered to a handset, oldest first. */
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
  const handsets = new Map<string, HandsetMessage[]>();
  const timers = new Set<NodeJS.Timeout>();
  let events: CarrierEvents | undefined;

  // Like a real carrier (Kannel's smsbox retries its dlr-url), a report the service could not take
  // (its database down) is tried again: every second for about a minute, then dropped.
  const report = (fn: () => Promise<void>, attempt = 1) => {
    const t = setTimeout(
      () => {
        timers.delete(t);
        fn().catch(() => {
          if (events && attempt < 60) report(fn, attempt + 1);
        });
      },
      attempt === 1 ? delay : 1000,
    );
    timers.add(t);
  };

  return {
    name: "simulator",
    async submit(sms: OutboundSms) {
      if (sms.to === SIMULATOR_TEST_NUMBERS.rejected) throw new CarrierError("the carrier rejected the recipient", "CarrierRejected", true);
      if (sms.to === SIMULATOR_TEST_NUMBERS.unavailable) throw new CarrierError("the carrier is temporarily unavailable", "CarrierUnavailable", false);
      const carrierRef = randomUUID();
      const unreachable = sms.to === SIMULATOR_TEST_NUMBERS.unreachable;
      let at: Date | undefined; // the handset gets it once; a retried report repeats the same time
      report(async () => {
        if (at === undefined) {
          at = opts.clock.now();
          if (!unreachable) {
            const list = handsets.get(sms.to) ?? [];
            list.push({ messageSid: sms.messageSid, from: sms.from, to: sms.to, text: sms.text, at });
            // Memory stays bounded however long the process runs: a handset keeps its latest messages.
            // Trimmed in bulk, so that a busy handset does not pay for a copy per message.
            if (list.length >= 2 * HANDSET_KEEP) list.splice(0, list.length - HANDSET_KEEP);
            handsets.set(sms.to, list);
          }
        }
        await events?.deliveryReport({
          messageSid: sms.messageSid,
          status: unreachable ? "Failed" : "Delivered",
          errorCode: unreachable ? "Unreachable" : "",
          at,
        });
      });
      return { carrierRef };
    },
    async start(e: CarrierEvents) {
      events = e;
    },
    async stop() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      events = undefined;
    },
    handsetMessages(number: string) {
      return (handsets.get(number) ?? []).slice(-HANDSET_KEEP);
    },
    async injectInbound(sms) {
      if (!events) throw new Error("the simulator is not started");
      return events.inbound({ ...sms, at: opts.clock.now() });
    },
  };
}
