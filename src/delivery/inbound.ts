import type { EntityManager } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { InboundSms } from "./carrier.js";
import { unixSeconds } from "../common/clock.js";
import { canonicalE164 } from "../common/phone.js";
import { newSid } from "../common/sid.js";
import { storableText } from "../common/string-guard.js";
import { findSmppCredentials } from "../accounts/smpp-store.js";
import { findLiveLeaseMatch, wasEverLeased } from "../leases/lease-store.js";
import { insertInboundMessage } from "../messaging/message-store.js";
import { findNumber } from "../numbers/number-store.js";
import { keywordOf } from "../optouts/keywords.js";
import { answerKeyword, forwardReply, queueServiceSend, type ReplyForward, type ServiceSendDeps, type ServiceSendOutcome } from "../messaging/service-sends.js";
import { textEncoding } from "../common/sms-text.js";
import { NO_REPLY_EMAIL } from "../config.js";
import { enqueueEmail } from "../mail/mail-outbox.js";
import { enqueueWebhook } from "../webhooks/outbox.js";
import { insertUnmatchedInbound } from "./unmatched-inbound-store.js";
import { queueSmppReply } from "../messaging/smpp-outbox-store.js";
import { applyKeyword, applyKeywordToOwnedNumber, type KeywordOutcome } from "./inbound-keywords.js";

/** The no-reply sender of forwarded e-mails; it lives with the mail sender rules (mail/mail-from.ts). */
export { NO_REPLY_EMAIL };

/** What became of an inbound SMS. */
export interface InboundResult {
  messageSid: string;
  inReplyTo: string;
  /** The forwarded SMS, once sent (sendAfterCommit): queued (Processing), or Failed and why. */
  forward?: ServiceSendOutcome;
  /** The keyword the SMS was (STOP, START, HELP) and its answer, when the account acted on it. */
  keyword?: KeywordOutcome;
  /** The keyword's answer, once sent (sendAfterCommit): queued (Processing), or Failed and why. */
  answer?: ServiceSendOutcome;
  /** The forward the reply asked for, to send once its transaction has committed (sendAfterCommit). */
  pendingForward?: ReplyForward;
  /**
   * The outbox rows (service_send_outbox) of the forward and of the keyword's answer, written in the
   * SMS's transaction: sendAfterCommit's sends take them; what a stopped process left, the sweep sends.
   */
  outbox?: { forward?: string; answer?: string };
}

/** What receiveInbound needs besides the SMS. */
export interface InboundOptions {
  /** Where a reply not forwarded because it came from one of our own numbers is noted (info), and keywords not answered. */
  log?: Logger;
}

/**
 * The sends an inbound SMS asked for, once its transaction has committed: the forward by SMS and
 * the keyword's answer, each a send of the account through the send pipeline (admit, validate,
 * rules, store: messaging/service-sends.ts). A refused one is kept as a Failed message and logged
 * (warn); `result` gets their outcomes. Each is in the outbox (service_send_outbox, written in the
 * SMS's transaction) until the transaction that stores its message deletes the row: a process that
 * stops between the commit and these sends, or a send that fails here, leaves the row, and the
 * delivery engine's sweep (service-send-sweep.ts) sends it after a grace period, exactly once.
 */
export async function sendAfterCommit(deps: ServiceSendDeps, result: InboundResult, log?: Logger): Promise<InboundResult> {
  // The reply is committed: a send that fails here is logged, not thrown (the carrier would deliver
  // the reply again); its outbox row stays for the sweep.
  const attempt = async (what: string, send: () => Promise<void>) => {
    try {
      await send();
    } catch (err) {
      log?.error({ err, messageSid: result.messageSid, inReplyTo: result.inReplyTo }, `${what} not sent: the send pipeline failed`);
    }
  };
  const pendingForward = result.pendingForward;
  const forwardRow = result.outbox?.forward;
  if (pendingForward && forwardRow)
    await attempt("forward of a reply by SMS", async () => {
      const forward = await forwardReply(deps, pendingForward, forwardRow);
      if (forward) result.forward = forward;
      if (forward?.status === "Failed")
        log?.warn(
          { messageSid: result.messageSid, inReplyTo: result.inReplyTo, forwardSid: forward.messageSid, errorCode: forward.errorCode },
          "reply not forwarded by SMS: the send pipeline refused it (kept as a Failed message)",
        );
    });
  const keyword = result.keyword;
  const pending = keyword?.answer;
  const answerRow = result.outbox?.answer;
  if (keyword && pending && answerRow)
    await attempt("keyword answer", async () => {
      const answer = await answerKeyword(deps, pending, answerRow);
      if (answer) result.answer = answer;
      if (answer?.status === "Failed")
        log?.warn(
          { accountSid: pending.accountSid, answerSid: answer.messageSid, inReplyTo: pending.inReplyTo, kind: keyword.kind, errorCode: answer.errorCode },
          "keyword not answered: the send pipeline refused the answer (kept as a Failed message)",
        );
    });
  return result;
}

