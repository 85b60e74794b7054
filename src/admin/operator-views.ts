/**
 * The operator's views of traffic (AdminService): the message search, a message's timeline, the
 * retry of a failed webhook call, the deployment's figures per minute, an account's opt-out
 * list, and the leases of pool numbers. The console (console/, docs/console.md) shows them; any operator client can call them.
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import {
  type AdminService,
  type GetMessageTimelineRequest,
  type ListAccountOptOutsRequest,
  type ListLeasesRequest,
  ListLeasesResponseSchema,
  MessageTimelineSchema,
  type MinuteCounts,
  type RetryWebhookRequest,
  type SearchMessagesRequest,
  SearchMessagesResponseSchema,
  StatsSchema,
  type TimelineEvent,
  type WebhookDelivery as WebhookDeliveryPb,
  WebhookDeliverySchema,
} from "../../gen/switchboard/admin/v1/admin_pb.js";
import { ListOptOutsResponseSchema } from "../../gen/switchboard/v2/opt_outs_pb.js";
import { accountExists } from "../accounts/account-store.js";
import { type Clock, unixSeconds } from "../common/clock.js";
import { apiError, fieldErrors, type FieldProblem, notFound, quoted } from "../common/errors.js";
import { checkedPage, pageOf } from "../common/paging.js";
import { parseE164, writeItAs } from "../common/phone.js";
import { formatMoney } from "../common/money.js";
import { isSid } from "../common/sid.js";
import { listLeases } from "../leases/lease-store.js";
import { MESSAGE_STATUSES, type Message, type MessageStatus } from "../messaging/message.entity.js";
import { toMessageRecord } from "../messaging/messaging-service.js";
import { DEFAULT_BILLING } from "../config.js";
import { conversationOf, findAnyMessage, outboundMinuteCounts, queueFigures, searchMessages } from "../messaging/message-operator-store.js";
import { toOptOutPb } from "../optouts/opt-out-service.js";
import { listOptOuts } from "../optouts/opt-out-store.js";
import type { WebhookAttempt } from "../webhooks/webhook-attempt.entity.js";
import type { WebhookDelivery } from "../webhooks/webhook-delivery.entity.js";
import { findWebhookDelivery, listWebhookDeliveries, retryFailedWebhook, webhookFigures } from "../webhooks/webhook-store.js";

/** Minutes of history GetStats answers: the last hour. */
export const STATS_MINUTES = 60;

/** Unix seconds bounds a time filter takes (years 1 to 9999), as the customer API's Date_From. */
const MIN_UNIX = -62135596800n;
const MAX_UNIX = 253402300799n;

/** A webhook id as the outbox makes them (`msg_` and base64url); anything else is not one. */
const WEBHOOK_ID = /^msg_[A-Za-z0-9_-]{1,64}$/;

const secs = (d: Date | null | undefined) => BigInt(unixSeconds(d ?? null));

/** A webhook call and its attempts as the operator sees them. */
export function toWebhookDeliveryPb(d: WebhookDelivery, attempts: WebhookAttempt[]): WebhookDeliveryPb {
  return create(WebhookDeliverySchema, {
    webhookId: d.id,
    eventType: d.eventType,
    url: d.url,
    method: d.method,
    status: d.status,
    attempts: d.attempts,
    nextAttempt: d.status === "Pending" ? secs(d.nextAttemptAt) : 0n,
    created: secs(d.createdAt),
    delivered: secs(d.deliveredAt),
    attemptLog: attempts.map((a) => ({ attempted: secs(a.attemptedAt), statusCode: a.statusCode ?? 0, error: a.error, durationMs: a.durationMs })),
  });
}

/** The search's filters, or a 400 naming every field that is wrong. */
function searchOf(req: SearchMessagesRequest) {
  const problems: FieldProblem[] = [];
  const text = (field: string, value: string, valid: (v: string) => boolean, what: string) => {
    const v = value.trim();
    if (v === "") return undefined;
    if (!valid(v))
      problems.push({ field, code: "InvalidParameter", message: `${field} ${quoted(value)} is not ${what}.${field === "To" ? writeItAs(v) : ""}` });
    return v;
  };
  const accountSid = text("AccountSid", req.accountSid, (v) => isSid(v, "AC"), "an AccountSid");
  const propertySid = text("PropertySid", req.propertySid, (v) => isSid(v, "PR"), "a PropertySid");
  const recipient = text("To", req.to, (v) => parseE164(v) !== undefined, "an E164 number such as +14155550123");
  const status = text("Status", req.status, (v) => (MESSAGE_STATUSES as readonly string[]).includes(v), `one of ${MESSAGE_STATUSES.join(", ")}`);
  const time = (field: string, value: bigint) => {
    if (value === 0n) return undefined;
    if (value < MIN_UNIX || value > MAX_UNIX) {
      problems.push({ field, code: "InvalidParameter", message: `${field} must be Unix seconds between ${MIN_UNIX} and ${MAX_UNIX} (years 1 to 9999).` });
      return undefined;
    }
    return new Date(Number(value) * 1000);
  };
  const createdFrom = time("CreatedFrom", req.createdFrom);
  const createdTo = time("CreatedTo", req.createdTo);
  const page = pageOf(req);
  problems.push(...page.problems);
  if (problems.length > 0) throw fieldErrors(problems);
  return { search: { accountSid, propertySid, recipient, status: status as MessageStatus | undefined, createdFrom, createdTo }, page };
}

