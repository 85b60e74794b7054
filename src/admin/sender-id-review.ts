/**
 * The operator's review of sender IDs (AdminService): the queue across accounts and the decision,
 * Registered or Rejected. The console's Sender IDs page (docs/console.md) and the CLI call these.
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import type { AdminService, ListSenderIdsRequest, ReviewSenderIdRequest } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { ListSenderIdsResponseSchema } from "../../gen/switchboard/v2/sender_ids_pb.js";
import { fieldError, notFound, senderIdNotPending } from "../common/errors.js";
import { isSid } from "../common/sid.js";
import type { SenderIdStatus } from "../senderids/sender-id.entity.js";
import { statusProblem, toSenderIdPb } from "../senderids/sender-id-service.js";
import { decidePendingSenderId, findSenderId, listSenderIds, reloadSenderId } from "../senderids/sender-id-store.js";
import { listInput } from "./admin-lists.js";

/** The sender ID methods of AdminService; `em` gives the request's EntityManager once the caller is known to be the operator. */
export function createSenderIdReview(deps: {
  em: (ctx: HandlerContext) => EntityManager;
}): Pick<ServiceImpl<typeof AdminService>, "listSenderIds" | "reviewSenderId"> {
  return {
    async listSenderIds(req: ListSenderIdsRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const status = req.status.trim() === "" ? "Pending" : req.status.trim();
      const input = await listInput(em, req, statusProblem(status, true));
      // Oldest first: the review queue is worked through in the order customers applied.
      const [rows, total] = await listSenderIds(em, { status: status === "All" ? undefined : (status as SenderIdStatus), accountSid: input.accountSid }, input);
      return create(ListSenderIdsResponseSchema, { senderIds: rows.map(toSenderIdPb), totalCount: total });
    },

    async reviewSenderId(req: ReviewSenderIdRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const row = isSid(req.senderIdSid, "SI") ? await findSenderId(em, req.senderIdSid) : null;
      if (!row) throw notFound("SenderId", req.senderIdSid);
      if (req.status !== "Registered" && req.status !== "Rejected") throw fieldError("Status", "InvalidParameter", "Status must be Registered or Rejected.");
      // Only a Pending sender ID moves, with a conditional update: of two reviews at the same moment
      // the first decides; the other then finds it decided, as it would arriving just after.
      const moved = await decidePendingSenderId(em, row.sid, req.status);
      if (!moved && !(await reloadSenderId(em, row))) throw notFound("SenderId", req.senderIdSid);
      if (moved) row.status = req.status;
      // The same decision again changes nothing and answers 200; a different one is refused.
      if (row.status !== req.status) throw senderIdNotPending(row.sid, row.status);
      return toSenderIdPb(row);
    },
  };
}
