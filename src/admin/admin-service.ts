import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import {
  type AdminService,
  CreateAccountResponseSchema,
  type CancelQueuedRequest,
  CancelQueuedResponseSchema,
  RotateTokenResponseSchema,
  type CreateAccountRequest,
  type CreateNumberRequest,
  type CreatePropertyRequest,
  type ReviewAddressRequest,
  type RotateTokenRequest,
  type UpdateAccountRequest,
  type UpdatePropertyRequest,
  type InjectInboundRequest,
  type ListHandsetMessagesRequest,
  type ListWebhookDeliveriesRequest,
  InjectInboundResponseSchema,
  ListHandsetMessagesResponseSchema,
  ListWebhookDeliveriesResponseSchema,
  type ListEmailsRequest,
  ListEmailsResponseSchema,
  CarrierStatusSchema,
} from "../../gen/switchboard/admin/v1/admin_pb.js";
import { unixSeconds } from "../common/clock.js";
import { REST_COMPATIBILITIES, type RestCompatibility } from "../accounts/account.entity.js";
import { addAccount, addProperty, findAccountBySid, findProperty } from "../accounts/account-store.js";
import { type AccountCache, hashToken } from "../accounts/auth.js";
import { decidePendingAddress, findAddress, reloadAddress } from "../addresses/address-store.js";
import { toAddressPb } from "../addresses/address-service.js";
import type { Clock } from "../common/clock.js";
import { kAdmin, requestEm } from "../common/context.js";
import { addressNotPending, apiError, fieldError, notFound, numberExists, quoted, serviceUnavailable } from "../common/errors.js";
import { unreachableOf } from "../common/unreachable.js";
import { checkedPage } from "../common/paging.js";
import { parseE164, writeItAs } from "../common/phone.js";
import { isSid, newSid, randomSecret } from "../common/sid.js";
import { listEmails } from "../mail/mail-store.js";
import { addNumber, findNumber } from "../numbers/number-store.js";
import { toNumberPb } from "../numbers/number-service.js";
import { listWebhookDeliveries } from "../webhooks/webhook-store.js";
import { cancelQueuedMessages } from "../messaging/message-store.js";
import { refundMessages } from "../billing/balance-store.js";
import { releaseLease } from "../leases/lease-allocator.js";
import { applyAccountSettings } from "./account-settings.js";
import { applyAccountBilling, checkAccountBilling, createBalanceAdmin } from "./account-billing.js";
import { balanceOf, rearmLowBalance } from "../billing/balance-store.js";
import { DEFAULT_BILLING } from "../config.js";
import { createAdminLists, findAccount, toAccountPb, toPropertyPb } from "./admin-lists.js";
import { type CarrierAdminDeps, createCarrierAdmin } from "./carrier-admin.js";
import { createSenderIdReview } from "./sender-id-review.js";
import { createOperatorViews, toWebhookDeliveryPb } from "./operator-views.js";
import { createRateCardAdmin } from "./rate-card-admin.js";
import { createOperatorUsage } from "./operator-usage.js";
import { createSmppAdmin } from "./smpp-admin.js";
import { quotaUsedToday } from "../limits/account-limits.js";
import { redactionOf, segmentsStoredSince } from "../messaging/message-operator-store.js";
import type { SharedAllowance } from "../limits/shared-allowance.js";

/** Tokens are at least 32 random characters; we issue 40 (docs/api.md#authentication). */
export const TOKEN_LENGTH = 40;

/** A Standard Webhooks secret: "whsec_" and base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

function requireAdmin(ctx: HandlerContext): EntityManager {
  if (!ctx.values.get(kAdmin)) throw apiError("Unauthorized", "Operator calls need the admin bearer token.");
  return requestEm(ctx);
}

function checkName(name: string | undefined, required: boolean): string | undefined {
  if (name === undefined) {
    if (required) throw fieldError("Name", "MissingParameter", "Name is required.");
    return undefined;
  }
  const n = name.trim();
  if (n === "" && required) throw fieldError("Name", "MissingParameter", "Name is required.");
  if (n.length > 255) throw fieldError("Name", "InvalidParameter", "Name must be at most 255 characters.");
  return n;
}

/** A RestCompatibility value from a request: undefined when omitted, else one of the known formats. */
function checkRestCompatibility(value: string | undefined): RestCompatibility | undefined {
  if (value === undefined) return undefined;
  const known = REST_COMPATIBILITIES.find((c) => c === value);
  if (!known) {
    throw fieldError("RestCompatibility", "InvalidParameter", `RestCompatibility must be ${REST_COMPATIBILITIES.join(" or ")}; got ${quoted(value)}.`);
  }
  return known;
}

