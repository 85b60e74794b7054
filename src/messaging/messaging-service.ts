import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
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
  type SendBatchResponse,
  SendBatchResponseSchema,
  type SendMessageRequest,
  ListMessagesResponseSchema,
  BatchResultSchema,
} from "../../gen/switchboard/v2/messaging_pb.js";
import { Account } from "../accounts/account.entity.js";
import { recheckCredentials, wrongCredentials } from "../accounts/auth.js";
import { findProperty } from "../accounts/account-store.js";
import type { Property } from "../accounts/property.entity.js";
import { unixSeconds } from "../common/clock.js";
import { kIdempotencyKey, kSmppReceipt, requestEm } from "../common/context.js";
import { kServerTiming } from "../common/server-timing.js";
import { requireAccount } from "../accounts/account-context.js";
import { fieldError, fieldErrors, notFound, apiError, toResponseStatus } from "../common/errors.js";
import { pageOf } from "../common/paging.js";
import { isSid } from "../common/sid.js";
import type { ItemOutcome } from "../common/group-commit.js";
import { releaseLease } from "../leases/lease-allocator.js";
import { formatMoney } from "../common/money.js";
import { DEFAULT_BILLING } from "../config.js";
import { refundMessages } from "../billing/balance-store.js";
import { cancelScheduledMessage, findAccountMessage, listMessages, reloadMessage } from "./message-api-store.js";
import { MESSAGE_STATUSES, type Message, type MessageDirection, type MessageStatus } from "./message.entity.js";
import { createSendPipeline, type SendPipelineDeps } from "./send-pipeline.js";
import { segmentsOf } from "./send-rules.js";
import type { Admitted } from "../limits/account-limits.js";
import { IDEMPOTENCY_TTL_MS } from "./send-steps.js";

/** What the messaging service needs. */
/** What the service needs: the send pipeline's dependencies (send-pipeline.ts), and BILLING_CURRENCY (default AUD) for PriceUnit. */
export type MessagingDeps = SendPipelineDeps & { currency?: string };

/** At most this many items in one batch (docs/api.md#batch-send). */
export const MAX_BATCH = 100;
/** How long an Idempotency-Key is remembered (docs/api.md#idempotency-key). */
export { IDEMPOTENCY_TTL_MS };
const DIRECTIONS = ["Transmit", "Receive"];

/** The fields of the six-field Message resource (docs/api.md#send-sms), which the full record starts with. */
function resourceFields(m: Message) {
  return { messageSid: m.sid, accountSid: m.accountSid, propertySid: m.propertySid, from: m.sender, to: m.recipient, text: m.text };
}

/** The full message record (docs/api.md#message-record); `currency` is PriceUnit. */
export function toMessageRecord(m: Message, currency: string): MessageRecord {
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
    redacted: m.redacted,
    carrier: m.carrier,
    smartEncoded: m.smartEncoded,
    senderIdRegistered: m.senderIdRegistered ?? undefined,
    price: m.price === null || m.price === undefined ? "" : formatMoney(BigInt(m.price)),
    priceUnit: currency,
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
  // Every send, single or batch item, runs the one send pipeline (send-pipeline.ts).
  const pipeline = createSendPipeline(deps);
  const currency = deps.currency ?? DEFAULT_BILLING.currency;

  /** One batch item's answer: its message, or its own ResponseStatus. */
  function batchResult(o: ItemOutcome<MessagePb>) {
    if (!o.ok) return create(BatchResultSchema, { responseStatus: toResponseStatus(o.error).status });
    const m = o.value;
    return create(BatchResultSchema, { messageSid: m.messageSid, accountSid: m.accountSid, propertySid: m.propertySid, from: m.from, to: m.to, text: m.text });
  }

  return {
    async sendMessage(req: SendMessageRequest, ctx: HandlerContext) {
      return pipeline.send(requireAccount(ctx), req.propertySid, req, {
        idemKey: ctx.values.get(kIdempotencyKey),
        timing: ctx.values.get(kServerTiming),
        smppReceipt: ctx.values.get(kSmppReceipt),
      });
    },

    async sendBatch(req: SendBatchRequest, ctx: HandlerContext): Promise<SendBatchResponse> {
      const account = requireAccount(ctx);
      // The send rate first (the pipeline's first step, for every item at once): a refused batch
      // reads and writes nothing. A batch whose size is refused anyway is not charged.
      const count = req.messages.length;
      const admitted: Admitted = count >= 1 && count <= MAX_BATCH ? await pipeline.admitBatch(account, req.messages) : () => undefined;
      const em = requestEm(ctx);
      let property: Property;
      try {
        // Bad credentials are the batch's answer (one 401), not each item's; every item's store
        // re-checks them again in its own transaction.
        await recheckCredentials(em, account);
        property = await ownedProperty(em, account, req.propertySid);
      } catch (err) {
        // Nothing of the batch stored: its quota is given back.
        admitted(() => req.messages.reduce((n, m) => n + segmentsOf(m, account.smartEncoding), 0));
        throw err;
      }
      if (count === 0) throw fieldError("Messages", "MissingParameter", "Messages is required: a list of 1 to 100 send bodies.");
      if (count > MAX_BATCH) throw fieldError("Messages", "InvalidParameter", `Messages holds ${count} items; the limit is ${MAX_BATCH}.`);
      const key = ctx.values.get(kIdempotencyKey);
      if (key !== undefined) {
        // Under a key the batch is one transaction: the key, every item and the response it stores.
        return pipeline.sendKeyedBatch(account, property.sid, req, key, (outcomes) => create(SendBatchResponseSchema, { messages: outcomes.map(batchResult) }));
      }
      // Submitted together, the items share group commits; each keeps its own outcome, in request order.
      const results = await Promise.all(
        req.messages.map((item) =>
          pipeline.send(account, property.sid, item, { admitted }).then(
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
      return toMessageRecord(await ownedMessage(requestEm(ctx), account, req.messageSid), currency);
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
      return create(ListMessagesResponseSchema, { messages: rows.map((m) => toMessageRecord(m, currency)), totalCount: total });
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
        // A canceled message never reaches a carrier: its charge is given back, once (docs/billing.md#the-charge-on-the-send).
        if (canceled) await refundMessages(tx, [message.sid], deps.clock.now());
        return { message, canceled };
      });
      if (!canceled) {
        throw apiError(
          "MessageNotCancelable",
          `Message ${message.sid} is ${message.status}; only a Scheduled message that has not been handed to the carrier can be canceled.`,
        );
      }
      return toMessageRecord(await reloadMessage(em, message.sid), currency);
    },
  };
}
