import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import type { EntityManager, MikroORM } from "@mikro-orm/sql";
import {
  type Message as MessagePb,
  MessageSchema,
  type SendBatchRequest,
  SendBatchRequestSchema,
  type SendBatchResponse,
  SendBatchResponseSchema,
  type SendMessageRequest,
  SendMessageRequestSchema,
} from "../../gen/switchboard/v2/messaging_pb.js";
import type { RateCache } from "../billing/rate-cache.js";
import { requestHash } from "./request-hash.js";
import type { Clock } from "../common/clock.js";
import { errorCodeOf, fieldErrors, idempotencyKeyReused, notFound } from "../common/errors.js";
import { createGroupCommit, type ItemOutcome } from "../common/group-commit.js";
import { markBatch, type ServerTiming } from "../common/server-timing.js";
import { constraintViolation } from "../common/pg-errors.js";
import { isSid, newSid } from "../common/sid.js";
import { allocateLease } from "../leases/lease-allocator.js";
import {
  claimBatchKey,
  deleteIdempotencyKey,
  deleteIdempotencyKeys,
  findBatchKey,
  insertIdempotencyKeys,
  type MessageKeyRow,
  setBatchKeyResponse,
} from "./idempotency-key-store.js";
import { createSendStatement, insertMessages, type MessageRow, type SendFacts, type SendStatement } from "./message-send-store.js";
import type { DestinationConfig, SenderIdMode } from "../config.js";
import { DEFAULT_SENDER_ID_REGISTRATIONS, destinationChecked, NO_DESTINATION_LIMITS } from "./send-defaults.js";
import { type AdmitLimits, type Admitted, NOT_CHARGED } from "../limits/account-limits.js";
import { goesOutLeased, segmentsOf, senderIdCheck, validateSend, type ValidSend } from "./send-rules.js";
import {
  accessRefusal,
  addToBatch,
  emptyBatch,
  factsSpec,
  IDEMPOTENCY_TTL_MS,
  recordFacts,
  ruleRefusal,
  SEND_RULES,
  type SendItem,
  sendOf,
  type SendRules,
} from "./send-steps.js";
import { claimedRow, messageRow, sentMessage } from "./send-rows.js";
import { type AcceptClaims, type MaybeClaimed, storeClaimed } from "./claim-at-accept.js";
import { chargeJudged, refundUnleased } from "./send-charge.js";
import { addSmppReceiptRows } from "./smpp-outbox-store.js";
import type { SendCounters } from "./send-counters.js";

/**
 * The one send pipeline. Every send runs these steps, in this order: SendMessage, each item of
 * SendBatch, with or without an Idempotency-Key, from a leased sender, the forward of a reply
 * by SMS and the answer to a STOP, START or HELP (service-sends.ts, called by delivery/inbound.ts).
 *
 *  1. admit     the account's request rate and daily quota, in segments, for the whole deployment
 *               (limits/account-limits.ts: shared buckets taken in blocks), charged before anything
 *               is read; a batch is charged for all its items at once (admitBatch); the quota of a
 *               send not stored after all is given back
 *  2. validate  the request's own rules, which need no data (send-rules.ts validateSend), the
 *               destination permissions (destination-rules.ts, with the account's AllowedCountries
 *               as authenticated), and whether the sender is leased
 *  3. gather    the sends waiting at the same moment form one batch (common/group-commit.ts)
 *  4. facts     one statement reads what every rule needs, for the whole batch (message-store.ts)
 *  5. access    credentials still valid, the property the account's (send-steps.ts ACCESS_RULES)
 *  6. key       an Idempotency-Key already used answers with its first message
 *  7. request   the problems step 2 found
 *  8. rules     send-steps.ts RULES: SMS enabled, senders owned, forward numbers and the
 *               recipient not ours, the recipient not opted out (steps 4, 5 and 8 are built from
 *               the rules' entries: each brings its fact's SQL and its lookup key)
 *  9. lease     a leased sender allocated (leases/lease-allocator.ts)
 * 10. store     the message, its key and its SMPP receipt's outbox row inserted; a send due now stored already claimed when
 *               this process's dispatcher has room for it (claim-at-accept.ts, decided before the
 *               statement)
 * 11. dispatch  the messages stored claimed handed to the dispatcher; for the others due now, the
 *               dispatcher woken to claim them
 *
 * The sends of the service itself, the forward of a reply by SMS and the answer to a keyword
 * (service-sends.ts, after the reply's transaction), run the same steps: admit with the account's
 * own limits, validate (the destination permissions), then 4 to 11 in a transaction of their own.
 *
 * A send with no key, no leased sender, no reply to forward and no SMPP receipt (most) has steps 4 to 10 in one
 * statement: the rules say, before it runs, which value each fact must have (send-steps.ts
 * addToBatch), and it stores the send where its facts are those values (a compare-and-set, the
 * guard against a change racing the send: the rules are judged once). A stored send is answered
 * with its message; one not stored, with the first rule its facts fail. A batch of only such
 * sends is that statement alone, one round trip; any other batch runs in one transaction, the
 * same statement first, then the rules, the key and the lease, then the insert.
 */

