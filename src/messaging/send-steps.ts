import { createHash } from "node:crypto";
import { create, type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { type Message as MessagePb, MessageSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { wrongCredentials } from "../accounts/auth.js";
import type { AccountLimitFields } from "../limits/account-limits.js";
import { apiError, fieldError, type FieldProblem, notFound } from "../common/errors.js";
import { type ClaimedRow, SEND_FACTS, type SendFacts } from "./message-store.js";
import { forwardLoop, optedOut, ownNumberDestination, senderNotOwned, smsNotEnabled, type ValidSend } from "./send-rules.js";

/**
 * The rules of a send that need data, in the order a send is judged, each written once: which
 * facts (read for the whole batch by one statement, message-store.ts `sendFactsAndStore`) it
 * needs to be, and what a send is refused with when one is not. The pipeline
 * (send-pipeline.ts) reads the facts and judges each send here; where it stores in the same
 * statement, the statement stores exactly the sends whose facts are what these rules need of them.
 * A new rule that needs data is one entry of RULES (and its fact, if new, in sb_send_facts.sql).
 */

/** An Idempotency-Key is remembered this long (docs/api.md#idempotency-key). */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** One send on its way through the pipeline. */
export interface SendItem {
  /**
   * The account; tokenHash is the one the edge authenticated, re-checked against the database (none
   * for a forward); allowedCountries its AllowedCountries as authenticated.
   */
  account: { sid: string; tokenHash?: string; allowedCountries?: readonly string[]; smartEncoding?: boolean } & Omit<AccountLimitFields, "sid">;
  propertySid: string;
  /** The result of validateSend: reported only after the property and the key, as the docs order them. */
  checked: { problems: FieldProblem[] } | { send: ValidSend };
  /** Whether the message goes out from a leased sender (From blank, or alphanumeric where not taken). */
  leased: boolean;
  idemKey?: string;
  /** With idemKey: the fingerprint of the request (requestHash), which a repeat must match. */
  idemHash?: string;
  now: Date;
  /** The new message's Sid. */
  sid: string;
  /**
   * A send of the service's own (service-sends.ts): the forward of a reply by SMS, or (`answer`) the
   * answer to a keyword. It answers no client, so a refused one is kept as a Failed message with the
   * rule's ErrorCode. `inReplyTo`: the reply it forwards or answers (null: a keyword to an owned
   * number). `relay`: From is not the account's to own (the responding party's own number, no
   * ForwardFromSms; or the number a keyword was texted to). `draft`: the send to keep when refused.
   */
  forward?: { inReplyTo: string | null; relay: boolean; draft: ValidSend; answer?: boolean };
  /**
   * Set when the send is due now and this process's dispatcher has room for it (claim-at-accept.ts):
   * the message is stored already claimed until then, and handed to that dispatcher after the commit.
   */
  claimedUntil?: Date;
}

/** The facts a rule needs, by SEND_FACTS name. */
export type Needs = Partial<Pick<SendFacts, (typeof SEND_FACTS)[number][0]>>;

/** A rule that needs data. */
export interface DataRule {
  name: string;
  /** What the facts must be for the send to pass (none listed: the rule does not apply to it). */
  needs(item: SendItem, send: ValidSend): Needs;
  refuse(item: SendItem, send: ValidSend): ConnectError;
}

/** A rule judged whether or not the request itself is valid. */
export interface AccessRule {
  name: string;
  needs(item: SendItem): Needs;
  refuse(item: SendItem): ConnectError;
}

// The needs that do not depend on the send, made once: a rule's needs are asked for every send
// twice (the statement's wanted facts, then the judgement of its answer), so fresh objects would
// be garbage on every call. Frozen: callers only read them (neededFacts copies them).
const NO_NEEDS: Needs = Object.freeze({});
const PROPERTY_FOUND: Needs = Object.freeze({ property_found: true });
const ACCOUNT_SMS: Needs = Object.freeze({ account_sms: true });
const PROPERTY_SMS: Needs = Object.freeze({ property_sms: true });
const SENDER_OWNED: Needs = Object.freeze({ sender_owned: true });
const FORWARD_FROM_OWNED: Needs = Object.freeze({ forward_from_owned: true });
const FORWARD_TO_NOT_OURS: Needs = Object.freeze({ forward_to_ours: false });
const RECIPIENT_NOT_OURS: Needs = Object.freeze({ recipient_ours: false });
const NOT_OPTED_OUT: Needs = Object.freeze({ opted_out: false });

/** The rules checked before the Idempotency-Key and the request's own problems: who asks, for which property. */
export const ACCESS_RULES: readonly AccessRule[] = [
  {
    // The token was rotated (maybe by another process) after the edge authenticated it.
    name: "credentials",
    needs: (item) => (item.account.tokenHash === undefined ? NO_NEEDS : { token_hash: item.account.tokenHash }),
    refuse: () => wrongCredentials(),
  },
  { name: "property", needs: () => PROPERTY_FOUND, refuse: (item) => notFound("Property", item.propertySid) },
];

/** The rules checked after the key and the request's own problems, in order. */
export const RULES: readonly DataRule[] = [
  {
    name: "account enabled",
    needs: () => ACCOUNT_SMS,
    refuse: (item) => apiError("SmsNotEnabled", smsNotEnabled({ sid: item.account.sid, smsEnabled: false }, { sid: item.propertySid, smsEnabled: true })!),
  },
  {
    name: "property enabled",
    needs: () => PROPERTY_SMS,
    refuse: (item) => apiError("SmsNotEnabled", smsNotEnabled({ sid: item.account.sid, smsEnabled: true }, { sid: item.propertySid, smsEnabled: false })!),
  },
  {
    name: "sender owned",
    needs: (item, send) => (send.fromKind === "E164" && !item.forward?.relay ? SENDER_OWNED : NO_NEEDS),
    refuse: (item, send) => fieldError("From", "SenderNotOwned", senderNotOwned("From", send.from)),
  },
  {
    // Replies are forwarded from this number: it must be the account's own, as a From would.
    name: "forward sender owned",
    needs: (_item, send) => (send.forwardFromSms.startsWith("+") ? FORWARD_FROM_OWNED : NO_NEEDS),
    refuse: (_item, send) => fieldError("ForwardFromSms", "SenderNotOwned", senderNotOwned("ForwardFromSms", send.forwardFromSms)),
  },
  {
    // A reply forwarded to one of our own numbers would come back in as a new reply: a loop.
    name: "forward destination not ours",
    needs: (_item, send) => (send.forwardToSms !== "" ? FORWARD_TO_NOT_OURS : NO_NEEDS),
    refuse: (_item, send) => fieldError("ForwardToSms", "DestinationNotAllowed", forwardLoop(send.forwardToSms)),
  },
  {
    // The deployment's own numbers are never a destination: what arrives there is this service.
    // For a forward, To is the lease's ForwardToSms (it may have become ours since the send).
    name: "destination not ours",
    needs: () => RECIPIENT_NOT_OURS,
    refuse: (item, send) =>
      item.forward && !item.forward.answer
        ? fieldError("ForwardToSms", "DestinationNotAllowed", forwardLoop(send.to.number))
        : fieldError("To", "DestinationNotAllowed", ownNumberDestination(send.to.number)),
  },
  {
    // A STOP (or the API) opted the recipient out of this account's messages; other accounts still send.
    // A keyword's answer is what the handset asked for: a STOP is confirmed, a HELP answered.
    name: "recipient not opted out",
    needs: (item) => (item.forward?.answer ? NO_NEEDS : NOT_OPTED_OUT),
    refuse: (item, send) => fieldError("To", "RecipientOptedOut", optedOut(send.to.number, item.account.sid)),
  },
];

/** The first rule of `rules` whose needs the facts do not meet, if any. */
function firstUnmet<R>(rules: readonly R[], facts: SendFacts, needsOf: (rule: R) => Needs): R | undefined {
  for (const rule of rules) {
    const needs = needsOf(rule);
    for (const fact in needs) if (facts[fact as keyof Needs] !== needs[fact as keyof Needs]) return rule;
  }
  return undefined;
}

/** The access failure of a send (before its key): wrong credentials or not the account's property. */
export function accessRefusal(item: SendItem, facts: SendFacts): ConnectError | undefined {
  return firstUnmet(ACCESS_RULES, facts, (r) => r.needs(item))?.refuse(item);
}

/** The failure of a send's rules once its key is settled: the request's own problems, then RULES. */
export function ruleRefusal(item: SendItem, facts: SendFacts, problems: (p: FieldProblem[]) => ConnectError): ConnectError | undefined {
  if ("problems" in item.checked) return problems(item.checked.problems);
  const send = item.checked.send;
  return firstUnmet(RULES, facts, (r) => r.needs(item, send))?.refuse(item, send);
}

/** Every fact value a send needs, by every rule that applies to it: what the storing statement compares. */
export function neededFacts(item: SendItem): Needs {
  const needs: Needs = {};
  for (const rule of ACCESS_RULES) Object.assign(needs, rule.needs(item));
  if ("send" in item.checked) for (const rule of RULES) Object.assign(needs, rule.needs(item, item.checked.send));
  return needs;
}

/**
 * The fingerprint an Idempotency-Key remembers: SHA-256 of the method's name and the request
 * message's protobuf binary. Taken from the decoded message, not the bytes sent, so the same
 * request over REST, Connect or gRPC, in any field order or spelling, matches; unknown fields of a
 * binary client are left out, since the service ignores them too.
 */
export function requestHash<Desc extends DescMessage>(method: string, schema: Desc, request: MessageShape<Desc>): string {
  return createHash("sha256")
    .update(method)
    .update("\n")
    .update(toBinary(schema, request, { writeUnknownFields: false }))
    .digest("hex");
}

/** The Message a stored send is answered with. */
export function sentMessage(item: SendItem, send: ValidSend, sender: string): MessagePb {
  return create(MessageSchema, {
    messageSid: item.sid,
    accountSid: item.account.sid,
    propertySid: item.propertySid,
    from: sender,
    to: send.to.number,
    text: send.text,
  });
}

/**
 * A send stored claimed (item.claimedUntil), as the dispatcher's claim would have returned its row:
 * the same values messageRow stored; SMS enabled, since the storing statement required it.
 */
export function claimedRow(item: SendItem, send: ValidSend, sender: string): ClaimedRow {
  return {
    sid: item.sid,
    account_sid: item.account.sid,
    sender,
    recipient: send.to.number,
    text: send.text,
    delivery_receipt: send.deliveryReceipt,
    attempts: 1,
    send_at: item.now,
    scheduled_at: send.schedule === undefined ? null : new Date(send.schedule * 1000),
    created_at: item.now,
    sms_enabled: true,
    allowed_countries: null,
  };
}

/** One message's values, in MESSAGE_COLUMNS order: a send to go out, or (with an errorCode) a refused forward kept as Failed. */
export function messageRow(item: SendItem, send: ValidSend, lease: { sender: string; leaseSid: string } | undefined, errorCode = ""): unknown[] {
  // Lease options are kept only where a reply can come back: through a leased sender.
  const leased = lease !== undefined;
  // Stored claimed (only a send due now): exactly what the dispatcher's claim sets; its status is already Processing.
  const claimedUntil = errorCode === "" && !send.scheduled ? (item.claimedUntil ?? null) : null;
  return [
    item.sid,
    item.account.sid,
    item.propertySid,
    "Transmit",
    errorCode !== "" ? "Failed" : send.scheduled ? "Scheduled" : "Processing",
    leased ? "Leased" : send.fromKind === "E164" ? "E164" : "Alphanumeric",
    lease ? lease.sender : send.from,
    send.to.number,
    send.text,
    send.encoding,
    send.numSegments,
    send.smartEncoded,
    send.deliveryReceipt,
    send.drWebhookUri,
    send.drWebhookMethod,
    leased ? send.forwardToSms : "",
    leased ? send.forwardFromSms : "",
    leased ? send.forwardToEmail : "",
    leased ? send.forwardFromEmail : "",
    leased ? send.webhookUri : "",
    leased ? send.webhookMethod : "POST",
    lease?.leaseSid ?? null,
    item.forward?.inReplyTo ?? null,
    errorCode,
    send.schedule === undefined ? null : new Date(send.schedule * 1000),
    send.scheduled ? new Date(send.schedule! * 1000) : item.now,
    item.now,
    // ValidityPeriod, from when it is due (its Schedule, or now).
    new Date((send.scheduled ? send.schedule! * 1000 : item.now.getTime()) + send.validitySeconds * 1000),
    claimedUntil,
    claimedUntil ? 1 : 0,
  ];
}
