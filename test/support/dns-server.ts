import { createSocket, type RemoteInfo } from "node:dgram";
import { isIPv4 } from "node:net";

/** One question the server was asked. */
export interface DnsQuery {
  name: string;
  type: "A" | "AAAA" | number;
}

/**
 * A tiny authoritative DNS server over UDP on 127.0.0.1, for tests: `answer(name, type, n)`
 * gives the IPv4 addresses for the n-th A query of a name (1-based); every answer has TTL 0, so
 * nothing may cache it. AAAA and other queries, and an empty list, get NOERROR with no records
 * (NODATA).
 */
export interface TestDnsServer {
  /** `127.0.0.1:port`, for Resolver#setServers. */
  address: string;
  queries: DnsQuery[];
  answer: (name: string, n: number) => string[];
  close(): Promise<void>;
}

const TYPES: Record<number, "A" | "AAAA"> = { 1: "A", 28: "AAAA" };

function readName(msg: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  let i = offset;
  while (msg[i] !== 0) {
    const len = msg[i];
    labels.push(msg.subarray(i + 1, i + 1 + len).toString("ascii"));
    i += 1 + len;
  }
  return { name: labels.join(".").toLowerCase(), end: i + 1 };
}

function respond(query: Buffer, answers: string[]): Buffer {
  const { end } = readName(query, 12);
  const question = query.subarray(12, end + 4);
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2); // id
  header.writeUInt16BE(0x8400 | (query.readUInt16BE(2) & 0x0100), 2); // response, authoritative, RD copied, NOERROR
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answers.length, 6);
  const records = answers.map((ip) => {
    const rdata = Buffer.from(ip.split(".").map(Number));
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
    rr.writeUInt16BE(1, 2); // A
    rr.writeUInt16BE(1, 4); // IN
    rr.writeUInt32BE(0, 6); // TTL 0
    rr.writeUInt16BE(rdata.length, 10);
    return Buffer.concat([rr, rdata]);
  });
  return Buffer.concat([header, question, ...records]);
}

/** Starts the server; `answer` may be replaced at any time. */
export async function startDnsServer(answer: TestDnsServer["answer"]): Promise<TestDnsServer> {
  const socket = createSocket("udp4");
  const counts = new Map<string, number>();
  const server: TestDnsServer = { address: "", queries: [], answer, close: () => new Promise<void>((r) => socket.close(() => r())) };
  socket.on("message", (msg: Buffer, from: RemoteInfo) => {
    const { name, end } = readName(msg, 12);
    const qtype = msg.readUInt16BE(end);
    const type = TYPES[qtype];
    server.queries.push({ name, type: type ?? qtype });
    let answers: string[] = [];
    if (type === "A") {
      const n = (counts.get(name) ?? 0) + 1;
      counts.set(name, n);
      answers = server.answer(name, n).filter((ip) => isIPv4(ip));
    }
    socket.send(respond(msg, answers), from.port, from.address);
  });
  await new Promise<void>((r) => socket.bind(0, "127.0.0.1", r));
  server.address = `127.0.0.1:${socket.address().port}`;
  return server;
}
