import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager, MikroORM } from "@mikro-orm/sql";
import {
  type CancelMessageRequest,
  type GetMessageRequest,
  type ListMessagesRequest,
  type ListMessagesResponse,
  type Message as MessagePb,
  MessageRecordSchema,
  type MessageRecord,
  type MessagingService,
  type SendBatchRequest,
  SendBatchRequestSchema,
  type SendBatchResponse,
  SendBatchResponseSchema,
  type SendMessageRequest,
  SendMessageRequestSchema,
  ListMessagesResponseSchema,
  BatchResultSchema,
} from "../../gen/switchboard/v2/messaging_pb.js";
import { Account } from "../accounts/account.entity.js";
import { recheckCredentials, wrongCredentials } from "../accounts/auth.js";
import { findProperty } from "../accounts/account-store.js";
import type { Property } from "../accounts/property.entity.js";
import type { Clock } from "../common/clock.js";
import { unixSeconds } from "../common/clock.js";
import { kIdempotencyKey, requestEm } from "../common/context.js";
import { requireAccount } from "../accounts/account-context.js";
import { fieldError, fieldErrors, notFound, apiError, toResponseStatus } from "../common/errors.js";
import { pageOf } from "../common/paging.js";
import { isSid, newSid } from "../common/sid.js";
import { constraintViolation } from "../common/pg-errors.js";
import type { ItemOutcome } from "../common/group-commit.js";
import { releaseLease } from "../leases/lease-allocator.js";
import { cancelScheduledMessage, findAccountMessage, listMessages, reloadMessage } from "./message-api-store.js";
import { MESSAGE_STATUSES, type Message, type MessageDirection, type MessageStatus } from "./message.entity.js";
import { goesOutLeased, validateSend } from "./send-rules.js";
import { createSendWriter, IDEMPOTENCY_TTL_MS, requestHash, type SendItem, type SendOutcome, writeKeyedBatch } from "./send-writer.js";

/** What the messaging service needs. */
export interface MessagingDeps {
  /** For the group-commit writer of sends. */
  orm: MikroORM;
  clock: Clock;
  webhookAllowPrivate: boolean;
  /** Countries whose operators do not take alphanumeric sender IDs. */
  noAlphaCountries: Set<string>;
  /** Domains a ForwardFromEmail may be in (`*`: any); default, the no-reply address's. */
  mailFromDomains?: readonly string[];
  /** Wakes the dispatcher after a message is committed. */
  onQueued?: () => void;
}

/** At most this many items in one batch (docs/api.md#batch-send). */
export const MAX_BATCH = 100;
/** How long an Idempotency-Key is remembered (docs/api.md#idempotency-key). */
export { IDEMPOTENCY_TTL_MS };
const DIRECTIONS = ["Transmit", "Receive"];

/** The fields of the six-field Message resource (docs/api.md#send-sms), which the full record starts with. */
function resourceFields(m: Message) {
  return { messageSid: m.sid, accountSid: m.accountSid, propertySid: m.propertySid, from: m.sender, to: m.recipient, text: m.text };
}

/** The full message record (docs/api.md#message-record). */
export function toMessageRecord(m: Message): MessageRecord {
  return create(MessageRecordSchema, {
    ...resourceFields(m),
    direction: m.direction,
    status: m.status,
    numSegments: m.numSegments,
    encoding: m.encoding,
    deliveryReceipt: m.deliveryReceipt,
    schedule: BigInt(unixSeconds(m.scheduledAt)),
    created: BigInt(unixSeconds(m.createdAt)),
    submitted: BigInt(unixSeconds(m.submittedAt)),
    delivered: BigInt(unixSeconds(m.deliveredAt)),
    received: BigInt(unixSeconds(m.receivedAt)),
    errorCode: m.errorCode,
    carrierError: m.carrierError,
    carrier: m.carrier,
  });
}

async function ownedProperty(em: EntityManager, account: Account, propertySid: string): Promise<Property> {
  const property = isSid(propertySid, "PR") ? await findProperty(em, propertySid, account.sid) : null;
  if (!property) throw notFound("Property", propertySid);
  return property;
}