/** The lease list's filters, or a 400 naming every field that is wrong. */
function leaseFilterOf(req: ListLeasesRequest) {
  const problems: FieldProblem[] = [];
  const number = req.number.trim();
  const accountSid = req.accountSid.trim();
  if (number !== "" && parseE164(number) === undefined) {
    problems.push({
      field: "Number",
      code: "InvalidParameter",
      message: `Number ${quoted(req.number)} is not an E164 number such as +14155550123.${writeItAs(number)}`,
    });
  }
  if (accountSid !== "" && !isSid(accountSid, "AC")) {
    problems.push({ field: "AccountSid", code: "InvalidParameter", message: `AccountSid ${quoted(req.accountSid)} is not an AccountSid.` });
  }
  const page = pageOf(req);
  problems.push(...page.problems);
  if (problems.length > 0) throw fieldErrors(problems);
  return {
    filter: { poolNumber: number === "" ? undefined : number, accountSid: accountSid === "" ? undefined : accountSid, includeEnded: req.includeExpired },
    page,
  };
}

/** What happened to a message, oldest first, from its own columns and its webhook attempts. */
function timelineOf(m: Message, webhooks: { delivery: WebhookDelivery; attempts: WebhookAttempt[] }[]): Omit<TimelineEvent, "$typeName">[] {
  const events: { at: Date; kind: string; detail: string }[] = [];
  const add = (at: Date | null | undefined, kind: string, detail: string) => {
    if (at) events.push({ at, kind, detail });
  };
  if (m.direction === "Receive") {
    add(m.receivedAt ?? m.createdAt, "Received", `From ${m.sender} to ${m.recipient}${m.inReplyTo ? `, a reply to ${m.inReplyTo}` : ""}`);
  } else {
    add(m.createdAt, "Accepted", `From ${m.sender} to ${m.recipient}, ${m.numSegments} segment(s)`);
    if (m.scheduledAt) add(m.createdAt, "Scheduled", `Due at ${m.sendAt.toISOString()}`);
    // The dispatcher keeps no claim time, only the claim's expiry while it holds it and the count.
    if (m.claimedUntil) add(m.claimedUntil, "Claimed", `Held by a dispatcher until this time (attempt ${m.attempts})`);
    else if (m.attempts > 0 && !m.submittedAt) add(m.sendAt, "Claimed", `${m.attempts} dispatch attempt(s)`);
    // carrier is "" when the deployment's CARRIER took it without a route table.
    add(m.submittedAt, "Submitted", `To ${m.carrier ? `carrier ${m.carrier}` : "the carrier"}${m.carrierRef ? `, reference ${m.carrierRef}` : ""}`);
    const why = [m.errorCode, m.carrierError].filter((s) => s !== "").join(": ");
    if (m.status === "Delivered") add(m.deliveredAt, "Delivered", "Delivery receipt: delivered");
    if (m.status === "Failed") add(m.deliveredAt ?? m.submittedAt ?? m.createdAt, "Failed", why || "Failed");
    if (m.status === "Canceled") add(m.sendAt, "Canceled", "Canceled before it was sent");
  }
  for (const { delivery, attempts } of webhooks) {
    for (const a of attempts) {
      const answer = a.statusCode ? `HTTP ${a.statusCode}` : "no answer";
      const error = a.error !== "" ? ` (${a.error})` : "";
      add(a.attemptedAt, "WebhookAttempt", `${delivery.eventType} ${delivery.method} ${delivery.url}: ${answer} in ${a.durationMs} ms${error}`);
    }
  }
  // Stable: events of the same second keep the order they were added in (the lifecycle's).
  events.sort((x, y) => x.at.getTime() - y.at.getTime());
  return events.map((e) => ({ at: secs(e.at), kind: e.kind, detail: e.detail }));
}

