/**
 * A submit_sm's text: its data_coding, and the part of a long text it may be (a UDH
 * concatenation header, or the sar_* TLVs). Parts are joined as bytes and decoded once whole, so
 * a UCS-2 character (an emoji's surrogate pair) split between two parts comes out whole.
 */
import smpp from "smpp";
import { PduError, status, type SubmitSmPdu } from "./smpp-pdu.js";

/** The data codings the server takes: SMSC default (GSM 7, one septet per octet), IA5, Latin-1, UCS-2. */
export const DATA_CODINGS = new Set([0, 1, 3, 8]);

/** The UDH indicator of esm_class. */
const UDHI = 0x40;

/** Where a submit_sm stands in a long text: its own message, or one part of one. */
export interface TextPart {
  /** The text's bytes (without the UDH), in the PDU's data_coding. */
  bytes: Buffer;
  /** Absent: the whole text. */
  part?: { ref: number; total: number; seq: number };
}

/** The text bytes of a submit_sm and the part it is; throws PduError. */
export function textPartOf(pdu: SubmitSmPdu): TextPart {
  if (!DATA_CODINGS.has(pdu.dataCoding)) {
    throw new PduError(status("ESME_RINVDCS"), `data_coding ${pdu.dataCoding} is not taken: 0 (GSM 7), 1 (IA5), 3 (Latin-1) or 8 (UCS-2)`);
  }
  let bytes = pdu.messagePayload ?? pdu.shortMessage;
  let part = pdu.sar;
  if ((pdu.esmClass & UDHI) !== 0) {
    const udhl = bytes[0];
    if (udhl === undefined || udhl + 1 > bytes.length) throw new PduError(status("ESME_RINVESMCLASS"), "esm_class says a UDH comes first, and none fits");
    const udh = bytes.subarray(1, 1 + udhl);
    bytes = bytes.subarray(1 + udhl);
    // The information elements: 0x00 (8-bit reference) and 0x08 (16-bit) are concatenation.
    for (let i = 0; i + 2 <= udh.length;) {
      const iei = udh[i]!;
      const len = udh[i + 1]!;
      const data = udh.subarray(i + 2, i + 2 + len);
      if (data.length < len) throw new PduError(status("ESME_RINVESMCLASS"), "a UDH element is cut short");
      if (iei === 0x00 && len === 3) part = { ref: data[0]!, total: data[1]!, seq: data[2]! };
      else if (iei === 0x08 && len === 4) part = { ref: data.readUInt16BE(0), total: data[2]!, seq: data[3]! };
      i += 2 + len;
    }
  }
  if (part) {
    if (part.total === 0 || part.seq === 0 || part.seq > part.total) {
      throw new PduError(status("ESME_RINVTLVVAL"), `part ${part.seq} of ${part.total} is not a part`);
    }
    // A "long" text of one part is a text.
    if (part.total === 1) part = undefined;
  }
  return { bytes, part };
}

/** The text of whole bytes in a data_coding (one of DATA_CODINGS). */
export function decodeText(bytes: Buffer, dataCoding: number): string {
  switch (dataCoding) {
    case 8: {
      // UTF-16BE: an odd last octet cannot be a character.
      if (bytes.length % 2 !== 0) throw new PduError(status("ESME_RINVMSGLEN"), "a UCS-2 text has an odd number of octets");
      const le = Buffer.from(bytes);
      le.swap16();
      return le.toString("utf16le");
    }
    case 3:
      return bytes.toString("latin1");
    case 1:
      // IA5 is ASCII: the high bit is no character.
      return bytes.toString("ascii");
    default:
      // GSM 7 unpacked, with its escape table (the `smpp` package's decoder).
      return smpp.gsmCoder.decode(bytes);
  }
}
