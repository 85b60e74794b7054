import type { Logger } from "pino";
import type { Clock } from "../common/clock.js";
import type { Config } from "../config.js";
import type { Carrier } from "../delivery/carrier.js";
import { createSimulatorCarrier } from "./simulator.js";

/** The carrier CARRIER names, built from configuration. */
export async function createCarrier(config: Config, clock: Clock, log?: Logger): Promise<Carrier> {
  switch (config.carrier) {
    case "simulator":
      return createSimulatorCarrier({ clock, reportDelayMs: config.simulatorReportDelayMs });
    case "kannel": {
      const { createKannelCarrier } = await import("./kannel.js");
      return createKannelCarrier({ ...config.kannel, clock });
    }
    case "smpp": {
      const { createSmppCarrier } = await import("./smpp/smpp-carrier.js");
      if (!config.smpp) throw new Error("CARRIER=smpp needs SMPP_URL");
      // Submissions may wait for the bind, window and rate for half the claim (the dispatcher
      // claims no more than fit in that time).
      return createSmppCarrier({ ...config.smpp, clock, log, submitDeadlineMs: config.dispatchClaimMs / 2 });
    }
    default:
      throw new Error(`CARRIER=${String(config.carrier)} is not supported by this build; use simulator, kannel or smpp`);
  }
}
