/**
 * The SMPP server against hostile and careless clients (issue 44, docs/smpp-server.md#limits-and-hostile-clients):
 * thousands of malformed and truncated PDUs while another client's bind goes on, a 4 GB
 * command_length, a password-guessing loop against the API's failed-guess limits, a client that
 * stops reading (the window bounds what is held), the account's rate limit as ESME_RTHROTTLED, and
 * a clean unbind when the server stops.
 */
import { connect, type Socket } from "node:net";
import { once } from "node:events";
import smpp from "smpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { gsmHex, setSmppCredentials, startEsme, type TestEsme } from "./esme.js";

let t: TestApp;
let port: number;
let a: Tenant;
const esmes: TestEsme[] = [];
const TO = "61412345678";

/** A raw client: writes bytes, reads whole PDUs (decoded by the `smpp` package). */
class RawClient {
  readonly pdus: { command: string; command_status: number; sequence_number: number; [k: string]: unknown }[] = [];
  private buf = Buffer.alloc(0);
  closed = false;
  constructor(readonly socket: Socket) {
    socket.on("data", (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      while (this.buf.length >= 4 && this.buf.length >= this.buf.readUInt32BE(0)) {
        const len = this.buf.readUInt32BE(0);
        this.pdus.push(new smpp.PDU(this.buf.subarray(0, len) as never) as never);
        this.buf = this.buf.subarray(len);
      }
    });
    socket.on("close", () => (this.closed = true));
    socket.on("error", () => undefined);
  }
  static async open(): Promise<RawClient> {
    const s = connect(port, "127.0.0.1");
    await once(s, "connect");
    return new RawClient(s);
  }
  send(command: string, fields: Record<string, unknown>): void {
    this.socket.write(new smpp.PDU(command, fields).toBuffer());
  }
  async until(pred: () => boolean, timeoutMs = 10_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (!pred()) {
      if (Date.now() > end) throw new Error(`timed out; got ${JSON.stringify(this.pdus.slice(-5).map((p) => [p.command, p.command_status]))}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

beforeAll(async () => {
  t = await createTestApp({
    engine: true,
    config: { smppServer: { port: 0 }, host: "127.0.0.1", authFailures: { perAddress: 5, perAccount: 0, windowMs: 60_000 } },
  });
  port = (await t.app.smppServer!.listen()).port!;
  a = await createTenant(t.app);
  await setSmppCredentials(t.app, a.accountSid, { SystemId: "acme", Password: "pw1234", PropertySid: a.propertySid, MaxBinds: 50 });
});

afterAll(async () => {
  for (const e of esmes) await e.stop();
  await t.close();
});

describe("hostile input", () => {
  it("thousands of malformed and truncated PDUs: answered, no crash, and another client's bind goes on", async () => {
    const good = await startEsme(port);
    esmes.push(good);
    good.send("bind transceiver acme pw1234");
    expect((await good.next("bind_resp")).f.status).toBe("0");
    let seed = 7;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
    // Every command but unbind (which ends the bind, as it should).
    const ids = [0x01, 0x02, 0x03, 0x04, 0x08, 0x09, 0x15, 0x21, 0x103, 0x80000004, 0x80000005, 0x7fffffff];
    const bad = await RawClient.open();
    bad.send("bind_transceiver", { system_id: "acme", password: "pw1234" });
    await bad.until(() => bad.pdus.some((p) => p.command === "bind_transceiver_resp"));
    let sent = 0;
    for (let i = 0; i < 3000; i++) {
      // A whole PDU of random bytes with a right command_length: always framed, so always answered or ignored.
      const body = Buffer.from(Array.from({ length: rnd(80) }, () => rnd(256)));
      const head = Buffer.alloc(16);
      head.writeUInt32BE(16 + body.length, 0);
      head.writeUInt32BE(ids[rnd(ids.length)]!, 4);
      head.writeUInt32BE(i + 1, 12);
      bad.socket.write(Buffer.concat([head, body]));
      sent++;
    }
    bad.send("enquire_link", { sequence_number: 999_999 });
    await bad.until(() => bad.pdus.some((p) => p.command === "enquire_link_resp" && p.sequence_number === 999_999), 60_000);
    expect(bad.closed).toBe(false);
    expect(sent).toBe(3000);
    // Truncated: a header promising more than ever comes, then the connection closes; nothing is left behind.
    const cut = await RawClient.open();
    cut.socket.end(Buffer.from("0000004000000004000000000000000100", "hex"));
    await cut.until(() => cut.closed);
    // The other client never noticed.
    good.send(`submit ok1 src=${a.ownedNumber.slice(1)} dst=${TO} sm=${gsmHex("still here")}`);
    expect((await good.next("submit_resp", (x) => x.f.tag === "ok1")).f.status).toBe("0");
    bad.socket.destroy();
  }, 120_000);

  it("a command_length of 4 GB is generic_nack ESME_RINVCMDLEN and the connection is closed", async () => {
    const c = await RawClient.open();
    c.socket.write(Buffer.from("ffffffff0000000400000000000000050000", "hex"));
    await c.until(() => c.closed);
    expect(c.pdus.map((p) => [p.command, p.command_status, p.sequence_number])).toStrictEqual([["generic_nack", 0x02, 5]]);
  });
});

describe("limits", () => {
  it("a client that stops reading: the server holds at most its window in flight and stops reading the socket", async () => {
    const c = await RawClient.open();
    c.send("bind_transmitter", { system_id: "acme", password: "pw1234" });
    await c.until(() => c.pdus.length === 1);
    expect(c.pdus[0]!.command_status).toBe(0);
    c.socket.pause();
    const pdu = new smpp.PDU("submit_sm", {
      source_addr_ton: 1,
      source_addr: a.ownedNumber.slice(1),
      dest_addr_ton: 1,
      destination_addr: TO,
      short_message: Buffer.from("flood"),
    }).toBuffer();
    // 5000 submit_sm written without reading one answer (the kernel's buffers fill, then our writes wait).
    let written = 0;
    for (let i = 0; i < 5000; i++) {
      pdu.writeUInt32BE(i + 2, 12);
      c.socket.write(Buffer.from(pdu));
      written++;
    }
    // For 3 s: never more than the window in flight, and what waits to be written stays small
    // (the socket is not read while the client does not read what we write).
    let maxInFlight = 0;
    let maxUnwritten = 0;
    for (let i = 0; i < 60; i++) {
      await new Promise((r) => setTimeout(r, 50));
      for (const s of t.app.smppServer!.sessions()) {
        maxInFlight = Math.max(maxInFlight, s.inFlight);
        maxUnwritten = Math.max(maxUnwritten, s.socket.writableLength);
      }
    }
    expect(maxInFlight).toBeGreaterThan(0);
    expect(maxInFlight).toBeLessThanOrEqual(100);
    expect(maxUnwritten).toBeLessThan(100_000);
    expect(written).toBe(5000);
    const stored = await t.db.orm.em.fork().getConnection().execute<{ n: string }[]>("select count(*) as n from messages where text = 'flood'");
    expect(Number(stored[0]!.n)).toBeLessThan(5000);
    c.socket.destroy();
  });

  it("the account's send rate answers ESME_RTHROTTLED", async () => {
    const r = await createTenant(t.app);
    for (const [url, payload] of [
      [`/admin/v1/Accounts/${r.accountSid}`, { SendRatePerSecond: 1, SendRateBurst: 2 }],
      [`/admin/v1/Accounts/${r.accountSid}/Smpp`, { SystemId: "rated", Password: "pw1234", PropertySid: r.propertySid }],
    ] as const) {
      const res = await t.app.inject({ method: url.endsWith("Smpp") ? "PUT" : "POST", url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload });
      expect(res.statusCode).toBe(200);
    }
    const e = await startEsme(port);
    esmes.push(e);
    e.send("bind transmitter rated pw1234");
    expect((await e.next("bind_resp")).f.status).toBe("0");
    for (let i = 0; i < 6; i++) e.send(`submit t${i} src=${r.ownedNumber.slice(1)} dst=${TO} sm=${gsmHex("rate")}`);
    const statuses = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => e.next("submit_resp", (x) => x.f.tag === `t${i}`).then((x) => x.f.status)));
    expect(statuses).toContain(String(0x58));
    expect(statuses).toContain("0");
  });
});

describe("bind floods", () => {
  it("40 binds at once on two processes for an account with MaxBinds 3: exactly 3 succeed, the rest ESME_RBINDFAIL; another account still binds", async () => {
    const f = await createTenant(t.app);
    await setSmppCredentials(t.app, f.accountSid, { SystemId: "flood", Password: "pw1234", PropertySid: f.propertySid, MaxBinds: 3 });
    const other = await createTestApp({ db: t.db, clock: t.clock, config: { smppServer: { port: 0 }, host: "127.0.0.1" } });
    try {
      const otherPort = (await other.app.smppServer!.listen()).port!;
      const clients = await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const s = connect(i % 2 === 0 ? port : otherPort, "127.0.0.1");
          await once(s, "connect");
          return new RawClient(s);
        }),
      );
      for (const c of clients) c.send("bind_transceiver", { system_id: "flood", password: "pw1234" });
      await Promise.all(clients.map((c) => c.until(() => c.pdus.length === 1, 30_000)));
      const statuses = clients.map((c) => c.pdus[0]!.command_status);
      expect(statuses.filter((x) => x === 0)).toHaveLength(3);
      expect(statuses.filter((x) => x === 0x0d)).toHaveLength(37);
      const e = await startEsme(port);
      esmes.push(e);
      e.send("bind transceiver acme pw1234");
      expect((await e.next("bind_resp")).f.status).toBe("0");
      for (const c of clients) c.socket.destroy();
    } finally {
      await other.close();
    }
  }, 60_000);
});

describe("shutdown", () => {
  it("closing the app sends each bind an unbind and closes its connection", async () => {
    const other = await createTestApp({ db: t.db, clock: t.clock, config: { smppServer: { port: 0 }, host: "127.0.0.1" } });
    const otherPort = (await other.app.smppServer!.listen()).port!;
    const e = await startEsme(otherPort);
    esmes.push(e);
    e.send("bind receiver acme pw1234");
    expect((await e.next("bind_resp")).f.status).toBe("0");
    await other.close();
    await e.next("unbind");
    await e.next("closed");
    const binds = await t.app.inject({
      method: "GET",
      url: `/admin/v1/SmppBinds?AccountSid=${a.accountSid}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(binds.statusCode).toBe(200);
    expect((binds.json().Binds ?? []).filter((b: { Mode: string }) => b.Mode === "Receiver")).toStrictEqual([]);
  });
});

// Last: it leaves 127.0.0.1 blocked for the window.
describe("failed-guess limits", () => {
  it("a password-guessing loop meets the API's failed-guess limit: past it even the right password is ESME_RBINDFAIL", async () => {
    const c = await RawClient.open();
    for (let i = 0; i < 5; i++) c.send("bind_transmitter", { system_id: "acme", password: `guess${i}` });
    await c.until(() => c.pdus.length === 5);
    expect(c.pdus.map((p) => p.command_status)).toStrictEqual([0x0e, 0x0e, 0x0e, 0x0e, 0x0e]);
    c.send("bind_transmitter", { system_id: "acme", password: "pw1234" });
    await c.until(() => c.pdus.length === 6);
    expect(c.pdus[5]!.command_status).toBe(0x0d);
    c.socket.destroy();
  });
});
