/**
 * The PDUs a client sends the SMPP server, decoded from their bytes with every length checked.
 * Our own decoder rather than the `smpp` package's (which encodes what we send): the package's
 * reader stops for good on a PDU it cannot parse (its session stays "busy"), decodes times with
 * the machine's clock and the text by its own guess; here a bad PDU is a PduError with the
 * status its generic_nack (or response) carries, and the connection goes on.
 */
import smpp from "smpp";

/** The shortest PDU: its header (command_length, command_id, command_status, sequence_number). */
export const PDU_HEADER_LENGTH = 16;
/** The longest PDU read, bytes: a message_payload of 1600 UCS-2 characters fits many times over. */
export const MAX_PDU_LENGTH = 16_384;

/** command_id of each command the server reads. */
export const COMMAND = {
  generic_nack: 0x80000000,
  bind_receiver: 0x00000001,
  bind_transmitter: 0x00000002,
  query_sm: 0x00000003,
  submit_sm: 0x00000004,
  deliver_sm: 0x00000005,
  unbind: 0x00000006,
  cancel_sm: 0x00000008,
  bind_transceiver: 0x00000009,
  enquire_link: 0x00000015,
} as const;

/** The response bit of a command_id. */
export const RESPONSE_BIT = 0x80000000;

/** The command_id of a request's response, unsigned as readUInt32BE reads it (JavaScript's `|` is signed). */
export function responseId(commandId: number): number {
  return (commandId | RESPONSE_BIT) >>> 0;
}

/** A command_status by name (ESME_RINVCMDLEN, …), from the `smpp` package's table. */
export function status(name: string): number {
  const n = smpp.errors[name];
  if (n === undefined) throw new Error(`unknown SMPP status ${name}`);
  return n;
}

/** A PDU that cannot be read: answered with this status (a generic_nack, or the command's response). */
export class PduError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface PduHeader {
  length: number;
  commandId: number;
  status: number;
  sequence: number;
}

export function readHeader(buf: Buffer): PduHeader {
  return { length: buf.readUInt32BE(0), commandId: buf.readUInt32BE(4), status: buf.readUInt32BE(8), sequence: buf.readUInt32BE(12) };
}

/** The bind modes, as the operator API names them. */
export type BindMode = "Transmitter" | "Receiver" | "Transceiver";

export interface BindPdu {
  kind: "bind";
  mode: BindMode;
  systemId: string;
  password: string;
}

export interface SubmitSmPdu {
  kind: "submit_sm";
  serviceType: string;
  sourceTon: number;
  sourceNpi: number;
  sourceAddr: string;
  destTon: number;
  destNpi: number;
  destinationAddr: string;
  esmClass: number;
  registeredDelivery: number;
  scheduleDeliveryTime: string;
  validityPeriod: string;
  dataCoding: number;
  shortMessage: Buffer;
  /** message_payload (0x0424), when present. */
  messagePayload?: Buffer;
  /** sar_msg_ref_num, sar_total_segments, sar_segment_seqnum, when all three are present. */
  sar?: { ref: number; total: number; seq: number };
}

export interface QuerySmPdu {
  kind: "query_sm";
  messageId: string;
}

export interface CancelSmPdu {
  kind: "cancel_sm";
  messageId: string;
}

/** What the server reads from a PDU. */
export type ClientPdu =
  | BindPdu
  | SubmitSmPdu
  | QuerySmPdu
  | CancelSmPdu
  | { kind: "unbind" | "enquire_link" | "unbind_resp" | "enquire_link_resp" | "generic_nack" }
  | { kind: "deliver_sm_resp"; status: number }
  | { kind: "other_resp" }
  | { kind: "unknown" };

/** Reads the fields of one PDU's body in order, never past its end. */
class BodyReader {
  private off = PDU_HEADER_LENGTH;
  constructor(private readonly buf: Buffer) {}

