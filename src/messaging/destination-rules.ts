/**
 * Destination permissions (docs/api.md#destination-permissions): where an account
 * may send, as a pure rule. The send pipeline calls destinationRefusal for every send, batch item
 * and forward, with the account's AllowedCountries (or the deployment's DEFAULT_ALLOWED_COUNTRIES)
 * and the deployment's BLOCKED_PREFIXES and ALLOW_PREMIUM_DESTINATIONS. The deployment's own
 * numbers (a forwarding loop) need data and are checked by the pipeline itself.
 */
import { leadingNumberType, parseE164, type E164Info } from "../common/phone.js";
import type { DestinationConfig } from "../config.js";

/** What a destination is checked against. */
export interface DestinationPolicy {
  /** ISO alpha-2 codes; empty: every country. */
  allowedCountries: readonly string[];
  /** E164 prefixes (`+` and digits) nobody may send to. */
  blockedPrefixes: readonly string[];
  /** Whether SPECIAL_SERVICE_TYPES numbers may be sent to. */
  allowPremium: boolean;
}

/**
 * The number types (libphonenumber-js 'max' metadata, `PhoneNumber.getType()`) refused unless the
 * operator allows premium destinations: the ones that cost the sender (or pay the number's
 * holder) more than an ordinary number, the ranges SMS pumping and toll fraud use. TOLL_FREE,
 * VOIP, MOBILE and FIXED_LINE(_OR_MOBILE) numbers are ordinary destinations.
 */
export const SPECIAL_SERVICE_TYPES: Readonly<Record<string, string>> = {
  PREMIUM_RATE: "a premium-rate number",
  SHARED_COST: "a shared-cost number",
  PERSONAL_NUMBER: "a personal (follow-me) number, charged at a premium rate",
  UAN: "a universal access number (a special-service number)",
  VOICEMAIL: "a voicemail access number (a special-service number)",
  PAGER: "a pager number (a special-service number)",
};

/** The account's AllowedCountries when it has any, else the deployment default. */
export function allowedCountriesOf(account: readonly string[], deploymentDefault: readonly string[]): readonly string[] {
  return account.length > 0 ? account : deploymentDefault;
}

/** The policy an account's sends are judged by: its AllowedCountries (or the deployment default), the deployment's blocked prefixes and premium switch. */
export function destinationPolicy(accountAllowed: readonly string[], deployment: DestinationConfig): DestinationPolicy {
  return {
    allowedCountries: allowedCountriesOf(accountAllowed, deployment.defaultAllowedCountries),
    blockedPrefixes: deployment.blockedPrefixes,
    allowPremium: deployment.allowPremium,
  };
}

/**
 * destinationRefusal for a message already stored (issue 41: the dispatcher checks its queued
 * messages again, as the account's AllowedCountries or the deployment's settings may have narrowed
 * since the send was accepted). A policy that refuses nothing costs no parse; a recipient that is
 * not a number the library knows is left to the carrier (it was accepted under the same rules).
 */
export function storedDestinationRefusal(recipient: string, policy: DestinationPolicy): string | undefined {
  if (policy.allowedCountries.length === 0 && policy.blockedPrefixes.length === 0 && policy.allowPremium) return undefined;
  const to = parseE164(recipient);
  return to === undefined ? undefined : destinationRefusal(to, policy);
}

/**
 * The DestinationNotAllowed message for a send to `to` under `policy` (naming To, why, and what
 * to do), or undefined when it may go. The number's country is the one its calling code and
 * leading digits give (src/common/number-country.ts).
 */
export function destinationRefusal(to: E164Info, policy: DestinationPolicy): string | undefined {
  const blocked = policy.blockedPrefixes.find((prefix) => to.number.startsWith(prefix));
  if (blocked !== undefined) {
    return `To ${to.number} is in the blocked prefix ${blocked} (BLOCKED_PREFIXES): this deployment sends nothing there; ask the operator if it should.`;
  }
  if (policy.allowedCountries.length > 0 && !policy.allowedCountries.includes(to.country)) {
    return `To ${to.number} is in ${to.country || "no known country"}, which this account may not send to (allowed: ${policy.allowedCountries.join(", ")}); ask the operator to add it to the account's AllowedCountries.`;
  }
  if (!policy.allowPremium) {
    const kind = SPECIAL_SERVICE_TYPES[leadingNumberType(to.number)];
    if (kind !== undefined) {
      return `To ${to.number} is ${kind}; sends to premium-rate, shared-cost and other special-service numbers are refused unless the operator sets ALLOW_PREMIUM_DESTINATIONS=true.`;
    }
  }
  return undefined;
}
