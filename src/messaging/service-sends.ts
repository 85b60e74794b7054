/**
 * The sends the service makes on an account's behalf, from an inbound SMS (delivery/inbound.ts): the
 * forward of a reply by SMS and the answer to a STOP, START or HELP. Each is a send of that account
 * and runs the one send pipeline's steps (send-pipeline.ts), after the reply's transaction. That
 * transaction writes it to an outbox (`service_send_outbox`, queueServiceSend): the transaction that
 * stores its message (Processing or Failed) deletes that row, and one that finds the row gone (another
 * process stored it) stores nothing and gives the admitted quota back. What a stopped process left is
 * sent by the delivery engine's sweep (delivery/service-send-sweep.ts), exactly once.
 *
 *  1. admit     the account's request rate and daily quota (limits/account-limits.ts), as any send:
 *               charged to the same shared buckets, given back if nothing is stored
 *  2. validate  the destination permissions (destination-rules.ts: AllowedCountries, blocked
 *               prefixes, premium numbers) with the account's AllowedCountries as stored now
 *  4-11         facts, rules, lease, store, in a transaction of their own (send-pipeline.ts sendJudge)
 *
 * A send refused at any step is not sent: it is kept as a Failed message with the step's ErrorCode
 * (RateLimited, QuotaExceeded, DestinationNotAllowed, SmsNotEnabled, ...), which ListMessages and
 * the operator's views show (docs/decisions.md).
 */
import { randomBytes } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import type { EntityManager, MikroORM } from "@mikro-orm/sql";
import { findAccountBySid } from "../accounts/account-store.js";
import { errorCodeOf } from "../common/errors.js";
import type { ItemOutcome } from "../common/group-commit.js";
import { canonicalE164, parseE164, type E164Info } from "../common/phone.js";
import { newSid } from "../common/sid.js";
import { textEncoding } from "../common/sms-text.js";
import type { DestinationConfig, SenderIdMode } from "../config.js";
import { type AccountLimitFields, type AdmitLimits, type Admitted, NOT_CHARGED } from "../limits/account-limits.js";
import { insertMessages } from "./message-send-store.js";
import { deleteServiceSend, insertServiceSend, type QueuedServiceSend, takeServiceSend } from "./service-send-outbox-store.js";
import { DEFAULT_SENDER_ID_REGISTRATIONS, destinationChecked, NO_DESTINATION_LIMITS, NO_OPTIONS } from "./send-defaults.js";
import type { SendJudge, SendOutcome } from "./send-pipeline.js";
import { goesOutLeased, senderIdCheck, type ValidSend } from "./send-rules.js";
import { messageRow } from "./send-rows.js";
import type { SendItem } from "./send-steps.js";

/** What the service's sends need: the database, the admit step's limits (undefined: none) and the deployment's rules. */
export interface ServiceSendDeps {
  orm: MikroORM;
  limits?: AdmitLimits;
  /** Countries whose operators do not take alphanumeric sender IDs. */
  noAlphaCountries: ReadonlySet<string>;
  /** SENDER_ID_REGISTRATION (default AU=require): a forward from an alphanumeric ForwardFromSms is checked as a send's From. */
  senderIdRegistration?: ReadonlyMap<string, SenderIdMode>;
  /** The deployment's destination permissions; default: every country, no blocked prefix, no premium numbers. */
  destinations?: DestinationConfig;
  /** Steps 4 to 10 under the deployment's rules (send-pipeline.ts sendJudge). */
  judge: SendJudge;
  /** DEFAULT_RATE_CARD: a service send is priced and charged as the account's own sends. */
  defaultRateCard?: string;
}

/** What became of a service send: queued (Processing), or kept Failed with the refusal's ErrorCode. */
export interface ServiceSendOutcome {
  messageSid: string;
  status: "Processing" | "Failed";
  errorCode: string;
}

/** What the forward of a reply by SMS is made of (delivery/inbound.ts). */
export interface ReplyForward {
  accountSid: string;
  propertySid: string;
  /** The lease's ForwardToSms: where the reply goes. */
  forwardToSms: string;
  /** The lease's ForwardFromSms; blank: the responding party's number. */
  forwardFromSms: string;
  /** The responding party's number and the reply's text. */
  replyFrom: string;
  text: string;
  replySid: string;
  now: Date;
}