  get atEnd(): boolean {
    return this.off >= this.buf.length;
  }

  u8(field: string): number {
    if (this.off >= this.buf.length) throw new PduError(status("ESME_RINVCMDLEN"), `the PDU ends before ${field}`);
    return this.buf[this.off++]!;
  }

  /**
   * A C-Octet String of at most `max` octets with its NUL, read as Latin-1 (SMPP's strings are
   * ASCII); a longer one is refused with `tooLong`, the field's own status.
   */
  cstring(field: string, max: number, tooLong = "ESME_RINVCMDLEN"): string {
    const end = this.buf.indexOf(0, this.off);
    if (end < 0) throw new PduError(status("ESME_RINVCMDLEN"), `${field} has no terminating NUL`);
    if (end - this.off + 1 > max) throw new PduError(status(tooLong), `${field} is longer than ${max - 1} octets`);
    const s = this.buf.toString("latin1", this.off, end);
    this.off = end + 1;
    return s;
  }

  bytes(field: string, n: number): Buffer {
    if (this.off + n > this.buf.length) throw new PduError(status("ESME_RINVCMDLEN"), `the PDU ends inside ${field}`);
    const b = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return b;
  }

  /** The optional parameters (TLVs) up to the end, by tag. */
  tlvs(): Map<number, Buffer> {
    const out = new Map<number, Buffer>();
    while (this.off < this.buf.length) {
      if (this.off + 4 > this.buf.length) throw new PduError(status("ESME_RINVTLVSTREAM"), "a TLV header is cut short");
      const tag = this.buf.readUInt16BE(this.off);
      const len = this.buf.readUInt16BE(this.off + 2);
      this.off += 4;
      if (this.off + len > this.buf.length) throw new PduError(status("ESME_RINVTLVLEN"), `TLV 0x${tag.toString(16)} is longer than the PDU`);
      out.set(tag, this.buf.subarray(this.off, this.off + len));
      this.off += len;
    }
    return out;
  }
}

const TLV_MESSAGE_PAYLOAD = 0x0424;
const TLV_SAR_MSG_REF_NUM = 0x020c;
const TLV_SAR_TOTAL_SEGMENTS = 0x020e;
const TLV_SAR_SEGMENT_SEQNUM = 0x020f;

function sarOf(tlvs: Map<number, Buffer>): SubmitSmPdu["sar"] {
  const ref = tlvs.get(TLV_SAR_MSG_REF_NUM);
  const total = tlvs.get(TLV_SAR_TOTAL_SEGMENTS);
  const seq = tlvs.get(TLV_SAR_SEGMENT_SEQNUM);
  if (!ref && !total && !seq) return undefined;
  if (!ref || ref.length !== 2 || !total || total.length !== 1 || !seq || seq.length !== 1) {
    throw new PduError(status("ESME_RINVTLVVAL"), "sar_msg_ref_num (2 octets), sar_total_segments and sar_segment_seqnum (1 octet each) go together");
  }
  return { ref: ref.readUInt16BE(0), total: total[0]!, seq: seq[0]! };
}

const BIND_MODES: Record<number, BindMode> = {
  [COMMAND.bind_transmitter]: "Transmitter",
  [COMMAND.bind_receiver]: "Receiver",
  [COMMAND.bind_transceiver]: "Transceiver",
};