async function ownedMessage(em: EntityManager, account: Account, messageSid: string): Promise<Message> {
  const message = isSid(messageSid, "MG") ? await findAccountMessage(em, messageSid, account.sid) : null;
  if (!message) throw notFound("Message", messageSid);
  return message;
}

/** Creates the MessagingService implementation. */
export function createMessagingService(deps: MessagingDeps): ServiceImpl<typeof MessagingService> {
  const { clock } = deps;

  const writer = createSendWriter({ orm: deps.orm });

  /** Validates one send here (the rules that need no database), for the writer to check and store. */
  function prepare(account: Account, propertySid: string, req: SendMessageRequest, now: Date, idemKey?: string): SendItem {
    const checked = validateSend(req, Math.floor(now.getTime() / 1000), deps);
    const v = "send" in checked ? checked.send : undefined;
    // Alphanumeric IDs do not reach operators in some countries (US and CA by default): those go out leased.
    const leased = v !== undefined && goesOutLeased(v.fromKind, v.to, deps.noAlphaCountries);
    const idemHash = idemKey === undefined ? undefined : requestHash("SendMessage", SendMessageRequestSchema, req);
    return { account, propertySid, checked, leased, idemKey, idemHash, now, sid: newSid("MG") };
  }

  /**
   * Hands one send to the group-commit writer, which checks it against the database and stores it
   * with the sends waiting at the same moment; shared by single and batch sends. Answers only
   * after the message is committed.
   */
  async function send(account: Account, propertySid: string, req: SendMessageRequest, idemKey?: string): Promise<MessagePb> {
    // A malformed Sid cannot name a property: 404 without asking the database.
    if (!isSid(propertySid, "PR")) throw notFound("Property", propertySid);
    const item = prepare(account, propertySid, req, clock.now(), idemKey);
    let out: SendOutcome;
    try {
      out = await writer.submit(item);
    } catch (err) {
      // A concurrent request with the same Idempotency-Key committed first (this one waited for it
      // on the key): checked again, this send gets that answer, or 422 if it is another request.
      if (!idemKey || constraintViolation(err)?.kind !== "unique") throw err;
      out = await writer.submit({ ...item, sid: newSid("MG") });
    }
    if (out.dueNow) deps.onQueued?.();
    return out.message;
  }

  /** One batch item's answer: its message, or its own ResponseStatus. */
  function batchResult(o: ItemOutcome<MessagePb>) {
    if (!o.ok) return create(BatchResultSchema, { responseStatus: toResponseStatus(o.error).status });
    const m = o.value;
    return create(BatchResultSchema, { messageSid: m.messageSid, accountSid: m.accountSid, propertySid: m.propertySid, from: m.from, to: m.to, text: m.text });
  }

  return {
    async sendMessage(req: SendMessageRequest, ctx: HandlerContext) {
      return send(requireAccount(ctx), req.propertySid, req, ctx.values.get(kIdempotencyKey));
    },

    async sendBatch(req: SendBatchRequest, ctx: HandlerContext): Promise<SendBatchResponse> {
      const account = requireAccount(ctx);
      const em = requestEm(ctx);
      // Bad credentials are the batch's answer (one 401), not each item's; every item's store
      // re-checks them again in its own transaction.
      await recheckCredentials(em, account);
      const property = await ownedProperty(em, account, req.propertySid);
      if (req.messages.length === 0) throw fieldError("Messages", "MissingParameter", "Messages is required: a list of 1 to 100 send bodies.");
      if (req.messages.length > MAX_BATCH)
        throw fieldError("Messages", "InvalidParameter", `Messages holds ${req.messages.length} items; the limit is ${MAX_BATCH}.`);
      const key = ctx.values.get(kIdempotencyKey);
      if (key !== undefined) {
        // Under a key the batch is one transaction: the key, every item and the response it stores.
        const now = clock.now();
        const out = await writeKeyedBatch(deps.orm, {
          accountSid: account.sid,
          key,
          hash: requestHash("SendBatch", SendBatchRequestSchema, req),
          now,
          items: req.messages.map((item) => prepare(account, property.sid, item, now)),
          respond: (outcomes) =>
            create(SendBatchResponseSchema, { messages: outcomes.map((o) => batchResult(o.ok ? { ok: true, value: o.value.message } : o)) }),
        });
        if (out.dueNow) deps.onQueued?.();
        return out.response;
      }
      // Submitted together, the items share group commits; each keeps its own outcome, in request order.
      const results = await Promise.all(
        req.messages.map((item) =>
          send(account, property.sid, item).then(
            (m) => batchResult({ ok: true, value: m }),
            (error: unknown) => batchResult({ ok: false, error }),
          ),
        ),
      );
      // The token was rotated while the batch was stored and not one item got in: the batch's 401.
      // (If some got in first, each item keeps its own outcome: those messages were stored.)
      if (results.every((r) => r.responseStatus?.errorCode === "Unauthorized")) throw wrongCredentials();
      return create(SendBatchResponseSchema, { messages: results });
    },

    async getMessage(req: GetMessageRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      return toMessageRecord(await ownedMessage(requestEm(ctx), account, req.messageSid));
    },

    async listMessages(req: ListMessagesRequest, ctx: HandlerContext): Promise<ListMessagesResponse> {
      const account = requireAccount(ctx);
      const em = requestEm(ctx);
      const property = await ownedProperty(em, account, req.propertySid);
      const page = pageOf(req);
      const problems = [...page.problems];
      if (req.status !== "" && !(MESSAGE_STATUSES as readonly string[]).includes(req.status)) {
        problems.push({ field: "Status", code: "InvalidParameter", message: `Status must be one of ${MESSAGE_STATUSES.join(", ")}.` });
      }
      if (req.direction !== "" && !DIRECTIONS.includes(req.direction)) {
        problems.push({ field: "Direction", code: "InvalidParameter", message: "Direction must be Transmit or Receive." });
      }
      // Beyond years 1..9999 a Unix time is no Date the database (or JS) can hold: a 400, not a 500.
      for (const [field, value] of [
        ["Date_From", req.dateFrom],
        ["Date_To", req.dateTo],
      ] as const) {
        if (value !== undefined && (value < -62135596800n || value > 253402300799n)) {
          problems.push({ field, code: "InvalidParameter", message: `${field} must be Unix seconds between -62135596800 and 253402300799 (years 1 to 9999).` });
        }
      }
      if (problems.length > 0) throw fieldErrors(problems);
      const [rows, total] = await listMessages(
        em,
        {
          propertySid: property.sid,
          createdFrom: req.dateFrom !== undefined ? new Date(Number(req.dateFrom) * 1000) : undefined,
          createdTo: req.dateTo !== undefined ? new Date(Number(req.dateTo) * 1000) : undefined,
          status: req.status !== "" ? (req.status as MessageStatus) : undefined,
          direction: req.direction !== "" ? (req.direction as MessageDirection) : undefined,
        },
        page,
      );
      return create(ListMessagesResponseSchema, { messages: rows.map(toMessageRecord), totalCount: total });
    },

    async cancelMessage(req: CancelMessageRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      const em = requestEm(ctx);
      const { message, canceled } = await em.transactional(async (tx) => {
        await recheckCredentials(tx, account);
        const message = await ownedMessage(tx, account, req.messageSid);
        // The conditional update is the race guard: a dispatcher that claimed the row first wins.
        const canceled = await cancelScheduledMessage(tx, message.sid);
        if (canceled && message.leaseSid) await releaseLease(tx, message.leaseSid);
        return { message, canceled };
      });
      if (!canceled) {
        throw apiError(
          "MessageNotCancelable",
          `Message ${message.sid} is ${message.status}; only a Scheduled message that has not been handed to the carrier can be canceled.`,
        );
      }
      return toMessageRecord(await reloadMessage(em, message.sid));
    },
  };
}
