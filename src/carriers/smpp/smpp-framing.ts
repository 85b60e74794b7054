import { Duplex } from "node:stream";
import type { Socket } from "node:net";

/** The shortest PDU: its header (command_length, command_id, command_status, sequence_number). */
export const SMPP_MIN_PDU_LENGTH = 16;
/**
 * The longest PDU the carrier reads, bytes: the `smpp` library's decoding limit (its
 * `PDU.maxLength`), room for a 254-octet short_message or a message_payload of several segments.
 */
export const SMPP_MAX_PDU_LENGTH = 16_384;

/**
 * The SMSC's socket as the `smpp` library reads it, checking each PDU's command_length on the way.
 * The library waits for as many bytes as a PDU's length says, and on a length over its limit it
 * stops reading for good without closing anything: a corrupt length (0xDEADBEEF) left the link
 * Bound and its route stalled until a response timed out 30 s later (issue 41). Here a length
 * under 16 or over SMPP_MAX_PDU_LENGTH destroys the connection at once (the link then goes down
 * and reconnects with the usual backoff), after `onCorrupt` heard it. Reading stops while the
 * library reads no more (its session paused): TCP then holds the SMSC back.
 */
export class PduFramedSocket extends Duplex {
  private readonly head = Buffer.alloc(4);
  private headLength = 0;
  /** Bytes of the current PDU still to come after its command_length. */
  private left = 0;
  private corrupt = false;

  constructor(
    private readonly raw: Socket,
    onCorrupt: (commandLength: number) => void,
  ) {
    super({ allowHalfOpen: false });
    raw.on("data", (chunk: Buffer) => {
      if (this.corrupt) return;
      const bad = this.check(chunk);
      if (bad !== undefined) {
        this.corrupt = true;
        onCorrupt(bad);
        raw.destroy();
        return;
      }
      if (!this.push(chunk)) raw.pause();
    });
    raw.on("end", () => this.push(null));
    raw.on("error", (err) => this.destroy(err));
    raw.on("close", () => this.destroy());
  }

  /** Follows the PDU boundaries through a chunk; returns the first impossible command_length. */
  private check(chunk: Buffer): number | undefined {
    let i = 0;
    while (i < chunk.length) {
      if (this.left > 0) {
        const n = Math.min(this.left, chunk.length - i);
        this.left -= n;
        i += n;
        continue;
      }
      this.head[this.headLength++] = chunk[i++]!;
      if (this.headLength < 4) continue;
      this.headLength = 0;
      const length = this.head.readUInt32BE(0);
      if (length < SMPP_MIN_PDU_LENGTH || length > SMPP_MAX_PDU_LENGTH) return length;
      this.left = length - 4;
    }
    return undefined;
  }

  override _read(): void {
    this.raw.resume();
  }

  override _write(chunk: Buffer, encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.raw.write(chunk, encoding, callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.raw.end(() => callback());
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.raw.destroy();
    callback(error);
  }
}