/** Longest RetentionDays or RedactAfterDays an account takes: a hundred years. */
export const MAX_RETENTION_DAYS = 36500;

/**
 * An account's RetentionDays or RedactAfterDays from an update: undefined when omitted, null for
 * 0 (cleared), else a whole number of days from 1 to MAX_RETENTION_DAYS.
 */
function checkDays(field: "RetentionDays" | "RedactAfterDays", value: number | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 0) return null;
  if (value < 0 || value > MAX_RETENTION_DAYS) {
    throw fieldError(field, "InvalidParameter", `${field} must be a whole number of days from 1 to ${MAX_RETENTION_DAYS}, or 0 to clear it; got ${value}.`);
  }
  return value;
}

/**
 * What the operator API reads of the running carrier: its name and link state. Declared here
 * rather than imported from delivery so that this service stays below the delivery layer;
 * delivery's Carrier satisfies it as it is.
 */
export interface OperatorCarrier {
  readonly name: string;
  status?(): { link: string; since: Date | null; lastError: string; inFlight: number; window: number; tps: number; queued: number };
}

/** What reached the simulated handsets (the process's simulated network, carriers/simulator.ts). */
export interface SimulatedHandsets {
  handsetMessages(number: string): { messageSid: string; from: string; to: string; text: string; at: Date }[];
}

/** What the operator API drives of the simulator carrier (CARRIER=simulator): its handsets. */
interface SimulatorControls extends OperatorCarrier, SimulatedHandsets {
  injectInbound(sms: { from: string; to: string; text: string }): Promise<{ messageSid: string; inReplyTo: string }>;
}

