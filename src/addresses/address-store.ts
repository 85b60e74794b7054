/**
 * Statements on `addresses`: the address service and the operator API call these, never the
 * EntityManager's queries themselves. Entities these return or add are managed by the
 * EntityManager, so a caller's changes to them are written by its flush.
 */
import type { RequiredEntityData } from "@mikro-orm/core";
import type { EntityManager } from "@mikro-orm/sql";
import type { Page } from "../accounts/account-store.js";
import { Address, type AddressStatus } from "./address.entity.js";

/** The address with this Sid (of this account, when given), or null. */
export function findAddress(em: EntityManager, sid: string, accountSid?: string): Promise<Address | null> {
  return em.findOne(Address, accountSid === undefined ? { sid } : { sid, accountSid });
}

/** What a list of addresses may match on, each exactly; absent fields match any value. */
export interface AddressFilter {
  accountSid?: string;
  status?: AddressStatus;
  friendly?: string;
  reference?: string;
  city?: string;
  region?: string;
  countryCode?: string;
  postalCode?: string;
}

/** A page of addresses, oldest first (the review queue is worked through in the order customers submitted), and how many match. */
export function listAddresses(em: EntityManager, filter: AddressFilter, page: Page): Promise<[Address[], number]> {
  const where: Record<string, string> = {};
  for (const [k, v] of Object.entries(filter)) if (v !== undefined) where[k] = v;
  return em.findAndCount(Address, where, { orderBy: { createdAt: "asc", sid: "asc" }, limit: page.limit, offset: page.offset });
}

/** A new address, written by the caller's next flush. */
export function addAddress(em: EntityManager, data: RequiredEntityData<Address>): Address {
  const address = em.create(Address, data);
  em.persist(address);
  return address;
}

/**
 * Moves a Pending address to `status`, with a conditional update: of two reviews at the same
 * moment the first decides. Whether it moved.
 */
export async function decidePendingAddress(em: EntityManager, sid: string, status: AddressStatus): Promise<boolean> {
  return (await em.nativeUpdate(Address, { sid, status: "Pending" }, { status })) === 1;
}

/** Reads the address again from the database into its entity; null when it is gone. */
export function reloadAddress(em: EntityManager, address: Address): Promise<Address | null> {
  return em.refresh(address);
}

/** Deletes the address; whether there was one to delete. */
export async function deleteAddress(em: EntityManager, sid: string): Promise<boolean> {
  return (await em.nativeDelete(Address, { sid })) > 0;
}