/**
 * Stores an inbound SMS as a Received message of the account whose live lease it answers
 * (from = the lease's recipient, to = the leased pool number) and, in the same transaction,
 * queues what the outbound message asked for: the Response webhook and a forwarded e-mail (through
 * the mail outbox); a forwarded SMS is written to the service sends' outbox and returned
 * (pendingForward) for sendAfterCommit. An SMS that matches
 * no live lease (none, expired or released) is kept in unmatched_inbound for the operator and not
 * forwarded, but one to an account's own number when that account chose SMPP for its replies, which
 * is stored as its Received message for its binds (receiveForSmppBinds). A reply from one of the deployment's own
 * numbers is stored (and its Response webhook queued) but never forwarded, by SMS or e-mail:
 * whatever answers there is this service, and a forward could come back again without end.
 * A keyword (STOP, START, HELP) that reaches an account, as a reply to its lease or an SMS to one
 * of its own numbers, changes its opt-out list in the same transaction, and its answer is written
 * to the outbox and returned (keyword.answer) for sendAfterCommit (inbound-keywords.ts).
 */
export async function receiveInbound(em: EntityManager, received: InboundSms, now: Date, opts: InboundOptions): Promise<InboundResult> {
  // Anyone on the network can send any UCS-2 units: a NUL or an unpaired surrogate must not fail the insert.
  // A number in its one spelling (a carrier's `+610412345678` is `+61412345678`), as every send,
  // lease and opt-out stores it; what is no number (an alphanumeric sender) stays as it came.
  const from = canonicalE164(received.from);
  const sms = { ...received, from: from ?? received.from, to: canonicalE164(received.to) ?? received.to, text: storableText(received.text) };
  // E164-shaped but no number libphonenumber knows (a new range) is still a handset's number.
  const fromNumber = from !== undefined || /^\+[1-9]\d{7,14}$/.test(sms.from);
  return em.transactional(async (tx) => {
    const lease = await findLiveLeaseMatch(tx, sms.to, sms.from, sms.at);
    if (!lease) {
      const owned = await receiveForSmppBinds(tx, sms, now, fromNumber, opts.log);
      if (owned) {
        const answer = owned.keyword?.answer ? await queueServiceSend(tx, { answer: owned.keyword.answer }, now) : undefined;
        return { messageSid: owned.sid, inReplyTo: "", ...(owned.keyword ? { keyword: owned.keyword } : {}), ...(answer ? { outbox: { answer } } : {}) };
      }
      const reason = (await wasEverLeased(tx, sms.to, sms.from)) ? "LeaseEnded" : "NoLease";
      await insertUnmatchedInbound(tx, { sender: sms.from, recipient: sms.to, text: sms.text, receivedAt: sms.at, reason });
      // An SMS to one of an account's own numbers reaches that account: a keyword acts and is answered,
      // when it came from a number (an alphanumeric sender can be neither opted out nor answered).
      const keyword = !fromNumber ? undefined : await applyKeywordToOwnedNumber(tx, { from: sms.from, to: sms.to, text: sms.text, now }, opts.log);
      const answer = keyword?.answer ? await queueServiceSend(tx, { answer: keyword.answer }, now) : undefined;
      return { messageSid: "", inReplyTo: "", ...(keyword ? { keyword } : {}), ...(answer ? { outbox: { answer } } : {}) };
    }
    const sid = await storeReceived(tx, sms, { accountSid: lease.account_sid, propertySid: lease.property_sid, inReplyTo: lease.message_sid }, now);
    // Not from one of our own numbers: whatever answers there is this service.
    const keyword = lease.recipient_ours
      ? undefined
      : await applyKeyword(
          tx,
          {
            accountSid: lease.account_sid,
            propertySid: lease.property_sid,
            from: sms.from,
            to: sms.to,
            text: sms.text,
            inboundSid: sid,
            now,
          },
          opts.log,
        );
    if (lease.webhook_uri !== "") {
      await enqueueWebhook(tx, {
        accountSid: lease.account_sid,
        messageSid: sid,
        eventType: "Response",
        url: lease.webhook_uri,
        method: lease.webhook_method === "GET" ? "GET" : "POST",
        payload: {
          Type: "Response",
          MessageSid: sid,
          InReplyTo: lease.message_sid,
          AccountSid: lease.account_sid,
          PropertySid: lease.property_sid,
          From: sms.from,
          To: sms.to,
          Text: sms.text,
          Timestamp: unixSeconds(sms.at),
          OptOutType: keyword?.kind ?? "",
        },
        now,
      });
    }
    const loop = !!lease.recipient_ours && (lease.forward_to_sms !== "" || lease.forward_to_email !== "");
    if (loop) {
      // Not the text: it is the customers' content, and the log does not need it to find the loop.
      opts.log?.info(
        { messageSid: sid, inReplyTo: lease.message_sid, from: sms.from, to: sms.to },
        "reply from one of this service's own numbers: stored, not forwarded (a forwarding loop)",
      );
    }
    // The forward by SMS is a send of that account and property: it runs the one send pipeline
    // once this transaction has committed (sendAfterCommit), as the keyword's answer does; both
    // are in the outbox from this transaction on, so that a process stopping after it loses neither.
    const pendingForward: ReplyForward | undefined =
      lease.forward_to_sms !== "" && !loop
        ? {
            accountSid: lease.account_sid,
            propertySid: lease.property_sid,
            forwardToSms: lease.forward_to_sms,
            forwardFromSms: lease.forward_from_sms,
            replyFrom: sms.from,
            text: sms.text,
            replySid: sid,
            now,
          }
        : undefined;
    if (lease.forward_to_email !== "" && !loop) {
      await enqueueEmail(tx, {
        accountSid: lease.account_sid,
        messageSid: sid,
        from: lease.forward_from_email || NO_REPLY_EMAIL,
        to: lease.forward_to_email,
        subject: `SMS reply from ${sms.from}`,
        body: `${sms.text}\n\n--\nFrom: ${sms.from}\nTo: ${sms.to}\nIn reply to: ${lease.message_sid}\nMessage: ${sid}\n`,
        now,
      });
    }
    const outbox = {
      ...(pendingForward ? { forward: await queueServiceSend(tx, { forward: pendingForward }, now) } : {}),
      ...(keyword?.answer ? { answer: await queueServiceSend(tx, { answer: keyword.answer }, now) } : {}),
    };
    return {
      messageSid: sid,
      inReplyTo: lease.message_sid,
      ...(pendingForward ? { pendingForward } : {}),
      ...(keyword ? { keyword } : {}),
      ...(outbox.forward || outbox.answer ? { outbox } : {}),
    };
  });
}