/** The operator's traffic views; `em` checks the operator's credentials and gives the request's EntityManager. */
export function createOperatorViews(deps: {
  clock: Clock;
  em: (ctx: HandlerContext) => EntityManager;
  /** BILLING_CURRENCY, the records' PriceUnit. */
  currency?: string;
}): Pick<ServiceImpl<typeof AdminService>, "searchMessages" | "getMessageTimeline" | "retryWebhook" | "getStats" | "listAccountOptOuts" | "listLeases"> {
  const record = (m: Message) => toMessageRecord(m, deps.currency ?? DEFAULT_BILLING.currency);
  return {
    async searchMessages(req: SearchMessagesRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const { search, page } = searchOf(req);
      const [rows, total] = await searchMessages(em, search, page);
      return create(SearchMessagesResponseSchema, { messages: rows.map(record), totalCount: total });
    },

    async getMessageTimeline(req: GetMessageTimelineRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const message = isSid(req.messageSid, "MG") ? await findAnyMessage(em, req.messageSid) : null;
      if (!message) throw notFound("Message", req.messageSid);
      const webhooks = await listWebhookDeliveries(em, message.sid);
      const chain = await conversationOf(em, message);
      return create(MessageTimelineSchema, {
        message: record(message),
        events: timelineOf(message, webhooks),
        webhooks: webhooks.map((w) => toWebhookDeliveryPb(w.delivery, w.attempts)),
        replyChain: chain.map(record),
        leaseSid: message.leaseSid ?? "",
        dispatchAttempts: message.attempts,
        // The operator's alone: MessageRecord (every /v2 answer) has no Cost.
        cost: message.cost === null || message.cost === undefined ? "" : formatMoney(BigInt(message.cost)),
      });
    },

    async retryWebhook(req: RetryWebhookRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const id = req.webhookId.trim();
      if (!WEBHOOK_ID.test(id)) throw notFound("Webhook call", req.webhookId);
      const moved = await retryFailedWebhook(em, id, deps.clock.now());
      const found = await findWebhookDelivery(em, id);
      if (!found) throw notFound("Webhook call", id);
      if (!moved) {
        throw apiError("WebhookNotFailed", `Webhook call ${id} is ${found.delivery.status}; only a Failed call can be retried.`);
      }
      return toWebhookDeliveryPb(found.delivery, found.attempts);
    },

    async getStats(_req: unknown, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const now = deps.clock.now();
      const last = Math.floor(now.getTime() / 60_000) * 60;
      const first = last - (STATS_MINUTES - 1) * 60;
      const [counts, queue, webhooks] = [
        await outboundMinuteCounts(em, new Date(first * 1000), new Date((last + 60) * 1000)),
        await queueFigures(em, now),
        await webhookFigures(em, now),
      ];
      const minutes = new Map<number, Omit<MinuteCounts, "$typeName" | "minute">>();
      for (let m = first; m <= last; m += 60) minutes.set(m, { accepted: 0, submitted: 0, delivered: 0, failed: 0 });
      for (const c of counts) {
        const row = minutes.get(c.minute);
        if (row) row[c.kind] += c.n;
      }
      const lag = (oldest: Date | null) => (oldest ? BigInt(Math.max(0, Math.floor((now.getTime() - oldest.getTime()) / 1000))) : 0n);
      return create(StatsSchema, {
        now: secs(now),
        minutes: [...minutes].map(([minute, c]) => ({ minute: BigInt(minute), ...c })),
        queueDepth: queue.due,
        dispatcherLagSeconds: lag(queue.oldestDue),
        scheduledLater: queue.later,
        webhookBacklog: webhooks.pending,
        webhooksDue: webhooks.due,
        webhookLagSeconds: lag(webhooks.oldestDue),
      });
    },

    async listAccountOptOuts(req: ListAccountOptOutsRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      if (!isSid(req.accountSid, "AC") || !(await accountExists(em, req.accountSid))) throw notFound("Account", req.accountSid);
      const page = checkedPage(req);
      const [rows, total] = await listOptOuts(em, req.accountSid, page);
      return create(ListOptOutsResponseSchema, { optOuts: rows.map(toOptOutPb), totalCount: total });
    },

    async listLeases(req: ListLeasesRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const { filter, page } = leaseFilterOf(req);
      const [rows, total] = await listLeases(em, filter, page, deps.clock.now());
      return create(ListLeasesResponseSchema, {
        totalCount: total,
        leases: rows.map((l) => ({
          leaseSid: l.sid,
          number: l.poolNumber,
          accountSid: l.accountSid,
          propertySid: l.propertySid,
          recipient: l.recipient,
          messageSid: l.messageSid,
          created: BigInt(l.created),
          expires: BigInt(l.expires),
          live: l.live,
        })),
      });
    },
  };
}