/** What a send is answered with. */
export interface SendOutcome extends MaybeClaimed {
  message: MessagePb;
  /** True when a message was stored that is due now and waits in the database (the dispatcher should look). */
  dueNow: boolean;
}

/** What the pipeline needs. */
export interface SendPipelineDeps {
  orm: MikroORM;
  clock: Clock;
  /** The account's request rate and daily quota (step 1); undefined: no limit. */
  limits?: AdmitLimits;
  webhookAllowPrivate: boolean;
  /** Countries whose operators do not take alphanumeric sender IDs. */
  noAlphaCountries: ReadonlySet<string>;
  /** SENDER_ID_REGISTRATION: the recipient countries whose alphanumeric senders are checked, and how; default AU=require. */
  senderIdRegistration?: ReadonlyMap<string, SenderIdMode>;
  /** Domains a ForwardFromEmail may be in (`*`: any); default, the no-reply address's. */
  mailFromDomains?: readonly string[];
  /** Wakes the dispatcher after a message due now is committed unclaimed (step 11). */
  onQueued?: () => void;
  /** This process's dispatcher, when it runs one: sends due now are stored claimed by it while it has room (steps 10 and 11). */
  claims?: AcceptClaims;
  /** The deployment's destination permissions; default: every country, no blocked prefix, no premium numbers. */
  destinations?: DestinationConfig;
  /** The rules that need data (steps 5 and 8); default SEND_RULES, whose facts function migrateUp installs. */
  rules?: SendRules;
  /** Where the sends SENDER_ID_REGISTRATION labels unregistered are counted (the metrics). */
  counters?: SendCounters;
  /** DEFAULT_RATE_CARD: the rate card of an account that names none (unset: such an account is unpriced). */
  defaultRateCard?: string;
  /** This process's copies of the rate cards (billing/rate-cache.ts); unset: every send's rate is looked up by its statement. */
  rates?: RateCache;
}

/** The send pipeline of one process. */
export interface SendPipeline {
  /** Step 1 for a batch, charged at once; each is then sent with `admitted` (what gives back its quota if it is not stored). */
  admitBatch(account: SendItem["account"], reqs: readonly SendMessageRequest[]): Promise<Admitted>;
  /** One send, every step; answers once its message is committed. */
  send(
    account: SendItem["account"],
    propertySid: string,
    req: SendMessageRequest,
    opts?: { idemKey?: string; admitted?: Admitted; timing?: ServerTiming; smppReceipt?: 1 | 2 },
  ): Promise<MessagePb>;
  /**
   * A batch under one Idempotency-Key, in one transaction of its own: the key (claimed first),
   * every item's message and the response, every item included; or nothing. A repeat gets that
   * response back and stores nothing, a repeat while the first is in flight waits for its commit
   * (the claim's unique key holds it), and a different request under the key is refused.
   */
  sendKeyedBatch(
    account: SendItem["account"],
    propertySid: string,
    req: SendBatchRequest,
    key: string,
    respond: (outcomes: ItemOutcome<MessagePb>[]) => SendBatchResponse,
  ): Promise<SendBatchResponse>;
}

