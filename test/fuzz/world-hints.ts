/**
 * The fuzz tests' world: tenants A (the caller) and B (someone else) with every kind of
 * resource, an operator's target account, and per-field pools and hints built from them.
 */
import type { DescField } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import { addPoolNumbers, createTenant, type Tenant } from "../support/harness.js";
import { createRichTenant, type RichTenant } from "../support/world.js";
import type { Hints } from "./arbitraries.js";

/** Who is who in the fuzz tests. */
export interface FuzzWorld {
  a: RichTenant;
  b: RichTenant;
  /** The account the operator routes act on, so that no fuzz case rotates A's token or disables A. */
  victim: Tenant;
  now: number;
  hints: Hints;
  /** Sids (as path segments) that belong to the caller of a route, by path field name. */
  own(field: DescField, operator: boolean): string[];
  /** Sids of someone else, by path field name. */
  others(field: DescField, operator: boolean): string[];
}

const URIS = [
  "",
  "https://example.com/hook",
  "http://example.com/hook?a=1",
  "http://127.0.0.1/x",
  "http://localhost/",
  "https://[::1]/",
  "ftp://example.com/",
  "not a uri",
  "https://10.0.0.1/",
];
const METHODS = ["", "POST", "GET", "get", "PUT", " post "];

/** Builds the world on an app whose simulator carrier is started. */
export async function createFuzzWorld(app: FastifyInstance, now: number): Promise<FuzzWorld> {
  const a = await createRichTenant(app, "fuzzA", now);
  const b = await createRichTenant(app, "fuzzB", now);
  const victim = await createTenant(app);
  await addPoolNumbers(app, 3, 200); // free pool numbers, so that leased sends can succeed
  const digits = (n: string) => n.slice(1);
  const addresses = (t: RichTenant) => Object.values(t.addresses);
  const messages = (t: RichTenant) => Object.values(t.messages);
  const senderIds = (t: RichTenant) => [...Object.values(t.senderIds), t.spareSenderId];

  const hints: Hints = {
    to: [
      "+447700900123",
      "+14155550123",
      "+14155550199",
      "+33612345678",
      "+15005550001",
      "+447700900",
      "447700900123",
      "+1",
      a.leasedNumber,
      a.leasedRecipient,
    ],
    from: ["", "Acme", "Acme Corp", a.numbers[0], a.numbers[1], b.numbers[0], a.leasedNumber, a.leasedRecipient, "+447700900999", "+1", "Toolongsender"],
    text: ["hi", "Hello 👋", "x".repeat(1600), "é".repeat(1601), " ", "GSM @£$¥"],
    schedule: [now, now + 60, now + 3599, now + 1209600, now + 1209601, now - 3599, now - 3600, 0, -1],
    delivery_receipt: [true, false],
    delivery_receipt_webhook_uri: URIS,
    webhook_uri: URIS,
    delivery_receipt_webhook_method: METHODS,
    webhook_method: METHODS,
    forward_to_sms: ["", "+447700900777", "447700900777", "Acme"],
    forward_from_sms: ["", "+447700900777", "Acme", "Acme!"],
    forward_to_email: ["", "a@example.com", "not-an-email", "a@b"],
    forward_from_email: ["", "a@example.com", "not-an-email"],
    line1: ["1 Market St", "10 Downing Street", ""],
    line2: ["", "Suite 5"],
    city: ["San Francisco", "London", ""],
    region: ["", "CA"],
    country_code: ["US", "gb", "GB", "XX", "U", "USA", ""],
    postal_code: ["94103", "SW1A 2AA", "ABC", "", "9410"],
    friendly: ["Desk", "", "f".repeat(255), "f".repeat(256)],
    reference: ["", "ref-1", "r".repeat(256)],
    // A ledger entry's and an account's billing fields (docs/billing.md): the limits of each, and past them.
    type: ["TopUp", "Adjustment", "topup", "Charge", ""],
    amount: ["12.50", "-0.000001", "0", "0.0000001", "1e3", "+1", "", "999999999999.999999", "-999999999999.999999", "1000000000000"],
    credit_limit: ["", "0", "50.00", "-1", "0.1234567"],
    billing_mode: ["Postpaid", "Prepaid", "prepaid", ""],
    rate_card: ["", "retail", "no-such-card", "bad name", "n".repeat(65)],
    address_sid: [...addresses(a), b.addresses.active, "", " "],
    sender_id: ["Acme", "ACME", "fuzzAReg", "Acme!", "", "Toolongsender"],
    country: ["AU", "au", "NZ", "XX", "", "AUS"],
    use_case: ["Booking reminders", "", " ", "u".repeat(500), "u".repeat(501)],
    sender_id_sid: [...senderIds(a), b.senderIds.registered, "", " "],
    name: ["Acme", " ", "", "n".repeat(255), "n".repeat(256)],
    sms_enabled: [true, false],
    opt_out_text: ["", " Bye. Reply START to rejoin. ", "x".repeat(1601)],
    opt_in_text: ["", "Welcome back."],
    help_text: ["", "Call 1300 000 000."],
    opt_out_keywords: [true, false],
    number: ["+14155550100", "+447700900555", "+12025550300", "123", "", a.numbers[0]],
    account_sid: [victim.accountSid, a.accountSid, "", "AC" + "0".repeat(30)],
    status: ["Active", "Rejected", "Pending", "Registered", "Scheduled", "Received", "Canceled", "active", ""],
    direction: ["Transmit", "Receive", "transmit", ""],
    results_count: [1, 2, 200, 1000, 0, 1001],
    results_skip: [0, 1, 5, -1, 2147483647],
    date_from: [now - 86400, now, 0, -62135596800, 253402300799, 253402300800],
    date_to: [now + 86400, now, 0, -62135596801, 253402300800],
  };

  // Operator routes act on B and the victim, never on A (whose credentials the /v2 cases use).
  const pools = (field: DescField, operator: boolean): { own: string[]; others: string[] } => {
    switch (field.name) {
      case "account_sid":
        return operator ? { own: [victim.accountSid, b.accountSid], others: [] } : { own: [a.accountSid], others: [b.accountSid, victim.accountSid] };
      case "property_sid":
        return operator
          ? { own: [victim.propertySid, b.properties.main, b.properties.disabled], others: [] }
          : { own: [a.properties.main, a.properties.disabled], others: [b.properties.main] };
      case "message_sid":
        return operator ? { own: [...messages(a), ...messages(b)], others: [] } : { own: messages(a), others: messages(b) };
      case "address_sid":
        return operator ? { own: [...addresses(a), ...addresses(b)], others: [] } : { own: addresses(a), others: addresses(b) };
      case "sender_id_sid":
        return operator ? { own: [...senderIds(a), ...senderIds(b)], others: [] } : { own: senderIds(a), others: senderIds(b) };
      case "number":
        return operator
          ? { own: [...a.numbers, a.leasedNumber, "+447700900123"].map(digits), others: [] }
          : { own: a.numbers.map(digits), others: [...b.numbers, a.leasedNumber].map(digits) };
      default:
        return { own: [], others: [] };
    }
  };
  return {
    a,
    b,
    victim,
    now,
    hints,
    own: (field, operator) => pools(field, operator).own,
    others: (field, operator) => pools(field, operator).others,
  };
}
