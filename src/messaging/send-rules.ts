import type { SendMessageRequest } from "../../gen/switchboard/v2/messaging_pb.js";
import { type FieldProblem, quoted } from "../common/errors.js";
import { formatMoney } from "../common/money.js";
import { smartEncode } from "../common/smart-encoding.js";
import { codePoints, textEncoding } from "../common/sms-text.js";
import { isAlphanumericSender, isEmail, parseE164, type E164Info, writeItAs } from "../common/phone.js";
import { mailFromAllowed } from "../mail/mail-from.js";
import { DEFAULT_MAIL_FROM_DOMAINS, type SenderIdMode } from "../config.js";
import { webhookUriProblem } from "../webhooks/url-guard.js";

/** Schedule may be at most 14 days ahead (docs/api.md#send-sms). */
export const SCHEDULE_HORIZON_SECONDS = 14 * 24 * 3600;
/** A Schedule 1 hour or more in the past fails; less is sent at once (docs/api.md#send-sms). */
export const PAST_TOLERANCE_SECONDS = 3600;
/** Longest accepted Text, in characters (docs/api.md#send-sms). */
export const MAX_TEXT_CHARS = 1600;

/** The checked and normalized form of a send request. */
export interface ValidSend {
  to: E164Info;
  text: string;
  encoding: "GSM7" | "UCS2";
  numSegments: number;
  /** Whether smart encoding replaced look-alike characters in `text` (which is then the replaced text). */
  smartEncoded: boolean;
  from: string;
  /** Whether From asks for an alphanumeric ID (it may still go out leased). */
  fromKind: "E164" | "Alphanumeric" | "Blank";
  /** Requested Schedule, Unix seconds; undefined to send now. */
  schedule: number | undefined;
  /** True when the message waits for its Schedule; false when it goes out at once. */
  scheduled: boolean;
  deliveryReceipt: boolean;
  drWebhookUri: string;
  drWebhookMethod: "POST" | "GET";
  forwardToSms: string;
  forwardFromSms: string;
  forwardToEmail: string;
  forwardFromEmail: string;
  webhookUri: string;
  webhookMethod: "POST" | "GET";
  /** ValidityPeriod: seconds the message may wait in the queue from when it is due (docs/limits.md). */
  validitySeconds: number;
}

/**
 * The segments a send request is charged by the limits. A request without a text, or with one
 * surely too long to send (more UTF-16 units than twice the longest text's characters), costs one:
 * it is refused for its content anyway, and counting a huge text would cost more than refusing it.
 */
export function segmentsOf(req: SendMessageRequest, accountSmartEncoding = false): number {
  if (!req.text || req.text.length > 2 * MAX_TEXT_CHARS) return 1;
  return textEncoding(sentText(req, accountSmartEncoding).text).numSegments;
}

/**
 * docs/api.md#smart-encoding: the text that goes out, with look-alikes replaced when the send's
 * SmartEncoding (else the account's) asks for it and the result is GSM-7 and no longer than the
 * longest text; else the text as sent.
 */
export function sentText(req: SendMessageRequest, accountSmartEncoding: boolean): { text: string; replaced: boolean } {
  if (!(req.smartEncoding ?? accountSmartEncoding)) return { text: req.text, replaced: false };
  const smart = smartEncode(req.text);
  return smart.replaced && codePoints(smart.text) <= MAX_TEXT_CHARS ? smart : { text: req.text, replaced: false };
}

/** ValidityPeriod when the send gives none: 4 hours. */
export const DEFAULT_VALIDITY_SECONDS = 14_400;
/** The longest ValidityPeriod: 14 days. */
export const MAX_VALIDITY_SECONDS = 14 * 86_400;

function method(value: string): "POST" | "GET" | undefined {
  const m = value.trim().toUpperCase();
  if (m === "") return "POST";
  return m === "POST" || m === "GET" ? m : undefined;
}

