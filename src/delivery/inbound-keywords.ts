/**
 * STOP, START and HELP texted to an account (docs/api.md#opt-out-stop-start-help):
 * in the inbound SMS's transaction, the keyword's change to the account's opt-out list and the
 * decision to answer (an E164 sender, the day's answer of that kind to it not yet claimed); the
 * answer itself, an SMS from the number the keyword was sent to, is a send of the account's that
 * runs the send pipeline after the commit (messaging/service-sends.ts answerKeyword).
 */
import type { EntityManager } from "@mikro-orm/sql";
import type { Logger } from "pino";
import { findAccountBySid, listProperties } from "../accounts/account-store.js";
import { parseE164 } from "../common/phone.js";
import { newSid } from "../common/sid.js";
import type { KeywordAnswer } from "../messaging/service-sends.js";
import { findNumber } from "../numbers/number-store.js";
import { claimAnswer } from "../optouts/answer-cap-store.js";
import { answerText, keywordOf, type KeywordKind } from "../optouts/keywords.js";
import { optOutNumber } from "../optouts/opt-out.js";
import { removeOptOut } from "../optouts/opt-out-store.js";

/** An inbound SMS that reached an account, as the keyword step needs it. */
export interface KeywordSms {
  accountSid: string;
  /** The property the answer is stored in; null: none to store it in, so no answer. */
  propertySid: string | null;
  /** The handset that texted (the answer's recipient). */
  from: string;
  /** The number it texted (the answer's sender). */
  to: string;
  text: string;
  /** The stored inbound message the answer replies to; null when it was not stored as a message (an SMS to an owned number kept in unmatched_inbound). */
  inboundSid: string | null;
  now: Date;
}

/**
 * What the keyword step did: the keyword (the Response webhook's OptOutType), the answer's Sid ("" when
 * there is none) and the answer to send once the transaction commits.
 */
export interface KeywordOutcome {
  kind: KeywordKind;
  answerSid: string;
  answer?: KeywordAnswer;
  /** Why there is no answer: no property to store it in, a sender that is no E164 number, the day's answer already given. */
  noAnswer?: "NoProperty" | "NotE164" | "AnsweredToday";
}

/**
 * Acts on the SMS when its text is a keyword and the account handles keywords (OptOutKeywords):
 * Stop opts the sender out (failing what is still queued to it), Start removes its opt-out, Help
 * changes nothing. The change is made whatever becomes of the answer. The answer goes only to an E164
 * sender, and at most once per account, handset, kind and UTC day (answer-cap-store.ts, claimed in
 * this transaction). Undefined when the text is no keyword or keywords are off.
 */
export async function applyKeyword(tx: EntityManager, sms: KeywordSms, log?: Logger): Promise<KeywordOutcome | undefined> {
  const kind = keywordOf(sms.text);
  if (kind === undefined) return undefined;
  const account = await findAccountBySid(tx, sms.accountSid);
  if (!account || !account.optOutKeywords) return undefined;
  if (kind === "Stop") await optOutNumber(tx, { accountSid: account.sid, number: sms.from, source: "Keyword", now: sms.now });
  if (kind === "Start") await removeOptOut(tx, account.sid, sms.from);
  if (sms.propertySid === null) return { kind, answerSid: "", noAnswer: "NoProperty" };
  // An alphanumeric or malformed sender cannot be texted back: nothing to answer (nor to store).
  if (!parseE164(sms.from)) {
    log?.info({ accountSid: account.sid, to: sms.to, kind }, "keyword from a sender that is no E164 number: acted on, not answered");
    return { kind, answerSid: "", noAnswer: "NotE164" };
  }
  const sid = newSid("MG");
  if (!(await claimAnswer(tx, { accountSid: account.sid, recipient: sms.from, kind, now: sms.now, messageSid: sid }))) {
    log?.info({ accountSid: account.sid, to: sms.to, kind }, "keyword already answered to this sender today: acted on, not answered again");
    return { kind, answerSid: "", noAnswer: "AnsweredToday" };
  }
  const answer: KeywordAnswer = {
    sid,
    accountSid: account.sid,
    propertySid: sms.propertySid,
    from: sms.to,
    to: sms.from,
    text: answerText(kind, account),
    inReplyTo: sms.inboundSid,
    now: sms.now,
  };
  return { kind, answerSid: answer.sid, answer };
}

/**
 * A keyword texted to one of an account's own numbers (no lease: the SMS itself is kept apart, in
 * unmatched_inbound, as any SMS to an owned number of an account without SMPP DeliverReplies). The answer is stored in the account's oldest
 * property; an account without a property gets the list change and no answer (logged).
 */
export async function applyKeywordToOwnedNumber(
  tx: EntityManager,
  sms: { from: string; to: string; text: string; now: Date },
  log?: Logger,
): Promise<KeywordOutcome | undefined> {
  if (keywordOf(sms.text) === undefined) return undefined;
  const number = await findNumber(tx, sms.to);
  if (!number?.accountSid) return undefined;
  // From one of our own numbers: whatever answers there is this service (as for a leased reply).
  if (await findNumber(tx, sms.from)) return undefined;
  const [properties] = await listProperties(tx, number.accountSid, { limit: 1, offset: 0 });
  const outcome = await applyKeyword(tx, { ...sms, accountSid: number.accountSid, propertySid: properties[0]?.sid ?? null, inboundSid: null }, log);
  if (outcome?.noAnswer === "NoProperty")
    log?.warn({ accountSid: number.accountSid, to: sms.to }, "keyword to an account without a property: opt-out list changed, no answer sent");
  return outcome;
}
