/**
 * The operator's consent and destination settings of an account (docs/api.md#opt-out-stop-start-help, docs/api.md#destination-permissions), checked and
 * applied from an UpdateAccount request.
 */
import type { ListValue } from "@bufbuild/protobuf/wkt";
import type { Account } from "../accounts/account.entity.js";
import { fieldError, quoted } from "../common/errors.js";
import { isKnownCountry } from "../config.js";
import { MAX_TEXT_CHARS } from "../messaging/send-rules.js";

/** The settings fields of UpdateAccountRequest (omitted: unchanged). */
export interface AccountSettingsUpdate {
  optOutText?: string;
  optInText?: string;
  helpText?: string;
  optOutKeywords?: boolean;
  allowedCountries?: ListValue;
  sendRatePerSecond?: number;
  sendRateBurst?: number;
  messagesPerSecond?: number;
  dailySegmentQuota?: number;
  smartEncoding?: boolean;
}

/** A limit of docs/limits.md from the request: 0 clears it (null), else more than 0 and at most `max` (whole when `whole`); 400 naming the field otherwise. */
function limit(field: string, value: number | undefined, max: number, whole: boolean): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 0) return null;
  if (!Number.isFinite(value) || value < 0 || value > max || (whole && !Number.isInteger(value))) {
    throw fieldError(
      field,
      "InvalidParameter",
      `${field} must be ${whole ? "a whole number " : ""}more than 0 and at most ${max}, or 0 to clear it; got ${value}.`,
    );
  }
  return value;
}

function answer(field: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if ([...text].length > MAX_TEXT_CHARS)
    throw fieldError(field, "InvalidParameter", `${field} is ${[...text].length} characters long; the limit is ${MAX_TEXT_CHARS}.`);
  return text;
}

/** ISO alpha-2 codes from the request's JSON array (any case in, upper case out, each once); 400 naming AllowedCountries otherwise. */
export function checkAllowedCountries(list: ListValue): string[] {
  const codes: string[] = [];
  for (const v of list.values) {
    if (v.kind.case !== "stringValue") {
      throw fieldError("AllowedCountries", "InvalidParameter", 'AllowedCountries must be an array of ISO 3166-1 alpha-2 country codes, e.g. ["AU","NZ"].');
    }
    const code = v.kind.value.trim().toUpperCase();
    if (!isKnownCountry(code)) {
      throw fieldError(
        "AllowedCountries",
        "InvalidCountryCode",
        `AllowedCountries: ${quoted(v.kind.value)} is not an ISO 3166-1 alpha-2 country code (e.g. GB, AU, US).`,
      );
    }
    if (!codes.includes(code)) codes.push(code);
  }
  return codes;
}

/** Checks every given setting, then applies them to the account (written by the caller's flush). */
export function applyAccountSettings(account: Account, req: AccountSettingsUpdate): void {
  const optOutText = answer("OptOutText", req.optOutText);
  const optInText = answer("OptInText", req.optInText);
  const helpText = answer("HelpText", req.helpText);
  const allowed = req.allowedCountries ? checkAllowedCountries(req.allowedCountries) : undefined;
  const sendRatePerSecond = limit("SendRatePerSecond", req.sendRatePerSecond, 100_000, false);
  const sendRateBurst = limit("SendRateBurst", req.sendRateBurst, 1_000_000, true);
  const messagesPerSecond = limit("MessagesPerSecond", req.messagesPerSecond, 100_000, false);
  const dailySegmentQuota = limit("DailySegmentQuota", req.dailySegmentQuota, 1_000_000_000, true);
  if (optOutText !== undefined) account.optOutText = optOutText;
  if (optInText !== undefined) account.optInText = optInText;
  if (helpText !== undefined) account.helpText = helpText;
  if (req.optOutKeywords !== undefined) account.optOutKeywords = req.optOutKeywords;
  if (allowed !== undefined) account.allowedCountries = allowed;
  if (sendRatePerSecond !== undefined) account.sendRatePerSecond = sendRatePerSecond;
  if (sendRateBurst !== undefined) account.sendRateBurst = sendRateBurst;
  if (messagesPerSecond !== undefined) account.messagesPerSecond = messagesPerSecond;
  if (dailySegmentQuota !== undefined) account.dailySegmentQuota = dailySegmentQuota;
  if (req.smartEncoding !== undefined) account.smartEncoding = req.smartEncoding;
}
