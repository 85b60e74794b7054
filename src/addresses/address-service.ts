import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import {
  type Address as AddressPb,
  type AddressService,
  AddressSchema,
  DeleteAddressResponseSchema,
  ListAddressesResponseSchema,
  type CreateAddressRequest,
  type DeleteAddressRequest,
  type GetAddressRequest,
  type ListAddressesRequest,
} from "../../gen/switchboard/v2/addresses_pb.js";
import type { Account } from "../accounts/account.entity.js";
import { recheckCredentials } from "../accounts/auth.js";
import type { Clock } from "../common/clock.js";
import { requestEm } from "../common/context.js";
import { requireAccount } from "../accounts/account-context.js";
import { addressInUse, fieldErrors, notFound } from "../common/errors.js";
import { checkedPage } from "../common/paging.js";
import { isSid, newSid } from "../common/sid.js";
import { addressHasNumbers } from "../numbers/number-store.js";
import type { Address } from "./address.entity.js";
import { addAddress, deleteAddress, findAddress, listAddresses } from "./address-store.js";
import { validateAddress } from "./address-rules.js";

/** The Address resource (docs/api.md#add-an-address). */
export function toAddressPb(a: Address): AddressPb {
  return create(AddressSchema, {
    addressSid: a.sid,
    accountSid: a.accountSid,
    friendly: a.friendly,
    reference: a.reference,
    line1: a.line1,
    line2: a.line2,
    city: a.city,
    region: a.region,
    countryCode: a.countryCode,
    postalCode: a.postalCode,
    status: a.status,
  });
}

/** The account's own address, or 404 for anything else. */
export async function ownedAddress(em: EntityManager, account: Account, addressSid: string): Promise<Address> {
  const address = isSid(addressSid, "AD") ? await findAddress(em, addressSid, account.sid) : null;
  if (!address) throw notFound("Address", addressSid);
  return address;
}

/** The path's AccountSid must be the caller's own; any other is invisible (404). */
export function ownAccountPath(account: Account, accountSid: string): void {
  if (accountSid !== account.sid) throw notFound("Account", accountSid);
}

/** Creates the AddressService implementation. */
export function createAddressService(deps: { clock: Clock }): ServiceImpl<typeof AddressService> {
  return {
    async createAddress(req: CreateAddressRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      return requestEm(ctx).transactional(async (tx) => {
        await recheckCredentials(tx, account);
        ownAccountPath(account, req.accountSid);
        const checked = validateAddress(req);
        if ("problems" in checked) throw fieldErrors(checked.problems);
        const address = addAddress(tx, { sid: newSid("AD"), accountSid: account.sid, ...checked.address, createdAt: deps.clock.now() });
        await tx.flush();
        return toAddressPb(address);
      });
    },

    async getAddress(req: GetAddressRequest, ctx: HandlerContext) {
      return toAddressPb(await ownedAddress(requestEm(ctx), requireAccount(ctx), req.addressSid));
    },

    async listAddresses(req: ListAddressesRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      ownAccountPath(account, req.accountSid);
      const page = checkedPage(req);
      const [rows, total] = await listAddresses(
        requestEm(ctx),
        {
          accountSid: account.sid,
          friendly: req.friendly,
          reference: req.reference,
          city: req.city,
          region: req.region,
          countryCode: req.countryCode?.toUpperCase(),
          postalCode: req.postalCode,
        },
        page,
      );
      return create(ListAddressesResponseSchema, { addresses: rows.map(toAddressPb), totalCount: total });
    },

    async deleteAddress(req: DeleteAddressRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      return requestEm(ctx).transactional(async (tx) => {
        await recheckCredentials(tx, account);
        const address = await ownedAddress(tx, account, req.addressSid);
        if (await addressHasNumbers(tx, address.sid)) throw addressInUse(address.sid);
        // The foreign key from numbers (ON DELETE RESTRICT) is the real guard against a number
        // assigned meanwhile: toConnectError answers its violation with AddressInUse too. A delete
        // that finds the row gone was beaten by another delete: 404, as a delete after a delete.
        if (!(await deleteAddress(tx, address.sid))) throw notFound("Address", address.sid);
        return create(DeleteAddressResponseSchema, { addressSid: address.sid });
      });
    },
  };
}