/** Creates the send pipeline; its group commit gathers the sends of every request of this process. */
export function createSendPipeline(deps: SendPipelineDeps): SendPipeline {
  const claims = deps.claims;
  const judge = sendJudge(deps.rules ?? SEND_RULES, deps.counters);
  // The marks of SERVER_TIMING (common/server-timing.ts): markBatch does nothing for a batch none of whose sends is timed.
  const statement = async (items: SendItem[]) => {
    markBatch(items, "statementStart");
    const outcomes = await runBatch(deps.orm, judge, items);
    markBatch(items, "statementEnd");
    return outcomes;
  };
  const gather = createGroupCommit<SendItem, SendOutcome>({
    // A priced account's sends lock its balance row until their commit: its next batch would only
    // wait for that commit, so its sends wait out of the statement and go together (a larger batch).
    exclusive: (item) => ((item.account.rateCard ?? item.defaultRateCard) == null ? undefined : item.account.sid),
    run: (items) => {
      markBatch(items, "batch");
      return claims ? storeClaimed(claims, items, statement) : statement(items);
    },
  });

  const destinations = deps.destinations ?? NO_DESTINATION_LIMITS;
  const registration = deps.senderIdRegistration ?? DEFAULT_SENDER_ID_REGISTRATIONS;

  /** The send's rate from this process's copy of its card (the statement checks the copy's version). */
  const cachedRate = (card: string | null | undefined, destination: string, now: Date) =>
    card == null || !deps.rates ? undefined : deps.rates.rateFor(card, destination, now);

  /** Step 2. */
  function validate(account: SendItem["account"], propertySid: string, req: SendMessageRequest, now: Date, idemKey?: string): SendItem {
    const valid = validateSend(req, Math.floor(now.getTime() / 1000), deps, account.smartEncoding);
    const checked = destinationChecked(valid, "To", account.allowedCountries ?? [], destinations);
    const v = "send" in checked ? checked.send : undefined;
    // Alphanumeric IDs do not reach operators in some countries (US and CA by default): those go out leased.
    const leased = v !== undefined && goesOutLeased(v.fromKind, v.to, deps.noAlphaCountries);
    const idemHash = idemKey === undefined ? undefined : requestHash("SendMessage", SendMessageRequestSchema, req);
    // Whether the "sender ID registered" rule (send-steps.ts) applies, for which country and how.
    const senderIds = v === undefined ? undefined : senderIdCheck(v.fromKind, leased, v.to, registration);
    return {
      account,
      propertySid,
      checked,
      leased,
      senderIdCheck: senderIds,
      idemKey,
      idemHash,
      now,
      sid: newSid("MG"),
      defaultRateCard: deps.defaultRateCard,
      rate: v === undefined ? undefined : cachedRate(account.rateCard ?? deps.defaultRateCard, v.to.number, now),
    };
  }

  return {
    async admitBatch(account, reqs) {
      if (!deps.limits) return NOT_CHARGED;
      return deps.limits.admit(account, () => reqs.reduce((n, r) => n + segmentsOf(r, account.smartEncoding), 0));
    },

    async send(account, propertySid, req, opts = {}) {
      // The segments are counted only when a limit needs them (validate counts them again).
      const timing = opts.timing;
      timing?.mark("admitStart");
      const admitted = opts.admitted ?? (deps.limits ? await deps.limits.admit(account, () => segmentsOf(req, account.smartEncoding)) : NOT_CHARGED);
      timing?.mark("admitEnd");
      try {
        // A malformed Sid cannot name a property: 404 without asking the database.
        if (!isSid(propertySid, "PR")) throw notFound("Property", propertySid);
        const item = validate(account, propertySid, req, deps.clock.now(), opts.idemKey);
        if (opts.smppReceipt) item.smppReceipt = opts.smppReceipt;
        if (timing) {
          item.timing = timing;
          timing.mark("submitted");
        }
        let out: SendOutcome;
        try {
          out = await gather.submit(item);
        } catch (err) {
          // A concurrent request with the same Idempotency-Key committed first (this one waited for it
          // on the key): judged again, this send gets that answer, or 422 if it is another request.
          if (!opts.idemKey || constraintViolation(err)?.kind !== "unique") throw err;
          out = await gather.submit({ ...item, sid: newSid("MG") });
        }
        if (out.dueNow) deps.onQueued?.();
        return out.message;
      } catch (err) {
        // Not stored: its segments do not count against the day's quota.
        admitted(() => segmentsOf(req, account.smartEncoding));
        throw err;
      }
    },

    async sendKeyedBatch(account, propertySid, req, key, respond) {
      const now = deps.clock.now();
      const hash = requestHash("SendBatch", SendBatchRequestSchema, req);
      const items = req.messages.map((m) => validate(account, propertySid, m, now));
      for (let attempt = 0; ; attempt++) {
        try {
          const out = await deps.orm.em.fork().transactional(async (tx) => {
            const row = await findBatchKey(tx, account.sid, key, new Date(now.getTime() - IDEMPOTENCY_TTL_MS));
            if (row && !row.expired) {
              if (!row.response || row.request_hash !== hash) throw idempotencyKeyReused(key);
              return { response: fromBinary(SendBatchResponseSchema, new Uint8Array(row.response)), dueNow: false };
            }
            if (row) await deleteIdempotencyKey(tx, account.sid, key);
            // The claim comes first, so that a concurrent repeat waits here instead of doing the work
            // twice. Its response is a placeholder no other transaction ever sees.
            await claimBatchKey(tx, account.sid, key, hash, now);
            const outcomes = await judge.judgeBatch(tx, items);
            const response = respond(outcomes.map((o) => (o.ok ? { ok: true, value: o.value.message } : o)));
            await setBatchKeyResponse(tx, account.sid, key, toBinary(SendBatchResponseSchema, response));
            return { response, dueNow: outcomes.some((o) => o.ok && o.value.dueNow) };
          });
          if (out.dueNow) deps.onQueued?.();
          return out.response;
        } catch (err) {
          // The same key committed by a concurrent request while this one waited: answer from it.
          if (attempt === 0 && constraintViolation(err)?.kind === "unique") continue;
          throw err;
        }
      }
    },
  };
}

