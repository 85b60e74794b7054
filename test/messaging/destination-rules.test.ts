import { describe, expect, it } from "vitest";
import { destinationConfig } from "../../src/config.js";
import { parseE164 } from "../../src/common/phone.js";
import { allowedCountriesOf, destinationRefusal, type DestinationPolicy } from "../../src/messaging/destination-rules.js";

const open: DestinationPolicy = { allowedCountries: [], blockedPrefixes: [], allowPremium: false };
const refusal = (to: string, policy: Partial<DestinationPolicy> = {}) => destinationRefusal(parseE164(to)!, { ...open, ...policy });

describe("destinationRefusal", () => {
  it("lets any ordinary number through when nothing is set", () => {
    for (const n of ["+61412345678", "+447400123456", "+12025550123", "+2348031234567", "+18002345678"]) expect(refusal(n)).toBeUndefined();
  });

  it("refuses a country outside the allowed list, naming To, the country and the fix", () => {
    expect(refusal("+2348031234567", { allowedCountries: ["AU", "GB"] })).toBe(
      "To +2348031234567 is in NG, which this account may not send to (allowed: AU, GB); ask the operator to add it to the account's AllowedCountries.",
    );
    expect(refusal("+61412345678", { allowedCountries: ["AU", "GB"] })).toBeUndefined();
    expect(refusal("+447400123456", { allowedCountries: ["AU", "GB"] })).toBeUndefined();
  });

  it("takes the account's AllowedCountries over the deployment default, and the default when the account has none", () => {
    const deployment = ["AU"];
    expect(refusal("+447400123456", { allowedCountries: allowedCountriesOf([], deployment) })).toMatch(/^To \+447400123456 is in GB, which/);
    expect(refusal("+447400123456", { allowedCountries: allowedCountriesOf(["GB"], deployment) })).toBeUndefined();
    expect(refusal("+61412345678", { allowedCountries: allowedCountriesOf(["GB"], deployment) })).toMatch(/^To \+61412345678 is in AU, which/);
    expect(allowedCountriesOf([], [])).toEqual([]);
  });

  it("refuses a blocked prefix, whatever the country list says", () => {
    expect(refusal("+447012345678", { blockedPrefixes: ["+4470"], allowPremium: true })).toBe(
      "To +447012345678 is in the blocked prefix +4470 (BLOCKED_PREFIXES): this deployment sends nothing there; ask the operator if it should.",
    );
    expect(refusal("+447400123456", { blockedPrefixes: ["+4470"] })).toBeUndefined();
  });

  // Each of these is classified PREMIUM_RATE by libphonenumber-js's 'max' metadata (getType()).
  it.each(["+449098790000", "+19002001234", "+611900123456", "+499001234567"])("refuses the premium-rate number %s unless allowed", (n) => {
    expect(refusal(n)).toBe(
      `To ${n} is a premium-rate number; sends to premium-rate, shared-cost and other special-service numbers are refused unless the operator sets ALLOW_PREMIUM_DESTINATIONS=true.`,
    );
    expect(refusal(n, { allowPremium: true })).toBeUndefined();
  });

  it("refuses the other special-service types (a UK personal number) and lets toll-free through", () => {
    expect(refusal("+447012345678")).toMatch(/^To \+447012345678 is a personal \(follow-me\) number/);
    expect(refusal("+18002345678")).toBeUndefined();
  });
});

describe("destinationConfig", () => {
  it("is open by default", () => {
    expect(destinationConfig({})).toEqual({ defaultAllowedCountries: [], blockedPrefixes: [], allowPremium: false });
  });

  it("reads the three variables", () => {
    expect(destinationConfig({ DEFAULT_ALLOWED_COUNTRIES: " au, gb ,", BLOCKED_PREFIXES: "+4470,+882", ALLOW_PREMIUM_DESTINATIONS: "true" })).toEqual({
      defaultAllowedCountries: ["AU", "GB"],
      blockedPrefixes: ["+4470", "+882"],
      allowPremium: true,
    });
  });

  it("stops start-up on a bad value, naming the variable", () => {
    expect(() => destinationConfig({ DEFAULT_ALLOWED_COUNTRIES: "AU,UK" })).toThrow(
      'DEFAULT_ALLOWED_COUNTRIES must be a comma-separated list of ISO 3166-1 alpha-2 country codes such as GB,AU; "UK" is not one',
    );
    expect(() => destinationConfig({ BLOCKED_PREFIXES: "4470" })).toThrow(
      'BLOCKED_PREFIXES must be a comma-separated list of E164 prefixes such as +4470,+882; "4470" is not one',
    );
    expect(() => destinationConfig({ ALLOW_PREMIUM_DESTINATIONS: "maybe" })).toThrow('ALLOW_PREMIUM_DESTINATIONS must be true or false, got "maybe"');
  });
});