/**
 * docs/api.md#leased-senders: whether a message goes out from a leased sender: From blank, or an alphanumeric
 * From to a country whose operators do not take alphanumeric IDs. Sends and forwarded replies alike.
 */
export function goesOutLeased(fromKind: ValidSend["fromKind"], to: E164Info, noAlphaCountries: ReadonlySet<string>): boolean {
  return fromKind === "Blank" || (fromKind === "Alphanumeric" && noAlphaCountries.has(to.country));
}

/** A send whose alphanumeric sender SENDER_ID_REGISTRATION checks: the recipient's country it is checked for, and how. */
export interface SenderIdCheck {
  country: string;
  mode: SenderIdMode;
}

/**
 * docs/api.md#sender-ids: whether a send's sender ID is checked against the registered ones: an
 * alphanumeric sender that goes out as itself (not leased) to a country SENDER_ID_REGISTRATION lists
 * (the recipient's country, from its prefix: common/number-country.ts). Undefined: unchecked.
 */
export function senderIdCheck(
  fromKind: ValidSend["fromKind"],
  leased: boolean,
  to: E164Info,
  registration: ReadonlyMap<string, SenderIdMode>,
): SenderIdCheck | undefined {
  if (fromKind !== "Alphanumeric" || leased || registration.size === 0) return undefined;
  const mode = registration.get(to.country);
  return mode ? { country: to.country, mode } : undefined;
}

/** The SenderIdNotRegistered message: `field`'s alphanumeric sender is not Registered to the account for the country. */
export function senderIdNotRegistered(field: "From" | "ForwardFromSms", senderId: string, country: string): string {
  return `${field} ${quoted(senderId)} is not a sender ID registered to this account for ${country}, where registration is required; apply for it (POST /v2/Accounts/{AccountSid}/SenderIds) and send once the operator has registered it, or use one of your numbers.`;
}

/**
 * docs/api.md#authentication: the account and the property must both be SMS-enabled. The SmsNotEnabled message,
 * or undefined when both are; sends and forwarded replies alike.
 */
export function smsNotEnabled(account: { sid: string; smsEnabled: boolean }, property: { sid: string; smsEnabled: boolean }): string | undefined {
  if (!account.smsEnabled) return `Account ${account.sid} is not enabled for SMS; ask the operator to enable it.`;
  if (!property.smsEnabled) return `Property ${property.sid} is not enabled for SMS; ask the operator to enable it.`;
  return undefined;
}

/** The SenderNotOwned message for an E164 sender field that is not one of the account's numbers. */
export function senderNotOwned(field: "From" | "ForwardFromSms", number: string): string {
  return `${field} ${number} is not one of this account's numbers; use one of them, an alphanumeric ID, or leave ${field} blank${field === "From" ? " for a leased sender" : " to forward from the responding party's number"}.`;
}

/**
 * The DestinationNotAllowed message for a ForwardToSms that is one of the deployment's own numbers
 * (pool or owned, any account's): the forwarded reply would arrive back as a new reply (a loop).
 */
export function forwardLoop(number: string): string {
  return `ForwardToSms ${number} is one of this service's own numbers: a reply forwarded there would come back as a new reply and be forwarded again without end. Forward to a number outside this service, or leave ForwardToSms blank.`;
}

/** The DestinationNotAllowed message for a To that is one of the deployment's own numbers. */
export function ownNumberDestination(number: string): string {
  return `To ${number} is one of this service's own numbers (a pool or an account's number): what is sent there arrives back here. Send to a number outside this service.`;
}

/** The RecipientOptedOut message for a To that opted out of the account's messages. */
export function optedOut(number: string, accountSid: string): string {
  return `To ${number} has opted out of messages from account ${accountSid} (a STOP, or the OptOuts API). Nothing was stored; a START from that number, or DELETE /v2/Accounts/${accountSid}/OptOuts/${number.slice(1)}, opts it back in.`;
}