/**
 * Stores an inbound SMS as a Received message of the account and queues it for the account's SMPP
 * binds as a deliver_sm when it chose SMPP for its replies (in this transaction: never lost).
 */
async function storeReceived(
  tx: EntityManager,
  sms: InboundSms,
  to: { accountSid: string; propertySid: string; inReplyTo: string | null },
  now: Date,
): Promise<string> {
  const sid = newSid("MG");
  const { encoding, numSegments } = textEncoding(sms.text || " ");
  await insertInboundMessage(tx, {
    sid,
    accountSid: to.accountSid,
    propertySid: to.propertySid,
    direction: "Receive",
    status: "Received",
    senderKind: "",
    sender: sms.from,
    recipient: sms.to,
    text: sms.text,
    encoding,
    numSegments,
    leaseSid: null,
    inReplyTo: to.inReplyTo,
    sendAt: sms.at,
    createdAt: now,
    receivedAt: sms.at,
    errorCode: "",
  });
  await queueSmppReply(tx, { accountSid: to.accountSid, messageSid: sid, now });
  return sid;
}

/**
 * An SMS to one of an account's own numbers, when the account chose SMPP for its replies (its
 * credentials' DeliverReplies): it reaches that account, so it is stored as a Received message of
 * the credentials' property (the one the binds send from, where their messages are read) and queued
 * for the binds, not kept in unmatched_inbound. A keyword acts as it does on any owned number, and
 * its answer, in the same property, replies to the stored message. Undefined, with nothing written:
 * no account owns the number or it has no SMPP DeliverReplies, and the SMS stays unmatched.
 */
async function receiveForSmppBinds(
  tx: EntityManager,
  sms: InboundSms,
  now: Date,
  fromNumber: boolean,
  log?: Logger,
): Promise<{ sid: string; keyword?: KeywordOutcome } | undefined> {
  const number = await findNumber(tx, sms.to);
  if (!number?.accountSid) return undefined;
  const credentials = await findSmppCredentials(tx, number.accountSid);
  if (!credentials?.deliverReplies) return undefined;
  const { accountSid, propertySid } = credentials;
  const sid = await storeReceived(tx, sms, { accountSid, propertySid, inReplyTo: null }, now);
  // An alphanumeric sender can be neither opted out nor answered; one of our own numbers: whatever
  // answers there is this service (as for a leased reply).
  const keyword =
    fromNumber && keywordOf(sms.text) !== undefined && !(await findNumber(tx, sms.from))
      ? await applyKeyword(tx, { accountSid, propertySid, from: sms.from, to: sms.to, text: sms.text, inboundSid: sid, now }, log)
      : undefined;
  return { sid, ...(keyword ? { keyword } : {}) };
}
