import { createHash } from "node:crypto";
import { create, type DescMessage, fromBinary, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import type { MikroORM } from "@mikro-orm/sql";
import { type Message as MessagePb, MessageSchema, type SendBatchResponse, SendBatchResponseSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import type { Account } from "../accounts/account.entity.js";
import { wrongCredentials } from "../accounts/auth.js";
import { apiError, fieldError, fieldErrors, type FieldProblem, idempotencyKeyReused, notFound } from "../common/errors.js";
import { createGroupCommit, type GroupCommit, type ItemOutcome } from "../common/group-commit.js";
import { constraintViolation } from "../common/pg-errors.js";
import { allocateLease } from "../leases/lease-allocator.js";
import {
  claimBatchKey,
  deleteIdempotencyKey,
  deleteIdempotencyKeys,
  findBatchKey,
  insertIdempotencyKeys,
  setBatchKeyResponse,
} from "./idempotency-key-store.js";
import { type CheckRow, checkSendBatch, insertMessages, MESSAGE_COLUMNS, storeSendBatch } from "./message-store.js";
import { deploymentNumbers } from "../numbers/number-store.js";
import { forwardLoop, senderNotOwned, smsNotEnabled, type ValidSend } from "./send-rules.js";

/** An Idempotency-Key is remembered this long (docs/api.md#idempotency-key). */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

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

/** One checked send request, waiting for its batch. */
export interface SendItem {
  /** The authenticated account; its tokenHash is re-checked against the database in the batch. */
  account: Pick<Account, "sid" | "tokenHash">;
  propertySid: string;
  /** The result of validateSend: reported only after the property check, as a lone send would. */
  checked: { problems: FieldProblem[] } | { send: ValidSend };
  /** Whether the message goes out from a leased sender (From blank, or alphanumeric where not taken). */
  leased: boolean;
  idemKey: string | undefined;
  /** With idemKey: the fingerprint of the request (requestHash), which a repeat must match. */
  idemHash?: string;
  now: Date;
  /** The new message's Sid. */
  sid: string;
}

/** What a send is answered with. */
export interface SendOutcome {
  message: MessagePb;
  /** True when a message was stored that is due now (the dispatcher should look). */
  dueNow: boolean;
}

/**
 * Which of the batch's E164 ForwardFromSms and ForwardToSms numbers are the deployment's own, and
 * whose (number → owning account, null for a pool number). One query, run only when a batch names
 * such a number (rare): the check query every send pays stays as it is.
 */
async function forwardNumbers(tx: Tx, items: SendItem[]): Promise<Map<string, string | null>> {
  const asked = new Set<string>();
  for (const item of items) {
    const send = "send" in item.checked ? item.checked.send : undefined;
    if (send?.forwardFromSms.startsWith("+")) asked.add(send.forwardFromSms);
    if (send && send.forwardToSms !== "") asked.add(send.forwardToSms);
  }
  return deploymentNumbers(tx, [...asked]);
}

const ok = <O>(value: O): ItemOutcome<O> => ({ ok: true, value });
const fail = <O>(error: unknown): ItemOutcome<O> => ({ ok: false, error });

/** Options of the send writer. */
export interface SendWriterOptions {
  orm: MikroORM;
  maxBatch?: number;
  maxInFlight?: number;
}

/**
 * The store side of Send SMS, with group commit: the sends waiting at the same moment are
 * checked with one query (account still valid and SMS-enabled, property, sender ownership,
 * Idempotency-Key) and stored in one transaction; a batch with no key, leased sender or E164
 * ForwardFromSms (most) is checked and stored by one statement, one round trip. Each check is made
 * in the order a lone send makes it, and each send gets its own answer; a send is answered only
 * after its batch committed.
 */
export function createSendWriter(opts: SendWriterOptions): GroupCommit<SendItem, SendOutcome> {
  return createGroupCommit<SendItem, SendOutcome>({
    maxBatch: opts.maxBatch,
    maxInFlight: opts.maxInFlight,
    run: (items) => runBatch(opts.orm, items),
  });
}

type Tx = Parameters<Parameters<MikroORM["em"]["transactional"]>[0]>[0];

/** A batch's sends, in one transaction (the general path) or in one statement when none needs more (storeSendBatch). */
async function runBatch(orm: MikroORM, items: SendItem[]): Promise<ItemOutcome<SendOutcome>[]> {
  if (items.every(inOneStatement)) return writeSimpleBatch(orm.em.fork(), items);
  return orm.em.fork().transactional((tx) => writeBatch(tx, items));
}

/**
 * Whether a send can be checked and stored by the one-statement batch: no Idempotency-Key (the
 * key's row and its lock order), no leased sender (allocated between check and insert), no E164
 * ForwardFromSms and no ForwardToSms (their own query, forwardNumbers) — the bench's sends and
 * most real ones.
 */
function inOneStatement(item: SendItem): boolean {
  if (item.idemKey !== undefined || item.leased) return false;
  return !("send" in item.checked && (item.checked.send.forwardFromSms.startsWith("+") || item.checked.send.forwardToSms !== ""));
}

/** The failure a send's account or property gives it (checked before its Idempotency-Key), if any. */
function accessFailure(item: SendItem, row: Pick<CheckRow, "account_token_hash" | "property_sms"> | undefined): ItemOutcome<SendOutcome> | undefined {
  // The token was rotated (maybe by another process) after this process authenticated it.
  if (!row?.account_token_hash || row.account_token_hash !== item.account.tokenHash) return fail(wrongCredentials());
  if (row.property_sms === null) return fail(notFound("Property", item.propertySid));
  return undefined;
}

/**
 * The failure of a send's request or its rules once its key is settled, if any (ours: the
 * deployment's numbers among its forward numbers and their owners, from forwardNumbers).
 */
function ruleFailure(
  item: SendItem,
  row: Pick<CheckRow, "account_sms" | "property_sms" | "owned">,
  ours: ReadonlyMap<string, string | null>,
): ItemOutcome<SendOutcome> | undefined {
  if ("problems" in item.checked) return fail(fieldErrors(item.checked.problems));
  const send = item.checked.send;
  const disabled = smsNotEnabled({ sid: item.account.sid, smsEnabled: !!row.account_sms }, { sid: item.propertySid, smsEnabled: !!row.property_sms });
  if (disabled) return fail(apiError("SmsNotEnabled", disabled));
  if (send.fromKind === "E164" && !row.owned) return fail(fieldError("From", "SenderNotOwned", senderNotOwned("From", send.from)));
  // Replies are forwarded from this number: it must be the account's own, as a From would.
  if (send.forwardFromSms.startsWith("+") && ours.get(send.forwardFromSms) !== item.account.sid) {
    return fail(fieldError("ForwardFromSms", "SenderNotOwned", senderNotOwned("ForwardFromSms", send.forwardFromSms)));
  }
  // A reply forwarded to one of our own numbers would come back in as a new reply: a loop.
  if (send.forwardToSms !== "" && ours.has(send.forwardToSms)) return fail(fieldError("ForwardToSms", "DestinationNotAllowed", forwardLoop(send.forwardToSms)));
  return undefined;
}

/** One stored message's values, in MESSAGE_COLUMNS order. */
function messageRow(item: SendItem, send: ValidSend, lease: { sender: string; leaseSid: string | null } | undefined): unknown[] {
  const isLeased = item.leased;
  return [
    item.sid,
    item.account.sid,
    item.propertySid,
    "Transmit",
    send.scheduled ? "Scheduled" : "Processing",
    isLeased ? "Leased" : send.fromKind === "E164" ? "E164" : "Alphanumeric",
    lease ? lease.sender : send.from,
    send.to.number,
    send.text,
    send.encoding,
    send.numSegments,
    send.deliveryReceipt,
    send.drWebhookUri,
    send.drWebhookMethod,
    // Lease options are kept only where a reply can come back: through a leased sender.
    isLeased ? send.forwardToSms : "",
    isLeased ? send.forwardFromSms : "",
    isLeased ? send.forwardToEmail : "",
    isLeased ? send.forwardFromEmail : "",
    isLeased ? send.webhookUri : "",
    isLeased ? send.webhookMethod : "POST",
    lease?.leaseSid ?? null,
    send.schedule === undefined ? null : new Date(send.schedule * 1000),
    send.scheduled ? new Date(send.schedule! * 1000) : item.now,
    item.now,
  ];
}

/** What a stored send is answered with. */
function storedOutcome(item: SendItem, send: ValidSend, sender: string): ItemOutcome<SendOutcome> {
  return ok({
    message: create(MessageSchema, {
      messageSid: item.sid,
      accountSid: item.account.sid,
      propertySid: item.propertySid,
      from: sender,
      to: send.to.number,
      text: send.text,
    }),
    dueNow: !send.scheduled,
  });
}

/** What forwardNumbers finds for a batch that names no forward number (inOneStatement's). */
const NO_NUMBERS: ReadonlyMap<string, string | null> = new Map();

/**
 * A batch of sends that inOneStatement accepts, checked and stored by one statement outside an
 * explicit transaction (storeSendBatch: one round trip, one commit). The statement stores exactly
 * the sends whose checks pass; each answer is then made from its row as in writeBatch, and a send
 * is answered as stored only if the statement says it stored it.
 */
async function writeSimpleBatch(em: Tx, items: SendItem[]): Promise<ItemOutcome<SendOutcome>[]> {
  const params: unknown[][] = Array.from({ length: 6 + MESSAGE_COLUMNS.length }, () => []);
  items.forEach((item, i) => {
    const send = "send" in item.checked ? item.checked.send : undefined;
    const head = [i, item.account.sid, item.propertySid, send?.fromKind === "E164" ? send.from : null, item.account.tokenHash, send !== undefined];
    const row = send ? messageRow(item, send, undefined) : MESSAGE_COLUMNS.map(() => null);
    for (let c = 0; c < head.length; c++) params[c].push(head[c]);
    for (let c = 0; c < row.length; c++) params[head.length + c].push(row[c]);
  });
  const rows = await storeSendBatch(em, params);
  const byIndex = new Map(rows.map((r) => [Number(r.i), r]));
  return items.map((item, i) => {
    const row = byIndex.get(i);
    const failure = accessFailure(item, row) ?? ruleFailure(item, row!, NO_NUMBERS);
    if (failure) return row?.stored ? fail(new Error(`send batch: message ${item.sid} stored although its check failed`)) : failure;
    if (!row!.stored) return fail(new Error(`send batch: message ${item.sid} passed its checks but was not stored`));
    const send = (item.checked as { send: ValidSend }).send;
    return storedOutcome(item, send, send.from);
  });
}

async function writeBatch(tx: Tx, items: SendItem[]): Promise<ItemOutcome<SendOutcome>[]> {
  const check: unknown[][] = [[], [], [], [], [], []];
  items.forEach((item, i) => {
    const send = "send" in item.checked ? item.checked.send : undefined;
    const ownedSender = send?.fromKind === "E164" ? send.from : null;
    const row = [i, item.account.sid, item.propertySid, ownedSender, item.idemKey ?? null, new Date(item.now.getTime() - IDEMPOTENCY_TTL_MS)];
    for (let c = 0; c < row.length; c++) check[c].push(row[c]);
  });
  const rows = await checkSendBatch(tx, check);
  const byIndex = new Map<number, CheckRow>(rows.map((r) => [Number(r.i), r]));
  const ours = await forwardNumbers(tx, items);

  const outcomes: ItemOutcome<SendOutcome>[] = new Array(items.length);
  const toStore: { index: number; send: ValidSend }[] = [];
  const expiredKeys: SendItem[] = [];
  // Keys claimed earlier in this batch: a repeat gets the first one's message, as after its commit.
  const claimed = new Map<string, number>();
  const repeats: { index: number; first: number }[] = [];

  items.forEach((item, i) => {
    const row = byIndex.get(i);
    const denied = accessFailure(item, row);
    if (denied || !row) return void (outcomes[i] = denied!);
    // A key already used answers before any rule (a repeat gets the first answer even if, say, its
    // Schedule has passed since); a key another send of this batch claimed is settled at the end.
    const keyId = item.idemKey ? `${item.account.sid}\n${item.idemKey}` : undefined;
    if (keyId) {
      const first = claimed.get(keyId);
      if (first !== undefined) return void repeats.push({ index: i, first });
      if (row.key_expired === false) {
        // Keys stored before fingerprints existed (key_hash null) match any repeat.
        if (!row.m_sid || (row.key_hash !== null && row.key_hash !== item.idemHash)) return void (outcomes[i] = fail(idempotencyKeyReused(item.idemKey!)));
        const message = create(MessageSchema, {
          messageSid: row.m_sid,
          accountSid: row.m_account_sid!,
          propertySid: row.m_property_sid!,
          from: row.m_sender!,
          to: row.m_recipient!,
          text: row.m_text!,
        });
        return void (outcomes[i] = ok({ message, dueNow: false }));
      }
      if (row.key_expired === true) expiredKeys.push(item);
    }
    const failure = ruleFailure(item, row, ours);
    if (failure) return void (outcomes[i] = failure);
    const send = (item.checked as { send: ValidSend }).send;
    if (keyId) claimed.set(keyId, i);
    toStore.push({ index: i, send });
  });

  if (expiredKeys.length > 0) {
    await deleteIdempotencyKeys(
      tx,
      expiredKeys.map((item) => ({ accountSid: item.account.sid, key: item.idemKey! })),
    );
  }

  // Leased senders: allocated one by one (each takes its recipient's advisory lock), in recipient
  // order so that two batches never wait for each other's locks in a cycle.
  const senders = new Map<number, { sender: string; leaseSid: string | null }>();
  const leased = toStore
    .filter((s) => items[s.index].leased)
    .sort((a, b) => (a.send.to.number < b.send.to.number ? -1 : a.send.to.number > b.send.to.number ? 1 : 0));
  for (const s of leased) {
    const item = items[s.index];
    try {
      const lease = await allocateLease(tx, { recipient: s.send.to.number, accountSid: item.account.sid, messageSid: item.sid, now: item.now });
      senders.set(s.index, { sender: lease.poolNumber, leaseSid: lease.sid });
    } catch (err) {
      // A rule (LeaseLimitReached, NoLeasedNumberAvailable) fails this send only; a database error fails the batch.
      if (!(err instanceof ConnectError)) throw err;
      outcomes[s.index] = fail(err);
    }
  }

  const stored = toStore.filter((s) => outcomes[s.index] === undefined);
  if (stored.length > 0) {
    const columns: unknown[][] = MESSAGE_COLUMNS.map(() => []);
    for (const { index, send } of stored) {
      const item = items[index];
      const lease = senders.get(index);
      const row = messageRow(item, send, lease);
      for (let c = 0; c < row.length; c++) columns[c].push(row[c]);
      outcomes[index] = storedOutcome(item, send, lease ? lease.sender : send.from);
    }
    await insertMessages(tx, columns);
    // In key order, so that two batches claiming the same keys never wait for each other in a
    // cycle. A key another transaction is storing makes this insert wait for that commit, then
    // fail as a duplicate: the batch is redone and the repeat answered from the stored key.
    const keyed = stored.filter((s) => items[s.index].idemKey).map((s) => items[s.index]);
    if (keyed.length > 0) {
      keyed.sort((a, b) => (a.account.sid + "\n" + a.idemKey < b.account.sid + "\n" + b.idemKey ? -1 : 1));
      await insertIdempotencyKeys(
        tx,
        keyed.map((item) => ({
          accountSid: item.account.sid,
          key: item.idemKey!,
          messageSid: item.sid,
          requestHash: item.idemHash ?? null,
          createdAt: item.now,
        })),
      );
    }
  }
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
}

/** A batch send under an Idempotency-Key: what writeKeyedBatch needs. */
export interface KeyedBatch {
  accountSid: string;
  key: string;
  /** requestHash of the SendBatchRequest. */
  hash: string;
  now: Date;
  items: SendItem[];
  /** Builds the response from the items' outcomes (in request order). */
  respond: (outcomes: ItemOutcome<SendOutcome>[]) => SendBatchResponse;
}

/**
 * Stores a batch send under an Idempotency-Key in one transaction of its own: the key (claimed
 * first), every item's message and the response, every item included; or nothing. A repeat gets
 * that response back and stores nothing, a repeat while the first is in flight waits for its
 * commit (the claim's unique key holds it), and a different request under the key is refused.
 */
export async function writeKeyedBatch(orm: MikroORM, batch: KeyedBatch): Promise<{ response: SendBatchResponse; dueNow: boolean }> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await orm.em.fork().transactional(async (tx) => {
        const row = await findBatchKey(tx, batch.accountSid, batch.key, new Date(batch.now.getTime() - IDEMPOTENCY_TTL_MS));
        if (row && !row.expired) {
          if (!row.response || row.request_hash !== batch.hash) throw idempotencyKeyReused(batch.key);
          return { response: fromBinary(SendBatchResponseSchema, new Uint8Array(row.response)), dueNow: false };
        }
        if (row) await deleteIdempotencyKey(tx, batch.accountSid, batch.key);
        // The claim comes first, so that a concurrent repeat waits here instead of doing the work
        // twice. Its response is a placeholder no other transaction ever sees.
        await claimBatchKey(tx, batch.accountSid, batch.key, batch.hash, batch.now);
        const outcomes = await writeBatch(tx, batch.items);
        const response = batch.respond(outcomes);
        await setBatchKeyResponse(tx, batch.accountSid, batch.key, toBinary(SendBatchResponseSchema, response));
        return { response, dueNow: outcomes.some((o) => o.ok && o.value.dueNow) };
      });
    } catch (err) {
      // The same key committed by a concurrent request while this one waited: answer from it.
      if (attempt === 0 && constraintViolation(err)?.kind === "unique") continue;
      throw err;
    }
  }
}
