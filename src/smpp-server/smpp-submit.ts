/**
 * A submit_sm as the Send SMS request REST would make of it (docs/smpp-server.md#submit_sm), and
 * every refusal as one command_status (the error table's SMPP column, common/errors.ts).
 */
import { create } from "@bufbuild/protobuf";
import { type SendMessageRequest, SendMessageRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { smppStatusOf, toResponseStatus, type ErrorCode, ERRORS } from "../common/errors.js";
import { PduError, status, type SubmitSmPdu } from "./smpp-pdu.js";
import { parseSmppTime, SmppTimeError } from "./smpp-time.js";

/** TON 1: international (E.164 without its +). */
const TON_INTERNATIONAL = 1;
/** TON 5: alphanumeric sender ID. */
const TON_ALPHANUMERIC = 5;
/** TON 0: unknown; taken as international when it is digits (what most clients mean). */
const TON_UNKNOWN = 0;
/** The longest queue wait a send takes (ValidityPeriod's bound, docs/api.md). */
const MAX_VALIDITY_SECONDS = 1_209_600;

function e164(addr: string, ton: number, what: "source" | "destination"): string {
  const digits = addr.startsWith("+") ? addr.slice(1) : addr;
  if (!/^\d+$/.test(digits)) {
    throw new PduError(status(what === "source" ? "ESME_RINVSRCADR" : "ESME_RINVDSTADR"), `${what}_addr with TON ${ton} must be digits`);
  }
  return `+${digits}`;
}

/** The From of a submit_sm: "" (a leased sender, as REST without From), a sender ID, or an E.164 number. */
function fromOf(pdu: SubmitSmPdu): string {
  if (pdu.sourceAddr === "") return "";
  if (pdu.sourceTon === TON_ALPHANUMERIC) return pdu.sourceAddr;
  if (pdu.sourceTon === TON_INTERNATIONAL) return e164(pdu.sourceAddr, pdu.sourceTon, "source");
  if (pdu.sourceTon === TON_UNKNOWN) return /^\+?\d+$/.test(pdu.sourceAddr) ? e164(pdu.sourceAddr, pdu.sourceTon, "source") : pdu.sourceAddr;
  throw new PduError(status("ESME_RINVSRCTON"), `source_addr_ton ${pdu.sourceTon} is not taken: 1 (international), 5 (alphanumeric) or 0`);
}

function toOf(pdu: SubmitSmPdu): string {
  if (pdu.destTon !== TON_INTERNATIONAL && pdu.destTon !== TON_UNKNOWN) {
    throw new PduError(status("ESME_RINVDSTTON"), `dest_addr_ton ${pdu.destTon} is not taken: 1 (international) or 0`);
  }
  if (pdu.destinationAddr === "") throw new PduError(status("ESME_RINVDSTADR"), "destination_addr is empty");
  return e164(pdu.destinationAddr, pdu.destTon, "destination");
}

function timeOf(text: string, now: Date, refusal: string): Date | undefined {
  try {
    return parseSmppTime(text, now);
  } catch (err) {
    if (err instanceof SmppTimeError) throw new PduError(status(refusal), err.message);
    throw err;
  }
}

/**
 * The Send SMS request of a submit_sm whose text is `text`: its From and To by their TON, its
 * schedule_delivery_time as Schedule, its validity_period as ValidityPeriod (the seconds from its
 * Schedule, or now, to the expiry; longer than 14 days is 14 days), registered_delivery as
 * DeliveryReceipt. Throws PduError with the status of what it cannot take.
 */
export function sendRequestOf(pdu: SubmitSmPdu, text: string, propertySid: string, now: Date): SendMessageRequest {
  const from = fromOf(pdu);
  const to = toOf(pdu);
  const schedule = timeOf(pdu.scheduleDeliveryTime, now, "ESME_RINVSCHED");
  const expiry = timeOf(pdu.validityPeriod, now, "ESME_RINVEXPIRY");
  let validityPeriod: number | undefined;
  if (expiry) {
    const start = schedule && schedule > now ? schedule : now;
    const seconds = Math.ceil((expiry.getTime() - start.getTime()) / 1000);
    if (seconds < 1) throw new PduError(status("ESME_RINVEXPIRY"), "validity_period ends before the message is due");
    validityPeriod = Math.min(seconds, MAX_VALIDITY_SECONDS);
  }
  return create(SendMessageRequestSchema, {
    propertySid,
    from,
    to,
    text,
    schedule: schedule && schedule > now ? BigInt(Math.floor(schedule.getTime() / 1000)) : undefined,
    deliveryReceipt: (pdu.registeredDelivery & 0x03) !== 0,
    validityPeriod,
  });
}

/**
 * The request fields whose problems have their own SMPP status, for the generic
 * MissingParameter and InvalidParameter: the field says which of the PDU's was wrong.
 */
const FIELD_STATUSES: Record<string, string> = {
  To: "ESME_RINVDSTADR",
  From: "ESME_RINVSRCADR",
  Schedule: "ESME_RINVSCHED",
  ValidityPeriod: "ESME_RINVEXPIRY",
  Text: "ESME_RINVMSGLEN",
};

/** The command_status of a refusal: a PduError's own, else the error table's SMPP column (by field for a generic parameter error). */
export function commandStatusOf(err: unknown): number {
  if (err instanceof PduError) return err.status;
  const { status: rs } = toResponseStatus(err);
  const code = (rs.errorCode in ERRORS ? rs.errorCode : "InternalError") as ErrorCode;
  if (code === "MissingParameter" || code === "InvalidParameter") {
    const field = rs.errors.map((e) => FIELD_STATUSES[e.fieldName]).find((s) => s !== undefined);
    if (field) return status(field);
  }
  return status(smppStatusOf(code));
}
