// The package's core (its "browser" entry): the codes only. Its main entry also registers the
// country names in ~80 languages, ~1.7 MiB of heap that nothing here reads.
import countries from "i18n-iso-countries/index.js";
import { postcodeValidator, postcodeValidatorExistsForCountry } from "postcode-validator";
import type { CreateAddressRequest } from "../../gen/switchboard/v2/addresses_pb.js";
import { type FieldProblem, quoted } from "../common/errors.js";
import { codePoints } from "../common/sms-text.js";

/** Longest accepted address text field (docs/api.md#add-an-address). */
export const MAX_ADDRESS_FIELD = 255;

/** A checked address, ready to store. */
export interface ValidAddress {
  friendly: string;
  reference: string;
  line1: string;
  line2: string;
  city: string;
  region: string;
  countryCode: string;
  postalCode: string;
  status: "Active" | "Pending";
}

const TEXT_FIELDS = [
  ["Friendly", "friendly"],
  ["Reference", "reference"],
  ["Line1", "line1"],
  ["Line2", "line2"],
  ["City", "city"],
  ["Region", "region"],
  ["CountryCode", "countryCode"],
  ["PostalCode", "postalCode"],
] as const;

/**
 * Whether a string is an assigned ISO 3166-1 alpha-2 code (any case). i18n-iso-countries also
 * lists XK (Kosovo), a user-assigned code outside ISO 3166-1: its numeric code is in the
 * user-assigned range 900–999, which no officially assigned country has.
 */
export function isCountryCode(value: string): boolean {
  if (!/^[A-Za-z]{2}$/.test(value)) return false;
  const numeric = countries.alpha2ToNumeric(value.toUpperCase());
  return numeric !== undefined && Number(numeric) < 900;
}

/**
 * Checks an add-address request (docs/api.md#add-an-address) and decides its status: Pending when it needs a
 * human look (no postal code where the country uses them, or one that does not fit its format).
 */
export function validateAddress(req: CreateAddressRequest): { problems: FieldProblem[] } | { address: ValidAddress } {
  const problems: FieldProblem[] = [];
  const v = Object.fromEntries(TEXT_FIELDS.map(([, key]) => [key, req[key].trim()])) as Record<(typeof TEXT_FIELDS)[number][1], string>;
  for (const [name, key] of TEXT_FIELDS) {
    // Characters are code points, as for Text (and as the database's varchar(255) counts them).
    const chars = v[key].length > MAX_ADDRESS_FIELD ? codePoints(v[key]) : 0;
    if (chars > MAX_ADDRESS_FIELD) {
      problems.push({ field: name, code: "InvalidParameter", message: `${name} is ${chars} characters long; the limit is ${MAX_ADDRESS_FIELD}.` });
    }
  }
  const required = [
    ["Line1", v.line1, "Line1 is required: the first line of the street address."],
    ["City", v.city, "City is required."],
    ["CountryCode", v.countryCode, "CountryCode is required: a two-letter ISO 3166-1 code such as US or GB."],
  ] as const;
  for (const [name, value, message] of required) {
    if (value === "") problems.push({ field: name, code: "MissingParameter", message });
  }
  // One entry per field (docs/errors.md#errors): an over-long CountryCode is already reported above.
  if (v.countryCode !== "" && codePoints(v.countryCode) <= MAX_ADDRESS_FIELD && !isCountryCode(v.countryCode)) {
    problems.push({
      field: "CountryCode",
      code: "InvalidCountryCode",
      message: `CountryCode ${quoted(req.countryCode)} is not a two-letter ISO 3166-1 country code such as US or GB.`,
    });
  }
  if (problems.length > 0) return { problems };
  const countryCode = v.countryCode.toUpperCase();
  let status: ValidAddress["status"] = "Active";
  if (postcodeValidatorExistsForCountry(countryCode)) {
    if (v.postalCode === "" || !postcodeValidator(v.postalCode, countryCode)) status = "Pending";
  }
  return { address: { ...v, countryCode, status } };
}