/** Decodes one whole PDU (its command_length already checked to be its size); throws PduError. */
export function decodePdu(buf: Buffer): { header: PduHeader; pdu: ClientPdu } {
  const header = readHeader(buf);
  const r = new BodyReader(buf);
  const id = header.commandId;
  const mode = BIND_MODES[id];
  if (mode) {
    const systemId = r.cstring("system_id", 16, "ESME_RINVSYSID");
    const password = r.cstring("password", 9, "ESME_RINVPASWD");
    r.cstring("system_type", 13, "ESME_RINVSYSTYP");
    r.u8("interface_version");
    r.u8("addr_ton");
    r.u8("addr_npi");
    r.cstring("address_range", 41);
    return { header, pdu: { kind: "bind", mode, systemId, password } };
  }
  switch (id) {
    case COMMAND.submit_sm: {
      const serviceType = r.cstring("service_type", 6, "ESME_RINVSERTYP");
      const sourceTon = r.u8("source_addr_ton");
      const sourceNpi = r.u8("source_addr_npi");
      const sourceAddr = r.cstring("source_addr", 21, "ESME_RINVSRCADR");
      const destTon = r.u8("dest_addr_ton");
      const destNpi = r.u8("dest_addr_npi");
      const destinationAddr = r.cstring("destination_addr", 21, "ESME_RINVDSTADR");
      const esmClass = r.u8("esm_class");
      r.u8("protocol_id");
      r.u8("priority_flag");
      const scheduleDeliveryTime = r.cstring("schedule_delivery_time", 17, "ESME_RINVSCHED");
      const validityPeriod = r.cstring("validity_period", 17, "ESME_RINVEXPIRY");
      const registeredDelivery = r.u8("registered_delivery");
      r.u8("replace_if_present_flag");
      const dataCoding = r.u8("data_coding");
      r.u8("sm_default_msg_id");
      const smLength = r.u8("sm_length");
      const shortMessage = Buffer.from(r.bytes("short_message", smLength));
      const tlvs = r.tlvs();
      const payload = tlvs.get(TLV_MESSAGE_PAYLOAD);
      if (payload && smLength > 0) throw new PduError(status("ESME_RINVMSGLEN"), "short_message and message_payload both given");
      return {
        header,
        pdu: {
          kind: "submit_sm",
          serviceType,
          sourceTon,
          sourceNpi,
          sourceAddr,
          destTon,
          destNpi,
          destinationAddr,
          esmClass,
          registeredDelivery,
          scheduleDeliveryTime,
          validityPeriod,
          dataCoding,
          shortMessage,
          messagePayload: payload ? Buffer.from(payload) : undefined,
          sar: sarOf(tlvs),
        },
      };
    }
    case COMMAND.query_sm: {
      const messageId = r.cstring("message_id", 65, "ESME_RINVMSGID");
      r.u8("source_addr_ton");
      r.u8("source_addr_npi");
      r.cstring("source_addr", 21);
      return { header, pdu: { kind: "query_sm", messageId } };
    }
    case COMMAND.cancel_sm: {
      r.cstring("service_type", 6, "ESME_RINVSERTYP");
      const messageId = r.cstring("message_id", 65, "ESME_RINVMSGID");
      r.u8("source_addr_ton");
      r.u8("source_addr_npi");
      r.cstring("source_addr", 21);
      r.u8("dest_addr_ton");
      r.u8("dest_addr_npi");
      r.cstring("destination_addr", 21);
      return { header, pdu: { kind: "cancel_sm", messageId } };
    }
    case COMMAND.unbind:
      return { header, pdu: { kind: "unbind" } };
    case COMMAND.enquire_link:
      return { header, pdu: { kind: "enquire_link" } };
    case responseId(COMMAND.unbind):
      return { header, pdu: { kind: "unbind_resp" } };
    case responseId(COMMAND.enquire_link):
      return { header, pdu: { kind: "enquire_link_resp" } };
    case responseId(COMMAND.deliver_sm):
      return { header, pdu: { kind: "deliver_sm_resp", status: header.status } };
    case COMMAND.generic_nack:
      return { header, pdu: { kind: "generic_nack" } };
    default:
      return { header, pdu: (id & RESPONSE_BIT) !== 0 ? { kind: "other_resp" } : { kind: "unknown" } };
  }
}

/** Encodes a PDU we send with the `smpp` package's encoder. */
export function encodePdu(command: string, fields: Record<string, unknown>): Buffer {
  return new smpp.PDU(command, fields).toBuffer();
}
