import type { Clock } from "../common/clock.js";
import type { Config } from "../config.js";
import type { Carrier } from "./carrier.js";
import { createSimulatorCarrier } from "./simulator.js";

/** The carrier CARRIER names, built from configuration. */
export async function createCarrier(config: Config, clock: Clock): Promise<Carrier> {
  switch (config.carrier) {
    case "simulator":
      return createSimulatorCarrier({ clock, reportDelayMs: config.simulatorReportDelayMs });
    case "kannel": {
      const { createKannelCarrier } = await import("./kannel.js");
      return createKannelCarrier({ ...config.kannel, clock });
    }
    default:
      throw new Error(`CARRIER=${config.carrier} is not supported by this build; use simulator or kannel`);
  }
}
