import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  DeleteSenderIdResponseSchema,
  ListSenderIdsResponseSchema,
  type CreateSenderIdRequest,
  type DeleteSenderIdRequest,
  type ListSenderIdsRequest,
  type SenderId as SenderIdPb,
  type SenderIdService,
  SenderIdSchema,
} from "../../gen/switchboard/v2/sender_ids_pb.js";
import { requireAccount } from "../accounts/account-context.js";
import { recheckCredentials } from "../accounts/auth.js";
import { ownAccountPath } from "../addresses/address-service.js";
import { type Clock, unixSeconds } from "../common/clock.js";
import { requestEm } from "../common/context.js";
import { fieldErrors, notFound, quoted, senderIdTaken, type FieldProblem } from "../common/errors.js";
import { pageOf } from "../common/paging.js";
import { constraintViolation } from "../common/pg-errors.js";
import { isSid, newSid } from "../common/sid.js";
import type { SenderIdApplication, SenderIdStatus } from "./sender-id.entity.js";
import { validateSenderId } from "./sender-id-rules.js";
import { addSenderId, deleteSenderId, LIVE_SENDER_ID_KEY, listSenderIds } from "./sender-id-store.js";

export const SENDER_ID_STATUSES: readonly SenderIdStatus[] = ["Pending", "Registered", "Rejected"];

/** The SenderId resource (docs/api.md#sender-ids). */
export function toSenderIdPb(s: SenderIdApplication): SenderIdPb {
  return create(SenderIdSchema, {
    senderIdSid: s.sid,
    accountSid: s.accountSid,
    senderId: s.senderId,
    country: s.country,
    useCase: s.useCase,
    status: s.status,
    created: BigInt(unixSeconds(s.createdAt)),
  });
}

/** A Status filter's problem (`all`: the operator's "All" is allowed), or none. */
export function statusProblem(status: string, all: boolean): FieldProblem[] {
  if ((all && status === "All") || SENDER_ID_STATUSES.includes(status as SenderIdStatus)) return [];
  const allowed = `Pending, Registered${all ? ", Rejected or All" : " or Rejected"}`;
  return [{ field: "Status", code: "InvalidParameter", message: `Status must be ${allowed}, not ${quoted(status)}.` }];
}

/** Creates the SenderIdService implementation. */
export function createSenderIdService(deps: { clock: Clock }): ServiceImpl<typeof SenderIdService> {
  return {
    async createSenderId(req: CreateSenderIdRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      return requestEm(ctx).transactional(async (tx) => {
        await recheckCredentials(tx, account);
        ownAccountPath(account, req.accountSid);
        const checked = validateSenderId(req);
        if ("problems" in checked) throw fieldErrors(checked.problems);
        const { senderId, country, useCase } = checked.senderId;
        try {
          const row = await addSenderId(tx, {
            sid: newSid("SI"),
            accountSid: account.sid,
            senderId,
            country,
            useCase,
            status: "Pending",
            createdAt: deps.clock.now(),
          });
          return toSenderIdPb(row);
        } catch (err) {
          // The index is the one check: an application for a live name, now or at the same moment, of any account.
          if (constraintViolation(err)?.constraint === LIVE_SENDER_ID_KEY) throw senderIdTaken(senderId, country);
          throw err;
        }
      });
    },

    async listSenderIds(req: ListSenderIdsRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      ownAccountPath(account, req.accountSid);
      const page = pageOf(req);
      const status = req.status?.trim();
      const problems = [...(status === undefined ? [] : statusProblem(status, false)), ...page.problems];
      if (problems.length > 0) throw fieldErrors(problems);
      const [rows, total] = await listSenderIds(requestEm(ctx), { accountSid: account.sid, status: status as SenderIdStatus | undefined }, page);
      return create(ListSenderIdsResponseSchema, { senderIds: rows.map(toSenderIdPb), totalCount: total });
    },

    async deleteSenderId(req: DeleteSenderIdRequest, ctx: HandlerContext) {
      const account = requireAccount(ctx);
      return requestEm(ctx).transactional(async (tx) => {
        await recheckCredentials(tx, account);
        ownAccountPath(account, req.accountSid);
        if (!isSid(req.senderIdSid, "SI") || !(await deleteSenderId(tx, req.senderIdSid, account.sid))) throw notFound("SenderId", req.senderIdSid);
        return create(DeleteSenderIdResponseSchema, { senderIdSid: req.senderIdSid });
      });
    },
  };
}
