import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type ConfigureNumberRequest,
  type ListNumbersRequest,
  type Number as NumberPb,
  NumberSchema,
  type NumberService,
  ListNumbersResponseSchema,
} from "../../gen/switchboard/v2/numbers_pb.js";
import { recheckCredentials } from "../accounts/auth.js";
import { findAddress } from "../addresses/address-store.js";
import { ownAccountPath } from "../addresses/address-service.js";
import { requestEm } from "../common/context.js";
import { requireAccount } from "../accounts/account-context.js";
import { addressNotOfAccount, fieldError, notFound } from "../common/errors.js";
import { checkedPage } from "../common/paging.js";
import { isSid } from "../common/sid.js";
import { findNumber, listNumbers } from "./number-store.js";
import type { PhoneNumber } from "./phone-number.entity.js";

/** The Number resource. */
export function toNumberPb(n: PhoneNumber): NumberPb {
  return create(NumberSchema, {
    number: n.number,
    accountSid: n.accountSid ?? "",
    friendly: n.friendly,
    addressSid: n.addressSid ?? "",
  });
}

/** Creates the NumberService implementation. */
export function createNumberService(): ServiceImpl<typeof NumberService> {
  return {
    async listNumbers(req: ListNumbersRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      ownAccountPath(account, req.accountSid);
      const page = checkedPage(req);
      const [rows, total] = await listNumbers(requestEm(ctx), { accountSid: account.sid }, page);
      return create(ListNumbersResponseSchema, { numbers: rows.map(toNumberPb), totalCount: total });
    },

    async configureNumber(req: ConfigureNumberRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      return requestEm(ctx).transactional(async (em) => {
        await recheckCredentials(em, account);
        // The path carries E164 without "+" (a "+" in a path is easily mangled); accept either.
        const digits = req.number.replace(/^\+/, "");
        const number = /^\d{8,15}$/.test(digits) ? await findNumber(em, `+${digits}`, account.sid) : null;
        if (!number) throw notFound("Number", req.number);
        if (req.friendly !== undefined) {
          if (req.friendly.length > 255) throw fieldError("Friendly", "InvalidParameter", "Friendly must be at most 255 characters.");
          number.friendly = req.friendly;
        }
        if (req.addressSid !== undefined) {
          const sid = req.addressSid.trim();
          if (sid === "") {
            number.addressSid = null;
          } else {
            const address = isSid(sid, "AD") ? await findAddress(em, sid, account.sid) : null;
            if (!address) throw addressNotOfAccount(sid);
            if (address.status !== "Active") {
              throw fieldError(
                "AddressSid",
                "AddressNotActive",
                `Address ${sid} is ${address.status}; numbers can only be registered against an Active address.`,
              );
            }
            number.addressSid = address.sid;
          }
        }
        // An address deleted meanwhile fails the deferred foreign key at commit: toConnectError answers
        // it as the check above would have (400 InvalidParameter on AddressSid).
        await em.flush();
        return toNumberPb(number);
      });
    },
  };
}