/** Creates the operator's AdminService implementation. */
export function createAdminService(
  deps: {
    clock: Clock;
    carrier?: OperatorCarrier;
    accounts?: AccountCache;
    limits?: SharedAllowance;
    /** The process's simulated network, which every simulator carrier (the environment's, `simulator` rows) delivers to. */
    handsets?: SimulatedHandsets;
    /** BILLING_CURRENCY (default AUD): the PriceUnit of the accounts' balances. */
    currency?: string;
    /** WEBHOOK_ALLOW_PRIVATE: whether an account's LowBalanceWebhookUri may name a private address (default false). */
    webhookAllowPrivate?: boolean;
  } & Partial<Pick<CarrierAdminDeps, "carrierLinks" | "routingChanged">>,
): ServiceImpl<typeof AdminService> {
  const simulator = (): SimulatorControls => {
    if (deps.carrier?.name !== "simulator") {
      throw apiError("InvalidParameter", "The simulator endpoints work only with CARRIER=simulator.");
    }
    return deps.carrier as SimulatorControls;
  };
  const currency = deps.currency ?? DEFAULT_BILLING.currency;
  return {
    ...createOperatorUsage({ em: requireAdmin, currency }),
    ...createAdminLists({
      clock: deps.clock,
      currency,
      em: requireAdmin,
      segmentsToday: (account, em) => {
        const now = deps.clock.now();
        // An account with a quota: the quota's own count (what the shared store granted today).
        if (deps.limits && account.dailySegmentQuota) {
          return quotaUsedToday(deps.limits, account, now.getTime()).catch((err: unknown) => {
            throw serviceUnavailable(unreachableOf(err) ?? "database");
          });
        }
        return segmentsStoredSince(em, account.sid, new Date(`${now.toISOString().slice(0, 10)}T00:00:00Z`));
      },
    }),
    ...createOperatorViews({ clock: deps.clock, em: requireAdmin, currency: deps.currency }),
    ...createSenderIdReview({ em: requireAdmin }),
    ...createCarrierAdmin({ clock: deps.clock, em: requireAdmin, carrierLinks: deps.carrierLinks, routingChanged: deps.routingChanged }),
    ...createRateCardAdmin({ clock: deps.clock, em: requireAdmin }),
    ...createBalanceAdmin({ clock: deps.clock, currency, em: requireAdmin }),
    ...createSmppAdmin({ clock: deps.clock, em: requireAdmin }),

    async getCarrierStatus(_req: unknown, ctx: HandlerContext) {
      requireAdmin(ctx);
      const s = deps.carrier?.status?.();
      return create(CarrierStatusSchema, {
        carrier: deps.carrier?.name ?? "",
        link: s?.link ?? "",
        since: BigInt(unixSeconds(s?.since ?? null)),
        lastError: s?.lastError ?? "",
        inFlight: s?.inFlight ?? 0,
        window: Number.isFinite(s?.window) ? (s?.window ?? 0) : 0,
        tps: s?.tps ?? 0,
        queued: s?.queued ?? 0,
      });
    },

    async createAccount(req: CreateAccountRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const name = checkName(req.name, true)!;
      const restCompatibility = checkRestCompatibility(req.restCompatibility) ?? "None";
      const billing = await checkAccountBilling(em, req, { webhookAllowPrivate: deps.webhookAllowPrivate ?? false });
      const token = randomSecret(TOKEN_LENGTH);
      const webhookSecret = newWebhookSecret();
      const account = addAccount(em, {
        sid: newSid("AC"),
        name,
        smsEnabled: req.smsEnabled ?? true,
        restCompatibility,
        smartEncoding: req.smartEncoding ?? true,
        rateCard: billing.rateCard ?? null,
        billingMode: billing.billingMode ?? "Postpaid",
        creditLimit: billing.creditLimit ?? null,
        tokenHash: hashToken(token),
        webhookSecret,
        createdAt: deps.clock.now(),
      });
      await em.flush();
      return create(CreateAccountResponseSchema, {
        accountSid: account.sid,
        name,
        smsEnabled: account.smsEnabled,
        token,
        webhookSecret,
        restCompatibility: account.restCompatibility,
      });
    },

    async updateAccount(req: UpdateAccountRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const account = await findAccount(em, req.accountSid);
      const name = checkName(req.name, false);
      if (name !== undefined && name !== "") account.name = name;
      if (req.smsEnabled !== undefined) account.smsEnabled = req.smsEnabled;
      const compatibility = checkRestCompatibility(req.restCompatibility);
      const retentionDays = checkDays("RetentionDays", req.retentionDays);
      const redactAfterDays = checkDays("RedactAfterDays", req.redactAfterDays);
      if (compatibility !== undefined) account.restCompatibility = compatibility;
      if (retentionDays !== undefined) account.retentionDays = retentionDays;
      if (redactAfterDays !== undefined) account.redactAfterDays = redactAfterDays;
      applyAccountSettings(account, req);
      const lowBalanceChanged = applyAccountBilling(account, await checkAccountBilling(em, req, { webhookAllowPrivate: deps.webhookAllowPrivate ?? false }));
      // New low-balance settings arm the webhook again, in the transaction that writes them
      // (docs/billing.md#low-balance): the next charge below the threshold sends one.
      await em.transactional(async (tx) => {
        if (lowBalanceChanged) await rearmLowBalance(tx, account.sid);
      });
      deps.accounts?.invalidate(account.sid);
      return toAccountPb(account, { balance: await balanceOf(em, account.sid), priceUnit: currency });
    },

    async rotateToken(req: RotateTokenRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const account = await findAccount(em, req.accountSid);
      const token = randomSecret(TOKEN_LENGTH);
      account.tokenHash = hashToken(token);
      await em.flush();
      deps.accounts?.invalidate(account.sid);
      return create(RotateTokenResponseSchema, { accountSid: account.sid, token });
    },

    async cancelQueued(req: CancelQueuedRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const account = await findAccount(em, req.accountSid);
      // The leases of the canceled messages are released with them, as the client's cancel does.
      const canceled = await em.transactional(async (tx) => {
        const rows = await cancelQueuedMessages(tx, account.sid);
        for (const r of rows) if (r.lease_sid) await releaseLease(tx, r.lease_sid);
        // Never sent: their charges are given back (docs/billing.md#the-charge-on-the-send).
        await refundMessages(
          tx,
          rows.map((r) => r.sid),
          deps.clock.now(),
        );
        return rows.length;
      });
      return create(CancelQueuedResponseSchema, { accountSid: account.sid, canceled });
    },

    async createProperty(req: CreatePropertyRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const account = await findAccount(em, req.accountSid);
      const name = checkName(req.name, true)!;
      const property = addProperty(em, {
        sid: newSid("PR"),
        accountSid: account.sid,
        name,
        smsEnabled: req.smsEnabled ?? true,
        createdAt: deps.clock.now(),
      });
      await em.flush();
      return toPropertyPb(property);
    },

    async updateProperty(req: UpdatePropertyRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const property = isSid(req.propertySid, "PR") ? await findProperty(em, req.propertySid) : null;
      if (!property) throw notFound("Property", req.propertySid);
      const name = checkName(req.name, false);
      if (name !== undefined && name !== "") property.name = name;
      if (req.smsEnabled !== undefined) property.smsEnabled = req.smsEnabled;
      await em.flush();
      return toPropertyPb(property);
    },

    async createNumber(req: CreateNumberRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const value = req.number.trim();
      if (value === "") throw fieldError("Number", "MissingParameter", "Number is required: an E164 number such as +14155550123.");
      if (!parseE164(value))
        throw fieldError("Number", "InvalidParameter", `Number ${quoted(req.number)} is not a valid E164 number such as +14155550123.${writeItAs(value)}`);
      let accountSid: string | null = null;
      if (req.accountSid.trim() !== "") {
        const account = isSid(req.accountSid, "AC") ? await findAccountBySid(em, req.accountSid) : null;
        if (!account) throw fieldError("AccountSid", "InvalidParameter", `AccountSid ${quoted(req.accountSid)} is not an account.`);
        accountSid = account.sid;
      }
      // The unique key is the guard against the same number added at the same moment: toConnectError
      // answers its violation with the same NumberExists.
      if (await findNumber(em, value)) throw numberExists(value);
      const number = addNumber(em, {
        sid: newSid("PN"),
        number: value,
        accountSid,
        friendly: "",
        addressSid: null,
        createdAt: deps.clock.now(),
      });
      await em.flush();
      return toNumberPb(number);
    },

    async reviewAddress(req: ReviewAddressRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const address = isSid(req.addressSid, "AD") ? await findAddress(em, req.addressSid) : null;
      if (!address) throw notFound("Address", req.addressSid);
      if (req.status !== "Active" && req.status !== "Rejected") {
        throw fieldError("Status", "InvalidParameter", "Status must be Active or Rejected.");
      }
      // Only a Pending address moves, with a conditional update: of two reviews at the same moment
      // the first decides; the other then finds it decided, as it would arriving just after.
      const moved = await decidePendingAddress(em, address.sid, req.status);
      if (!moved && !(await reloadAddress(em, address))) throw notFound("Address", req.addressSid);
      if (moved) address.status = req.status;
      // The same decision again changes nothing and answers 200; a different one is refused.
      if (address.status !== req.status) throw addressNotPending(address.sid, address.status);
      return toAddressPb(address);
    },

    async injectInbound(req: InjectInboundRequest, ctx: HandlerContext) {
      requireAdmin(ctx);
      const sim = simulator();
      const from = req.from.trim();
      if (!parseE164(from)) throw fieldError("From", "InvalidParameter", `From must be the handset's E164 number, e.g. +14155550123.${writeItAs(from)}`);
      if (!parseE164(req.to.trim()))
        throw fieldError("To", "InvalidParameter", `To must be an E164 number of the service, e.g. a leased pool number.${writeItAs(req.to)}`);
      const result = await sim.injectInbound({ from, to: req.to.trim(), text: req.text });
      return create(InjectInboundResponseSchema, result);
    },

    async listHandsetMessages(req: ListHandsetMessagesRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const number = `+${req.number.replace(/^\+/, "")}`;
      const delivered = (deps.handsets ?? simulator()).handsetMessages(number);
      // The network's copy follows the message's retention: none once the message was purged,
      // and an empty Text once its text was redacted (RetentionDays, RedactAfterDays).
      const redacted = await redactionOf(
        em,
        delivered.map((m) => m.messageSid),
      );
      const messages = delivered
        .filter((m) => redacted.has(m.messageSid))
        .map((m) => ({
          messageSid: m.messageSid,
          from: m.from,
          to: m.to,
          text: redacted.get(m.messageSid) ? "" : m.text,
          received: BigInt(unixSeconds(m.at)),
        }));
      return create(ListHandsetMessagesResponseSchema, { messages });
    },

    async listEmails(req: ListEmailsRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      const page = checkedPage(req);
      const [rows, total] = await listEmails(em, page);
      return create(ListEmailsResponseSchema, {
        totalCount: total,
        emails: rows.map((r) => ({
          emailId: r.id,
          accountSid: r.accountSid,
          messageSid: r.messageSid,
          from: r.mailFrom,
          to: r.mailTo,
          subject: r.subject,
          body: r.body,
          status: r.status,
          created: BigInt(unixSeconds(r.createdAt)),
          sent: BigInt(unixSeconds(r.sentAt)),
        })),
      });
    },

    async listWebhookDeliveries(req: ListWebhookDeliveriesRequest, ctx: HandlerContext) {
      const em = requireAdmin(ctx);
      if (!isSid(req.messageSid, "MG")) throw notFound("Message", req.messageSid);
      const deliveries = await listWebhookDeliveries(em, req.messageSid);
      return create(ListWebhookDeliveriesResponseSchema, { deliveries: deliveries.map((d) => toWebhookDeliveryPb(d.delivery, d.attempts)) });
    },
  };
}