/** The DestinationNotAllowed message for a priced account's destination its rate card has no rate for (docs/billing.md). */
export function noPrice(field: string, number: string): string {
  return `${field} ${number} has no price on this account's rate card, so it cannot be sent there: nothing was stored. Ask the operator to add a rate for its prefix.`;
}

/** The InsufficientFunds message: the send's price (micro-units) is more than the balance and credit left. */
export function insufficientFunds(price: bigint): string {
  return `The account's balance (with its credit limit) cannot cover this message's price of ${formatMoney(price)}: nothing was stored or charged. Top up the balance, then send again.`;
}

/** The InvalidSenderId message for a field that is not a valid alphanumeric sender ID (From; SenderId of a registration). */
export function alphanumericSenderProblem(field: string, value: string): string {
  return `${field} ${quoted(value)} is not a valid alphanumeric sender ID: use 1 to 11 characters of A-Z, a-z, 0-9 and spaces, with at least one letter.`;
}

/**
 * Checks a send request against the rules of docs/api.md#send-sms at `nowSeconds` and returns either
 * every field problem found or the normalized send. Sender ownership needs the database and is
 * checked by the caller. `accountSmartEncoding` is the account's SmartEncoding, which the send's own
 * SmartEncoding overrides.
 */
export function validateSend(
  req: SendMessageRequest,
  nowSeconds: number,
  opts: { webhookAllowPrivate: boolean; mailFromDomains?: readonly string[] },
  accountSmartEncoding = false,
): { problems: FieldProblem[] } | { send: ValidSend } {
  const problems: FieldProblem[] = [];
  const add = (field: string, code: FieldProblem["code"], message: string) => problems.push({ field, code, message });

  const toRaw = req.to.trim();
  const to = parseE164(toRaw);
  if (toRaw === "") add("To", "MissingParameter", "To is required: the recipient's number in E164 format, e.g. +14155550123.");
  else if (!to)
    add(
      "To",
      "InvalidRecipient",
      `To ${quoted(req.to)} is not a valid E164 number: use + and the country code, 8 to 15 digits, e.g. +14155550123.${writeItAs(toRaw)}`,
    );

  const from = req.from.trim();
  let fromKind: ValidSend["fromKind"] = "Blank";
  if (from.startsWith("+")) {
    fromKind = "E164";
    if (!parseE164(from))
      add(
        "From",
        "InvalidSenderId",
        `From ${quoted(req.from)} is not a valid E164 number; use one of your account's numbers, an alphanumeric ID, or leave From blank for a leased sender.${writeItAs(from)}`,
      );
  } else if (from !== "") {
    fromKind = "Alphanumeric";
    if (!isAlphanumericSender(from)) {
      add("From", "InvalidSenderId", alphanumericSenderProblem("From", req.from));
    }
  }

  const text = req.text;
  if (text.trim() === "") add("Text", "MissingParameter", "Text is required and must not be empty.");
  else if (text.length > MAX_TEXT_CHARS) {
    // Characters are code points: never more than UTF-16 units, so only a long text is counted
    // (spreading every text into an array of code points was ~5 % of a send's CPU).
    const chars = codePoints(text);
    if (chars > MAX_TEXT_CHARS) add("Text", "TextTooLong", `Text is ${chars} characters long; the limit is ${MAX_TEXT_CHARS}.`);
  }

  let schedule: number | undefined;
  let scheduled = false;
  if (req.schedule !== undefined) {
    const s = Number(req.schedule);
    if (s > nowSeconds + SCHEDULE_HORIZON_SECONDS) {
      add("Schedule", "InvalidSchedule", "Schedule is more than 14 days in the future.");
    } else if (nowSeconds - s >= PAST_TOLERANCE_SECONDS) {
      add("Schedule", "ScheduleInPast", "Schedule is 1 hour or more in the past; omit it to send now, or use a time within the next 14 days.");
    } else {
      schedule = s;
      scheduled = s > nowSeconds;
    }
  }

  const uri = (field: string, value: string) => {
    const v = value.trim();
    if (v === "") return "";
    const problem = webhookUriProblem(v, opts.webhookAllowPrivate);
    if (problem) add(field, "InvalidWebhookUri", `${field} ${problem}.`);
    return v;
  };
  const meth = (field: string, value: string) => {
    const m = method(value);
    if (!m) add(field, "InvalidWebhookMethod", `${field} must be POST or GET.`);
    return m ?? "POST";
  };
  const drWebhookUri = uri("DeliveryReceiptWebhookUri", req.deliveryReceiptWebhookUri);
  const drWebhookMethod = meth("DeliveryReceiptWebhookMethod", req.deliveryReceiptWebhookMethod);
  const webhookUri = uri("WebhookUri", req.webhookUri);
  const webhookMethod = meth("WebhookMethod", req.webhookMethod);

  const forwardToSms = req.forwardToSms.trim();
  if (forwardToSms !== "" && !parseE164(forwardToSms)) {
    add(
      "ForwardToSms",
      "InvalidRecipient",
      `ForwardToSms ${quoted(req.forwardToSms)} is not a valid E164 number, e.g. +14155550123.${writeItAs(forwardToSms)}`,
    );
  }
  const forwardFromSms = req.forwardFromSms.trim();
  if (forwardFromSms !== "" && !(forwardFromSms.startsWith("+") ? parseE164(forwardFromSms) : isAlphanumericSender(forwardFromSms))) {
    add(
      "ForwardFromSms",
      "InvalidSenderId",
      `ForwardFromSms must be an E164 number or an alphanumeric sender ID of 1 to 11 characters (A-Z, a-z, 0-9, spaces, at least one letter).${forwardFromSms.startsWith("+") ? writeItAs(forwardFromSms) : ""}`,
    );
  }
  const forwardToEmail = req.forwardToEmail.trim();
  if (forwardToEmail !== "" && !isEmail(forwardToEmail))
    add("ForwardToEmail", "InvalidEmail", `ForwardToEmail ${quoted(req.forwardToEmail)} is not a valid e-mail address.`);
  const forwardFromEmail = req.forwardFromEmail.trim();
  const mailFromDomains = opts.mailFromDomains ?? DEFAULT_MAIL_FROM_DOMAINS;
  if (forwardFromEmail !== "" && !isEmail(forwardFromEmail))
    add("ForwardFromEmail", "InvalidEmail", `ForwardFromEmail ${quoted(req.forwardFromEmail)} is not a valid e-mail address.`);
  else if (forwardFromEmail !== "" && !mailFromAllowed(forwardFromEmail, mailFromDomains)) {
    // Our mail server sends as the operator: any other domain would let one client spoof another's mail.
    add(
      "ForwardFromEmail",
      "InvalidEmail",
      `ForwardFromEmail ${quoted(req.forwardFromEmail)} is not in a domain this service sends mail from; allowed domains: ${mailFromDomains.join(", ")}. Leave it blank to send from the no-reply address.`,
    );
  }

  const validity = req.validityPeriod ?? DEFAULT_VALIDITY_SECONDS;
  if (!(validity >= 1 && validity <= MAX_VALIDITY_SECONDS)) {
    add("ValidityPeriod", "InvalidParameter", `ValidityPeriod must be 1 to ${MAX_VALIDITY_SECONDS} seconds (14 days); got ${validity}.`);
  }

  if (problems.length > 0 || !to) return { problems };
  const sent = sentText(req, accountSmartEncoding);
  const { encoding, numSegments } = textEncoding(sent.text);
  return {
    send: {
      to,
      text: sent.text,
      encoding,
      numSegments,
      smartEncoded: sent.replaced,
      from,
      fromKind,
      schedule,
      scheduled,
      deliveryReceipt: req.deliveryReceipt ?? true,
      drWebhookUri,
      drWebhookMethod,
      forwardToSms,
      forwardFromSms,
      forwardToEmail,
      forwardFromEmail,
      webhookUri,
      webhookMethod,
      validitySeconds: validity,
    },
  };
}
