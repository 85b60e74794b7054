/**
 * A message's state as SMPP says it (the SMPP 3.4 message_state table), for query_sm_resp and the receipts'
 * message_state TLV and `stat:` word.
 */
import { smppAbsoluteTime } from "./smpp-time.js";
import { SMPP_STATE_WORDS } from "../common/smpp-states.js";

/** SMPP message_state values. */
export const MESSAGE_STATE = { ENROUTE: 1, DELIVERED: 2, EXPIRED: 3, DELETED: 4, UNDELIVERABLE: 5, ACCEPTED: 6, UNKNOWN: 7, REJECTED: 8 } as const;

/** A message's Status (and ErrorCode) as an SMPP message_state. */
export function messageStateOf(status: string, errorCode: string): number {
  switch (status) {
    case "Delivered":
      return MESSAGE_STATE.DELIVERED;
    case "Failed":
      // Still queued when its validity ran out: the SMSC word for it is EXPIRED.
      return errorCode === "QueueTimeout" ? MESSAGE_STATE.EXPIRED : MESSAGE_STATE.UNDELIVERABLE;
    case "Canceled":
      return MESSAGE_STATE.DELETED;
    case "Received":
      return MESSAGE_STATE.ACCEPTED;
    default:
      // Scheduled, Processing, Submitted: on its way.
      return MESSAGE_STATE.ENROUTE;
  }
}

/** The receipt text's `stat:` word of a message_state. */
export const STAT_WORD = SMPP_STATE_WORDS;

/** The fields of a query_sm_resp for a message record. */
export function queryAnswer(record: { messageSid?: string; status?: string; errorCode?: string; delivered?: bigint }): Record<string, unknown> {
  const state = messageStateOf(record.status ?? "", record.errorCode ?? "");
  const finalSeconds = state === MESSAGE_STATE.DELIVERED ? Number(record.delivered ?? 0n) : 0;
  return {
    message_id: record.messageSid ?? "",
    final_date: finalSeconds > 0 ? smppAbsoluteTime(new Date(finalSeconds * 1000)) : "",
    message_state: state,
    error_code: 0,
  };
}