const ok = <O>(value: O): ItemOutcome<O> => ({ ok: true, value });
const fail = <O>(error: unknown): ItemOutcome<O> => ({ ok: false, error });

/** Whether the facts statement stores the send itself: no key to settle, no lease to allocate, no refusal to keep, no SMPP receipt to record. */
function storedByStatement(item: SendItem): boolean {
  return item.idemKey === undefined && !item.leased && item.forward === undefined && item.smppReceipt === undefined;
}

/** Steps 4 to 10 for a batch gathered by step 3: one statement, or one transaction when some send needs more. */
function runBatch(orm: MikroORM, judge: SendJudge, items: SendItem[]): Promise<ItemOutcome<SendOutcome>[]> {
  const em = orm.em.fork();
  if (items.every(storedByStatement)) return judge.judgeBatch(em, items);
  return em.transactional((tx) => judge.judgeBatch(tx, items));
}

/** Steps 4 to 10 under one set of rules. */
export interface SendJudge {
  /** Steps 4 (facts, and the store of the sends storedByStatement) to 10, in the caller's transaction when it has one. */
  judgeBatch(tx: EntityManager, items: SendItem[]): Promise<ItemOutcome<SendOutcome>[]>;
}

/** Steps 4 to 10 judged by `rules`, through the facts statement built from them; `counters` counts what the label mode let through. */
export function sendJudge(rules: SendRules, counters?: SendCounters): SendJudge {
  const spec = factsSpec(rules);
  const statement: SendStatement = createSendStatement(spec);

  /** Step 4: every send's facts, in index order, storing (step 10) the sends storedByStatement whose facts are as the rules want. */
  async function readFacts(em: EntityManager, items: SendItem[]): Promise<SendFacts[]> {
    const batch = emptyBatch(spec, items[0].now);
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      const send = sendOf(item);
      addToBatch(rules, batch, i, item, send !== undefined && storedByStatement(item) ? messageRow(item, send, undefined) : null);
    }
    const byIndex: SendFacts[] = new Array(items.length);
    for (const f of await statement.run(em, batch)) byIndex[Number(f.i)] = f;
    return byIndex;
  }

  return {
    async judgeBatch(tx, items) {
      const facts = await readFacts(tx, items);
      const outcomes: ItemOutcome<SendOutcome>[] = new Array(items.length);
      const toStore: number[] = [];
      const expiredKeys: SendItem[] = [];
      // Keys claimed earlier in this batch: a repeat gets the first one's message, as after its commit.
      const claimed = new Map<string, number>();
      const repeats: { index: number; first: number }[] = [];

      items.forEach((item, i) => {
        const f = facts[i];
        // Stored by the statement exactly where its facts were what the rules want: a send not
        // stored is answered with the first rule they fail.
        if (storedByStatement(item)) return void (outcomes[i] = f.stored ? ok(storedOutcome(item, sendOf(item)!, sendOf(item)!.from)) : fail(refusal(item, f)));
        const denied = accessRefusal(rules, item, f);
        if (denied) return void (outcomes[i] = fail(denied));
        // Step 6: a key already used answers before any rule (a repeat gets the first answer even if,
        // say, its Schedule has passed since); a key another send of this batch claimed is settled at the end.
        const keyId = item.idemKey ? `${item.account.sid}\n${item.idemKey}` : undefined;
        if (keyId) {
          const first = claimed.get(keyId);
          if (first !== undefined) return void repeats.push({ index: i, first });
          if (f.key_expired === false) return void (outcomes[i] = keyAnswer(item, f));
          if (f.key_expired === true) expiredKeys.push(item);
        }
        const refused = ruleRefusal(rules, item, f, fieldErrors);
        if (refused) return void (outcomes[i] = fail(refused));
        if (keyId) claimed.set(keyId, i);
        toStore.push(i);
      });
      if (expiredKeys.length > 0)
        await deleteIdempotencyKeys(
          tx,
          expiredKeys.map((item) => ({ accountSid: item.account.sid, key: item.idemKey! })),
        );

      // The charge, after every rule and before the leases (a send its balance cannot cover takes no
      // number from the pool); a send then refused a lease is refunded in this same transaction.
      if (rules.charge) await chargeJudged(tx, rules.charge, items, toStore, outcomes, facts, keyAnswer);
      const senders = await allocateLeases(tx, items, toStore, outcomes);
      if (rules.charge) await refundUnleased(tx, items, toStore, outcomes, facts, rules.charge.amountFact);

      // Step 10 for the rest: the messages judged here, and the refused forwards kept as Failed.
      const rows: MessageRow[] = [];
      for (const i of toStore) {
        if (outcomes[i] !== undefined) continue;
        const item = items[i];
        const send = sendOf(item)!;
        const lease = senders.get(i);
        rows.push(recordFacts(spec, messageRow(item, send, lease), facts[i]));
        outcomes[i] = ok(storedOutcome(item, send, lease ? lease.sender : send.from));
      }
      items.forEach((item, i) => {
        const o = outcomes[i];
        if (item.forward && o && !o.ok && o.error instanceof ConnectError)
          // Kept Failed, never charged: no price on its record.
          rows.push({ ...recordFacts(spec, messageRow(item, item.forward.draft, undefined, errorCodeOf(o.error)), facts[i]), price: null });
      });
      await insertMessages(tx, rows);
      await storeKeys(tx, items, toStore, outcomes);
      // In the message's transaction: once the client has the MessageSid, its receipt is on record.
      await addSmppReceiptRows(
        tx,
        toStore.flatMap((i) => {
          const item = items[i];
          return item.smppReceipt && outcomes[i].ok
            ? [{ accountSid: item.account.sid, messageSid: item.sid, registeredDelivery: item.smppReceipt, now: item.now }]
            : [];
        }),
      );

      if (counters) countLabelled(counters, items, facts, outcomes);
      for (const { index, first } of repeats) {
        const o = outcomes[first];
        // The first send with this key failed (no lease to be had): the repeat is a send of its own.
        // Rare enough to redo the whole batch one send per transaction, where it is one.
        if (!o.ok) throw new Error("an Idempotency-Key repeated in a batch whose first send failed: retry one by one");
        // As if it came just after the first: the same request gets the first answer, another is refused.
        outcomes[index] =
          items[index].idemHash === items[first].idemHash ? ok({ message: o.value.message, dueNow: false }) : fail(idempotencyKeyReused(items[index].idemKey!));
      }
      return outcomes;
    },
  };

  /** Why the statement did not store a send (its facts failed a rule, its request has problems, or its balance could not cover it). */
  function refusal(item: SendItem, f: SendFacts): unknown {
    return (
      accessRefusal(rules, item, f) ??
      ruleRefusal(rules, item, f, fieldErrors) ??
      (f.charged === false && rules.charge ? rules.charge.refuse(item, sendOf(item)!, f) : undefined) ??
      new Error(`send batch: message ${item.sid} passed its rules but was not stored`)
    );
  }
}