/** The answer to a keyword (delivery/inbound-keywords.ts): from the number the keyword was texted to, to the handset. */
export interface KeywordAnswer {
  sid: string;
  accountSid: string;
  propertySid: string;
  /** The number the keyword was texted to (a lease of the account's, or one of its own numbers). */
  from: string;
  /** The handset, an E164 number (anything else is never answered). */
  to: string;
  text: string;
  /** The stored reply it answers; null for a keyword to one of the account's own numbers. */
  inReplyTo: string | null;
  now: Date;
}

/**
 * The forward of a reply by SMS: a send of the lease's account and property, every step, taking its
 * outbox row `outboxId` in the transaction that stores it. Undefined when the account is gone (the
 * row is deleted) or the row was already taken (its message stored by another process).
 */
export async function forwardReply(deps: ServiceSendDeps, f: ReplyForward, outboxId: string): Promise<ServiceSendOutcome | undefined> {
  const from = f.forwardFromSms || f.replyFrom;
  // A lease stored before numbers had one spelling may hold another: the canonical one is checked and sent to.
  const to = parseE164(canonicalE164(f.forwardToSms) ?? f.forwardToSms);
  const { encoding, numSegments } = textEncoding(f.text || " ");
  const draft: ValidSend = {
    ...NO_OPTIONS,
    to: to ?? ({ number: f.forwardToSms, country: "" } satisfies E164Info),
    text: f.text,
    encoding,
    numSegments,
    // A reply is forwarded as the handset wrote it (docs/api.md#smart-encoding).
    smartEncoded: false,
    from,
    fromKind: from.startsWith("+") ? "E164" : "Alphanumeric",
  };
  const leased = to !== undefined && draft.fromKind === "Alphanumeric" && goesOutLeased("Alphanumeric", to, deps.noAlphaCountries);
  return serviceSend(deps, outboxId, f.accountSid, draft, "ForwardToSms", (account) => ({
    account,
    propertySid: f.propertySid,
    // An invalid To was refused when the message was sent; kept for rows stored before that check.
    checked: to
      ? { send: draft }
      : { problems: [{ field: "ForwardToSms", code: "InvalidRecipient", message: `ForwardToSms ${f.forwardToSms} is not a valid E164 number.` }] },
    leased,
    // An alphanumeric ForwardFromSms is checked for ForwardToSms's country, as a send's From for To's.
    senderIdCheck: to ? senderIdCheck(draft.fromKind, leased, to, deps.senderIdRegistration ?? DEFAULT_SENDER_ID_REGISTRATIONS) : undefined,
    now: f.now,
    sid: newSid("MG"),
    forward: { inReplyTo: f.replySid, relay: f.forwardFromSms === "", draft },
  }));
}

/**
 * The answer to a keyword: a send of the account, from the number the keyword came to (not the
 * account's to own: a pool number leased to the handset, or one of its own), every step. The
 * recipient's opt-out does not refuse it (it is what the handset asked for: a STOP is confirmed).
 * Undefined when the account is gone or the outbox row `outboxId` was already taken (as forwardReply).
 */
export async function answerKeyword(deps: ServiceSendDeps, a: KeywordAnswer, outboxId: string): Promise<ServiceSendOutcome | undefined> {
  const to = parseE164(a.to);
  if (!to) throw new Error(`answerKeyword: ${JSON.stringify(a.to)} is not an E164 number (the caller answers only those)`);
  const { encoding, numSegments } = textEncoding(a.text);
  const draft: ValidSend = { ...NO_OPTIONS, to, text: a.text, encoding, numSegments, smartEncoded: false, from: a.from, fromKind: "E164" };
  return serviceSend(deps, outboxId, a.accountSid, draft, "To", (account) => ({
    account,
    propertySid: a.propertySid,
    checked: { send: draft },
    leased: false,
    now: a.now,
    sid: a.sid,
    forward: { inReplyTo: a.inReplyTo, relay: true, draft, answer: true },
  }));
}

/**
 * The steps of a service send: admit, validate, then 4 to 11 in a transaction that first takes the
 * send's outbox row; a refusal kept as a Failed message. Undefined when the account is gone (its row
 * deleted) or the row was already taken (nothing stored, the admitted quota given back).
 */
