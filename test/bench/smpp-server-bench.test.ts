/**
 * The SMPP server bench's clients (bench/smpp-server-bench.ts) against a stand-in server that reads
 * their PDUs with the SMPP server's own decoder (src/smpp-server/smpp-pdu.ts): the hand-written
 * encoder's submit_sm is the REST bench's SMS, both clients keep the window full and never past it,
 * and every answer is counted, by status.
 */
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { drive, openClientBind, submitTemplate } from "../../bench/smpp-server-bench.js";
import { SMS } from "../../bench/service-runs.js";
import { decodePdu, encodePdu, status, type SubmitSmPdu } from "../../src/smpp-server/smpp-pdu.js";

interface StandIn {
  server: Server;
  port: number;
  submits: SubmitSmPdu[];
  maxOutstanding: number;
}

/** Answers bind_transmitter 0 (for sb-bench / bench-pw), each submit_sm after 2 ms: every 10th ESME_RTHROTTLED, the others 0 with an id. */
async function standIn(): Promise<StandIn> {
  const s: StandIn = { server: undefined as never, port: 0, submits: [], maxOutstanding: 0 };
  s.server = createServer((socket: Socket) => {
    let buf = Buffer.alloc(0);
    let outstanding = 0;
    socket.on("error", () => undefined);
    socket.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 16 && buf.length >= buf.readUInt32BE(0)) {
        const bytes = buf.subarray(0, buf.readUInt32BE(0));
        buf = buf.subarray(bytes.length);
        const { header, pdu } = decodePdu(Buffer.from(bytes));
        if (pdu.kind === "bind") {
          const ok = pdu.mode === "Transmitter" && pdu.systemId === "sb-bench" && pdu.password === "bench-pw";
          socket.write(encodePdu("bind_transmitter_resp", { sequence_number: header.sequence, command_status: ok ? 0 : status("ESME_RINVPASWD") }));
        } else if (pdu.kind === "submit_sm") {
          s.submits.push(pdu);
          const n = s.submits.length;
          s.maxOutstanding = Math.max(s.maxOutstanding, ++outstanding);
          setTimeout(() => {
            outstanding--;
            const refused = n % 10 === 0;
            socket.write(
              encodePdu("submit_sm_resp", {
                sequence_number: header.sequence,
                command_status: refused ? status("ESME_RTHROTTLED") : 0,
                ...(refused ? {} : { message_id: `MG${n}` }),
              }),
            );
          }, 2);
        } else if (pdu.kind === "unbind") {
          socket.end(encodePdu("unbind_resp", { sequence_number: header.sequence }));
        }
      }
    });
  });
  await new Promise<void>((r) => s.server.listen(0, "127.0.0.1", () => r()));
  s.port = (s.server.address() as AddressInfo).port;
  return s;
}

describe("the SMPP server bench's clients", () => {
  let s: StandIn | undefined;
  afterEach(() => new Promise<void>((done) => (s ? s.server.close(() => done()) : done())));

  it("the hand-written submit_sm is the REST bench's SMS: From TON 1, a +4477009 recipient TON 1, data_coding 0, its text, no receipt", () => {
    const { template, toOffset } = submitTemplate();
    const b = Buffer.from(template);
    b.write("54321", toOffset, "latin1");
    const { pdu } = decodePdu(b);
    expect(pdu).toMatchObject({
      kind: "submit_sm",
      sourceTon: 1,
      sourceAddr: SMS.from.slice(1),
      destTon: 1,
      destinationAddr: "447700954321",
      dataCoding: 0,
      registeredDelivery: 0,
      esmClass: 0,
      scheduleDeliveryTime: "",
      validityPeriod: "",
    });
    expect((pdu as SubmitSmPdu).shortMessage.toString("latin1")).toBe(SMS.text);
  });

  for (const client of ["raw", "package"] as const) {
    it(`${client}: keeps the window full and never past it, over two binds, and counts every answer by status`, async () => {
      s = await standIn();
      const binds = [await openClientBind(client, s.port, "sb-bench", "bench-pw"), await openClientBind(client, s.port, "sb-bench", "bench-pw")];
      const d = await drive(binds, 7, 0.4);
      await Promise.all(binds.map((b) => b.close()));
      expect(s.submits.length).toBe(d.result.requests);
      expect(d.result.requests).toBeGreaterThan(20);
      // 7 over two binds: 4 and 3, never more; the stand-in counts per connection (the package
      // writes each PDU on its own, so the stand-in may answer one before it reads the fourth).
      expect(s.maxOutstanding).toBeLessThanOrEqual(4);
      expect(s.maxOutstanding).toBeGreaterThanOrEqual(3);
      const throttled = Math.floor(s.submits.length / 10);
      expect(d.refused.get("ESME_RTHROTTLED") ?? 0).toBe(throttled);
      expect(d.ok).toBe(s.submits.length - throttled);
      expect(d.result.errors).toBe(throttled);
      expect(new Set(s.submits.map((p) => p.destinationAddr)).size).toBeGreaterThan(d.result.requests / 2);
      for (const p of s.submits) expect(p.destinationAddr).toMatch(/^4477009\d{5}$/);
      expect(d.result.p50Ms).toBeGreaterThanOrEqual(1);
    });
  }

  it("a wrong password is refused at the bind", async () => {
    s = await standIn();
    await expect(openClientBind("raw", s.port, "sb-bench", "wrong")).rejects.toThrow(/ESME_RINVPASWD/);
  });
});