/** Counts the sends stored with an alphanumeric sender SENDER_ID_REGISTRATION labels unregistered (label mode). */
function countLabelled(counters: SendCounters, items: SendItem[], facts: SendFacts[], outcomes: ItemOutcome<SendOutcome>[]): void {
  for (let i = 0; i < items.length; i++) {
    const check = items[i].senderIdCheck;
    if (check?.mode === "label" && outcomes[i]?.ok && facts[i].sender_registered === false) counters.unregisteredSenderId(check.country);
  }
}

/** A stored send's answer, and (stored claimed) the row its dispatcher gets, or whether it waits in the database due now. */
function storedOutcome(item: SendItem, send: ValidSend, sender: string): SendOutcome {
  const claimed = item.claimedUntil && !send.scheduled ? claimedRow(item, send, sender) : undefined;
  return { message: sentMessage(item, send, sender), dueNow: !send.scheduled && !claimed, claimed };
}

/** Step 6 for a key already used: the first message, or IdempotencyKeyReused for another request. */
function keyAnswer(item: SendItem, f: Omit<MessageKeyRow, "account_sid" | "key">): ItemOutcome<SendOutcome> {
  // Keys stored before fingerprints existed (key_hash null) match any repeat.
  if (!f.m_sid || (f.key_hash !== null && f.key_hash !== item.idemHash)) return fail(idempotencyKeyReused(item.idemKey!));
  const message = create(MessageSchema, {
    messageSid: f.m_sid,
    accountSid: f.m_account_sid!,
    propertySid: f.m_property_sid!,
    from: f.m_sender!,
    to: f.m_recipient!,
    text: f.m_text!,
  });
  return ok({ message, dueNow: false });
}

