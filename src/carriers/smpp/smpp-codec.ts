import { SegmentedMessage } from "sms-segments-calculator";
import smpp from "smpp";
import { parsePhoneNumberFromString, type CountryCode } from "libphonenumber-js";
import { textEncoding } from "../../common/sms-text.js";
import { SMPP_STATE_WORDS } from "../../common/smpp-states.js";

/** SMPP 3.4 command statuses this carrier acts on. */
export const STATUS = {
  OK: 0x00,
  SYSERR: 0x08,
  MSGQFUL: 0x14,
  THROTTLED: 0x58,
  X_T_APPN: 0x64,
} as const;

const statusNames = new Map<number, string>(Object.entries(smpp.errors).map(([name, code]) => [code, name]));

/** A command status as the docs and CarrierError show it: "0x0000000B ESME_RINVDSTADR". */
export function formatStatus(status: number): string {
  return `0x${status.toString(16).toUpperCase().padStart(8, "0")} ${statusNames.get(status) ?? "unknown status"}`;
}

/** Whether a refused submit_sm may succeed later (the SMSC's own trouble, not the message's). */
export function isTemporaryStatus(status: number): boolean {
  return status === STATUS.SYSERR || status === STATUS.MSGQFUL || status === STATUS.THROTTLED || status === STATUS.X_T_APPN;
}

/** Source address and its TON/NPI from a message's From: E164 → 1/1, alphanumeric → 5/0, digits (short code) → 0/1. */
export function sourceAddress(from: string): { source_addr: string; source_addr_ton: number; source_addr_npi: number } {
  if (from.startsWith("+")) return { source_addr: from.slice(1), source_addr_ton: 1, source_addr_npi: 1 };
  if (/^\d+$/.test(from)) return { source_addr: from, source_addr_ton: 0, source_addr_npi: 1 };
  return { source_addr: from, source_addr_ton: 5, source_addr_npi: 0 };
}

/** One submit_sm's message fields. */
export interface SubmitPart {
  esm_class: number;
  data_coding: number;
  short_message: Buffer;
}

function encodeText(text: string, ucs2: boolean): Buffer {
  return ucs2 ? Buffer.from(text, "utf16le").swap16() : smpp.gsmCoder.encode(text, 0);
}

/**
 * The submit_sm message fields for a text: data_coding 0 (GSM 7-bit, unpacked septets) or 8
 * (UCS-2) as the message's Encoding; a text longer than one segment is cut exactly where the
 * segment count (NumSegments) cuts it, each part carrying an 8-bit concatenation UDH.
 */
export function submitParts(text: string, ref: number): SubmitPart[] {
  const { encoding, numSegments } = textEncoding(text);
  const ucs2 = encoding === "UCS2";
  const dataCoding = ucs2 ? 8 : 0;
  if (numSegments <= 1) return [{ esm_class: 0, data_coding: dataCoding, short_message: encodeText(text, ucs2) }];
  const segments = new SegmentedMessage(text).segments.map((s) =>
    (s as unknown as { isUserDataHeader?: boolean; raw?: string }[])
      .filter((c) => !c.isUserDataHeader && typeof c.raw === "string")
      .map((c) => c.raw)
      .join(""),
  );
  const total = segments.length;
  return segments.map((part, i) => ({
    esm_class: 0x40,
    data_coding: dataCoding,
    short_message: Buffer.concat([Buffer.from([0x05, 0x00, 0x03, ref & 0xff, total, i + 1]), encodeText(part, ucs2)]),
  }));
}

/** The concatenation element of a UDH (8- or 16-bit reference), if any. */
export function concatInfo(udh: Buffer[] | undefined): { ref: number; total: number; part: number } | undefined {
  for (const ie of udh ?? []) {
    if (ie[0] === 0x00 && ie[1] === 3) return { ref: ie[2]!, total: ie[3]!, part: ie[4]! };
    if (ie[0] === 0x08 && ie[1] === 4) return { ref: ie.readUInt16BE(2), total: ie[4]!, part: ie[5]! };
  }
  return undefined;
}

/** A delivery receipt read from its text: `id:… sub:… dlvrd:… submit date:… done date:… stat:… err:…`. */
export interface ReceiptText {
  id: string;
  stat: string;
  err: string;
}

/** Reads the receipt fields of a text; undefined when it is not in the receipt format (an MO). */
export function parseReceiptText(text: string): ReceiptText | undefined {
  const id = /(?:^|\s)id:(\S+)/i.exec(text);
  const stat = /(?:^|\s)stat:(\S+)/i.exec(text);
  if (!id || !stat) return undefined;
  return { id: id[1]!, stat: stat[1]!.toUpperCase(), err: /(?:^|\s)err:(\S+)/i.exec(text)?.[1] ?? "" };
}

/** The message_state TLV's values (SMPP 3.4 5.3.2.35) by name. */
const MESSAGE_STATES = SMPP_STATE_WORDS;

/** What a receipt's state means: Delivered, Failed, or null while the message is still on its way. */
export function receiptOutcome(stat: string | number): "Delivered" | "Failed" | null {
  const name = typeof stat === "number" ? (MESSAGE_STATES[stat] ?? "") : stat.toUpperCase();
  if (name === "DELIVRD" || name === "DELIVERED") return "Delivered";
  if (["UNDELIV", "UNDELIVERABLE", "EXPIRED", "DELETED", "REJECTD", "REJECTED", "UNKNOWN"].includes(name)) return "Failed";
  return null;
}

/** The state name of a message_state TLV value. */
export function messageStateName(state: number): string {
  return MESSAGE_STATES[state] ?? String(state);
}

/**
 * A number as the SMSC gave it, in E164 where that is certain: TON 1 (international) → `+digits`;
 * TON 2 (national) read with the SMSC's country; TON 0 (unknown): `+`/`00` prefixes, or 8 to 15
 * bare digits as international; anything else (short codes, alphanumeric senders) as given.
 */
export function normalizeSmppNumber(addr: string, ton: number, country?: string): string {
  const raw = addr.trim();
  const digits = raw.replace(/^\+/, "").replace(/^00/, "");
  if (ton === 1 && /^\d{1,15}$/.test(digits)) return `+${digits}`;
  if (ton === 2 && country && /^\d+$/.test(raw)) {
    const n = parsePhoneNumberFromString(raw, country.toUpperCase() as CountryCode);
    if (n?.isPossible()) return n.number;
  }
  if (ton === 0 || ton === 1) {
    if (/^\+\d{8,15}$/.test(raw)) return raw;
    if (/^00\d{8,15}$/.test(raw)) return `+${raw.slice(2)}`;
    if (/^\d{8,15}$/.test(raw)) return `+${raw}`;
  }
  return raw;
}
