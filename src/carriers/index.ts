import type { Logger } from "pino";
import type { Clock } from "../common/clock.js";
import { type Config, smppConfig } from "../config.js";
import type { Carrier } from "../delivery/carrier.js";
import type { CarrierRecord } from "../admin/carrier-store.js";
import type { SmppCarrierOptions } from "./smpp/smpp-carrier.js";
import { createSimulatorCarrier, type SimulatorNetwork } from "./simulator.js";
import { carrierTpsSpec } from "../limits/account-limits.js";
import type { SharedAllowance } from "../limits/shared-allowance.js";

/**
 * The shared gate of a carrier's Tps (docs/limits.md): every process and bind of the carrier
 * `name` takes its starts from one bucket; undefined without an allowance or a Tps.
 */
export function tpsGate(shared: SharedAllowance | undefined, name: string, tps: number): (() => Promise<number>) | undefined {
  if (!shared || !(tps > 0)) return undefined;
  const spec = carrierTpsSpec(tps);
  return async () => {
    const got = await shared.take(`tps:${name}`, 1, spec);
    return got.ok ? 0 : Math.max(1, got.retryAfterMs);
  };
}

/** The carrier CARRIER names, built from configuration; a simulator delivers to `network` (default: its own). */
export async function createCarrier(config: Config, clock: Clock, log?: Logger, shared?: SharedAllowance, network?: SimulatorNetwork): Promise<Carrier> {
  switch (config.carrier) {
    case "simulator":
      return createSimulatorCarrier({ clock, reportDelayMs: config.simulatorReportDelayMs, network });
    case "kannel": {
      const { createKannelCarrier } = await import("./kannel.js");
      return createKannelCarrier({ ...config.kannel, clock, tpsGate: tpsGate(shared, "default", config.kannel.tps ?? 0) });
    }
    case "smpp": {
      const { createSmppCarrier } = await import("./smpp/smpp-carrier.js");
      if (!config.smpp) throw new Error("CARRIER=smpp needs SMPP_URL");
      // Submissions may wait for the bind, window and rate for half the claim (the dispatcher
      // claims no more than fit in that time).
      return createSmppCarrier({
        ...config.smpp,
        clock,
        log,
        submitDeadlineMs: config.dispatchClaimMs / 2,
        tpsGate: tpsGate(shared, "default", config.smpp.tps),
      });
    }
    default:
      throw new Error(`CARRIER=${String(config.carrier)} is not supported by this build; use simulator, kannel or smpp`);
  }
}

/**
 * The carrier of a configured row (`/admin/v1/Carriers`). An SMPP row's Url is read as SMPP_URL
 * (with the row's Window, Tps and SystemType; the other SMPP_ settings from the environment); a
 * Kannel row's Url is its sendsms URL with `username` and `password` in the query (the callbacks'
 * base and secret are the environment's KANNEL_CALLBACK_URL and KANNEL_CALLBACK_SECRET). A
 * simulator row delivers to `opts.network`, the process's simulated network, which the operator's
 * Handsets API reads (without one, a network of its own that nothing reads).
 */
export async function createCarrierFromRow(
  row: CarrierRecord,
  config: Config,
  clock: Clock,
  opts: { log?: Logger; env?: NodeJS.ProcessEnv; smpp?: Partial<SmppCarrierOptions>; shared?: SharedAllowance; network?: SimulatorNetwork } = {},
): Promise<Carrier> {
  switch (row.kind) {
    case "simulator":
      return createSimulatorCarrier({ clock, reportDelayMs: config.simulatorReportDelayMs, network: opts.network });
    case "kannel": {
      const { createKannelCarrier } = await import("./kannel.js");
      const url = new URL(row.url);
      const username = url.searchParams.get("username") ?? "";
      const password = url.searchParams.get("password") ?? "";
      url.searchParams.delete("username");
      url.searchParams.delete("password");
      return createKannelCarrier({
        ...config.kannel,
        sendsmsUrl: url.toString(),
        username,
        password,
        tps: row.tps,
        clock,
        tpsGate: tpsGate(opts.shared, row.name, row.tps),
      });
    }
    case "smpp": {
      const { createSmppCarrier } = await import("./smpp/smpp-carrier.js");
      const env = opts.env ?? process.env;
      const smpp = smppConfig({ ...env, SMPP_URL: row.url, SMPP_WINDOW: String(row.window), SMPP_TPS: String(row.tps), SMPP_SYSTEM_TYPE: row.systemType });
      return createSmppCarrier({
        ...smpp,
        clock,
        log: opts.log?.child({ carrierName: row.name }),
        submitDeadlineMs: config.dispatchClaimMs / 2,
        tpsGate: tpsGate(opts.shared, row.name, row.tps),
        ...opts.smpp,
      });
    }
    default:
      throw new Error(`carrier ${row.name}: unknown kind ${String(row.kind)}`);
  }
}