/**
 * Step 9: leased senders, allocated one by one (each takes its recipient's advisory lock), in
 * recipient order so that two batches never wait for each other's locks in a cycle. A rule
 * (LeaseLimitReached, NoLeasedNumberAvailable) fails that send only; a database error, the batch.
 */
async function allocateLeases(
  tx: EntityManager,
  items: SendItem[],
  toStore: number[],
  outcomes: ItemOutcome<SendOutcome>[],
): Promise<Map<number, { sender: string; leaseSid: string }>> {
  const senders = new Map<number, { sender: string; leaseSid: string }>();
  const leased = toStore
    .filter((i) => items[i].leased && outcomes[i] === undefined)
    .sort((a, b) => compare(sendOf(items[a])!.to.number, sendOf(items[b])!.to.number));
  for (const i of leased) {
    const item = items[i];
    try {
      const lease = await allocateLease(tx, { recipient: sendOf(item)!.to.number, accountSid: item.account.sid, messageSid: item.sid, now: item.now });
      senders.set(i, { sender: lease.poolNumber, leaseSid: lease.sid });
    } catch (err) {
      if (!(err instanceof ConnectError)) throw err;
      outcomes[i] = fail(err);
    }
  }
  return senders;
}

/**
 * Step 10 for the keys of the sends stored, in key order, so that two batches claiming the same
 * keys never wait for each other in a cycle. A key another transaction is storing makes this
 * insert wait for that commit, then fail as a duplicate: the batch is redone and the repeat
 * answered from the stored key.
 */
async function storeKeys(tx: EntityManager, items: SendItem[], toStore: number[], outcomes: ItemOutcome<SendOutcome>[]): Promise<void> {
  const keyed = toStore.filter((i) => items[i].idemKey && outcomes[i].ok).map((i) => items[i]);
  if (keyed.length === 0) return;
  keyed.sort((a, b) => compare(`${a.account.sid}\n${a.idemKey}`, `${b.account.sid}\n${b.idemKey}`));
  await insertIdempotencyKeys(
    tx,
    keyed.map((item) => ({ accountSid: item.account.sid, key: item.idemKey!, messageSid: item.sid, requestHash: item.idemHash ?? null, createdAt: item.now })),
  );
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