async function serviceSend(
  deps: ServiceSendDeps,
  outboxId: string,
  accountSid: string,
  draft: ValidSend,
  field: "To" | "ForwardToSms",
  itemOf: (account: SendItem["account"]) => SendItem,
): Promise<ServiceSendOutcome | undefined> {
  // The account as stored now: its limits and AllowedCountries (what a send's edge authenticates with).
  const stored = await findAccountBySid(deps.orm.em.fork(), accountSid);
  if (!stored) {
    await deleteServiceSend(deps.orm.em.fork(), outboxId);
    return undefined;
  }
  const limitFields: AccountLimitFields = {
    sid: stored.sid,
    sendRatePerSecond: stored.sendRatePerSecond,
    sendRateBurst: stored.sendRateBurst,
    dailySegmentQuota: stored.dailySegmentQuota,
  };
  const item = itemOf({ ...limitFields, allowedCountries: stored.allowedCountries });
  item.defaultRateCard = deps.defaultRateCard;
  // Step 1.
  let admitted: Admitted = NOT_CHARGED;
  let refused: ConnectError | undefined;
  if (deps.limits) {
    try {
      admitted = await deps.limits.admit(limitFields, () => draft.numSegments);
    } catch (err) {
      if (!(err instanceof ConnectError)) throw err;
      refused = err;
    }
  }
  // Step 2: the destination permissions, as for the To of a send.
  item.checked = destinationChecked(item.checked, field, stored.allowedCountries, deps.destinations ?? NO_DESTINATION_LIMITS);
  let outcome: ItemOutcome<SendOutcome> | typeof TAKEN;
  try {
    outcome = await deps.orm.em.fork().transactional(async (tx) => {
      // Stored once: the transaction that deletes the outbox row stores the message; the row gone,
      // another process (or the sweep) stored it, and this one stores nothing.
      if (!(await takeServiceSend(tx, outboxId))) return TAKEN;
      if (refused === undefined) {
        const judged = (await deps.judge.judgeBatch(tx, [item]))[0];
        // Nothing stored (no refusal to keep): rolled back, the row stays for the sweep to try again.
        if (!judged.ok && !(judged.error instanceof ConnectError)) throw judged.error;
        return judged;
      }
      // Refused by the admit step: kept as Failed, with nothing else read or written.
      await insertMessages(tx, [messageRow(item, draft, undefined, errorCodeOf(refused))]);
      return { ok: false as const, error: refused };
    });
  } catch (err) {
    admitted(() => draft.numSegments);
    throw err;
  }
  if (outcome !== TAKEN && outcome.ok) return { messageSid: item.sid, status: "Processing", errorCode: "" };
  // Not sent (or sent by another process): its segments do not count against the day's quota.
  admitted(() => draft.numSegments);
  if (outcome === TAKEN) return undefined;
  if (!(outcome.error instanceof ConnectError)) throw outcome.error;
  return { messageSid: item.sid, status: "Failed", errorCode: errorCodeOf(outcome.error) };
}

/** The outbox row was already taken: another process stored the message. */
const TAKEN = Symbol("taken");

/** A service send waiting in the outbox: the forward of a reply or the answer to a keyword, with its row's id. */
export type PendingServiceSend = { outboxId: string; kind: "forward"; forward: ReplyForward } | { outboxId: string; kind: "answer"; answer: KeywordAnswer };

/**
 * Writes the forward of a reply (or the answer to a keyword) to the outbox in the inbound SMS's
 * transaction: committed with the reply, it is sent once, by this process after the commit
 * (sendQueued) or by the sweep. Returns the row's id.
 */
export async function queueServiceSend(tx: EntityManager, send: { forward: ReplyForward } | { answer: KeywordAnswer }, createdAt: Date): Promise<string> {
  const id = `ss_${randomBytes(18).toString("base64url")}`;
  const [kind, body] = "forward" in send ? (["forward", send.forward] as const) : (["answer", send.answer] as const);
  await insertServiceSend(tx, { id, kind, accountSid: body.accountSid, payload: { ...body, now: body.now.toISOString() }, createdAt });
  return id;
}

/** An outbox row as the sweep claimed it, as the send it holds. */
export function pendingOf(row: QueuedServiceSend): PendingServiceSend {
  const payload = (typeof row.payload === "string" ? JSON.parse(row.payload) : row.payload) as Record<string, unknown>;
  const now = new Date(payload.now as string);
  if (row.kind === "forward") return { outboxId: row.id, kind: "forward", forward: { ...(payload as unknown as ReplyForward), now } };
  return { outboxId: row.id, kind: "answer", answer: { ...(payload as unknown as KeywordAnswer), now } };
}

/** Sends what an outbox row holds (forwardReply or answerKeyword). */
export function sendQueued(deps: ServiceSendDeps, p: PendingServiceSend): Promise<ServiceSendOutcome | undefined> {
  return p.kind === "forward" ? forwardReply(deps, p.forward, p.outboxId) : answerKeyword(deps, p.answer, p.outboxId);
}
