import { Account } from "./accounts/account.entity.js";
import { Property } from "./accounts/property.entity.js";
import { Address } from "./addresses/address.entity.js";
import { SenderIdApplication } from "./senderids/sender-id.entity.js";
import { PhoneNumber } from "./numbers/phone-number.entity.js";
import { Message } from "./messaging/message.entity.js";
import { Lease } from "./leases/lease.entity.js";
import { IdempotencyKey } from "./messaging/idempotency-key.entity.js";
import { WebhookDelivery } from "./webhooks/webhook-delivery.entity.js";
import { WebhookAttempt } from "./webhooks/webhook-attempt.entity.js";
import { Email } from "./mail/email.entity.js";
import { UnmatchedInbound } from "./delivery/unmatched-inbound.entity.js";
import { CarrierSegment } from "./delivery/carrier-segment.entity.js";
import { PendingReceipt } from "./delivery/pending-receipt.entity.js";
import { InboundPart } from "./delivery/inbound-part.entity.js";
import { CarrierRow } from "./admin/carrier.entity.js";
import { RouteRow } from "./admin/route.entity.js";
import { OptOut } from "./optouts/opt-out.entity.js";
import { LimitBucket } from "./limits/limit-bucket.entity.js";
import { SweepPosition } from "./delivery/sweep-position.entity.js";
import { KeywordAnswer } from "./optouts/keyword-answer.entity.js";
import { ServiceSendOutboxRow } from "./messaging/service-send-outbox.entity.js";
import { RateCardRow, RateImportRow, RateRow } from "./billing/rate-card.entity.js";
import { AccountBalance, BalanceEntry } from "./billing/balance.entity.js";
import { UsageDay, UsagePending, UsageRollup } from "./billing/usage.entity.js";
import { SmppBind, SmppCredential } from "./accounts/smpp-credential.entity.js";
import { SmppOutboxRow } from "./messaging/smpp-outbox.entity.js";

/**
 * Every entity, listed explicitly (no folder discovery), in foreign-key order: one per table the
 * migrations create, one property per column (test/db/entity-schema.test.ts holds the two together).
 */
export const entities = [
  Account,
  Property,
  Address,
  SenderIdApplication,
  PhoneNumber,
  Message,
  Lease,
  IdempotencyKey,
  WebhookDelivery,
  WebhookAttempt,
  Email,
  UnmatchedInbound,
  CarrierSegment,
  PendingReceipt,
  InboundPart,
  CarrierRow,
  RouteRow,
  OptOut,
  LimitBucket,
  SweepPosition,
  KeywordAnswer,
  ServiceSendOutboxRow,
  RateCardRow,
  RateRow,
  RateImportRow,
  AccountBalance,
  BalanceEntry,
  UsageDay,
  UsageRollup,
  UsagePending,
  SmppCredential,
  SmppBind,
  SmppOutboxRow,
];
