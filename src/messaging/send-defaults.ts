/**
 * The send pipeline's defaults and its destination step (send-pipeline.ts), shared with the
 * service sends (service-sends.ts): the sender-ID registrations and destination limits a
 * deployment has unless configured, the destination permissions of step 2, and the options of a
 * send the service makes itself.
 */
import { DEFAULT_SENDER_ID_REGISTRATION, type DestinationConfig, type SenderIdMode } from "../config.js";
import { destinationPolicy, destinationRefusal } from "./destination-rules.js";
import { DEFAULT_VALIDITY_SECONDS } from "./send-rules.js";
import type { SendItem } from "./send-steps.js";

/** SENDER_ID_REGISTRATION's default (AU=require), as a map. */
export const DEFAULT_SENDER_ID_REGISTRATIONS: ReadonlyMap<string, SenderIdMode> = new Map(Object.entries(DEFAULT_SENDER_ID_REGISTRATION));

export const NO_DESTINATION_LIMITS: DestinationConfig = { defaultAllowedCountries: [], blockedPrefixes: [], allowPremium: false };

/**
 * The destination permissions of step 2 (docs/api.md#destination-permissions): a valid request
 * whose destination the account may not send to becomes a DestinationNotAllowed problem of
 * `field`. The account's AllowedCountries are the ones it was authenticated with (the account
 * cache: a change shows at once in the process that made it, within ACCOUNT_CACHE_TTL_MS in others).
 */
export function destinationChecked(
  checked: SendItem["checked"],
  field: "To" | "ForwardToSms",
  allowedCountries: readonly string[],
  destinations: DestinationConfig,
): SendItem["checked"] {
  if (!("send" in checked)) return checked;
  const refusal = destinationRefusal(checked.send.to, destinationPolicy(allowedCountries, destinations));
  return refusal === undefined ? checked : { problems: [{ field, code: "DestinationNotAllowed", message: refusal }] };
}

/** The options no service send (a forward, a keyword's answer) has: it asks for no receipt, and no reply to it is forwarded. */
export const NO_OPTIONS = {
  schedule: undefined,
  scheduled: false,
  deliveryReceipt: false,
  drWebhookUri: "",
  drWebhookMethod: "POST",
  forwardToSms: "",
  forwardFromSms: "",
  forwardToEmail: "",
  forwardFromEmail: "",
  webhookUri: "",
  webhookMethod: "POST",
  validitySeconds: DEFAULT_VALIDITY_SECONDS,
} as const;
