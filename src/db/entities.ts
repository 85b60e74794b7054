import { Account } from "../accounts/account.entity.js";
import { Property } from "../accounts/property.entity.js";
import { Address } from "../addresses/address.entity.js";
import { PhoneNumber } from "../numbers/phone-number.entity.js";
import { Message } from "../messaging/message.entity.js";
import { Lease } from "../leases/lease.entity.js";
import { IdempotencyKey } from "../messaging/idempotency-key.entity.js";
import { CarrierSegment, InboundPart, PendingReceipt } from "../carriers/smpp/carrier-records.entity.js";

/** Every entity, listed explicitly (no folder discovery), in foreign-key order. */
export const entities = [Account, Property, Address, PhoneNumber, Message, Lease, IdempotencyKey, CarrierSegment, PendingReceipt, InboundPart];
