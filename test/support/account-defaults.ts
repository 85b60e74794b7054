/**
 * The fields a new account answers with beyond its name, Sid and SmsEnabled, as the operator API
 * and the CLI print them: the consent texts and keywords (docs/api.md#opt-out-stop-start-help),
 * AllowedCountries, SmartEncoding on (docs/api.md#smart-encoding), and billing (docs/billing.md):
 * no own rate card, Postpaid, no CreditLimit (absent), a balance of 0 in the default currency, no
 * LowBalanceThreshold (absent) and no LowBalanceWebhookUri.
 */
export const ACCOUNT_DEFAULTS = {
  OptOutText: "",
  OptInText: "",
  HelpText: "",
  OptOutKeywords: true,
  AllowedCountries: [],
  SmartEncoding: true,
  RateCard: "",
  BillingMode: "Postpaid",
  Balance: "0.00",
  PriceUnit: "AUD",
  LowBalanceWebhookUri: "",
};
