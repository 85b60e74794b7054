/**
 * The SMPP server's TLS port (SMPP_SERVER_TLS_PORT with SMPP_SERVER_TLS_CERT and _KEY,
 * docs/smpp-server.md#setup): a client binds and submits over TLS, the `smpp` package's client
 * checking the server's certificate; a plain-text client on the TLS port gets nothing.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import smpp, { type PDU } from "smpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { loadConfig } from "../../src/config.js";
import { selfSignedCert } from "../support/tls.js";

let t: TestApp;
let tlsPort: number;
let a: Tenant;
let cert: string;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), "sb-smpp-tls-"));
  selfSignedCert(dir);
  cert = readFileSync(join(dir, "cert.pem"), "utf8");
  const smppServer = loadConfig({
    SMPP_SERVER_TLS_PORT: "0",
    SMPP_SERVER_TLS_CERT: join(dir, "cert.pem"),
    SMPP_SERVER_TLS_KEY: join(dir, "key.pem"),
  }).smppServer;
  expect(smppServer).toStrictEqual({ port: undefined, tlsPort: 0, tlsCertFile: join(dir, "cert.pem"), tlsKeyFile: join(dir, "key.pem") });
  t = await createTestApp({ engine: true, config: { smppServer, host: "127.0.0.1" } });
  tlsPort = (await t.app.smppServer!.listen()).tlsPort!;
  a = await createTenant(t.app);
  const res = await t.app.inject({
    method: "PUT",
    url: `/admin/v1/Accounts/${a.accountSid}/Smpp`,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    payload: { SystemId: "tls", Password: "pw1234", PropertySid: a.propertySid },
  });
  expect(res.statusCode).toBe(200);
});

afterAll(() => t.close());

function call(session: smpp.Session, command: "bind_transceiver" | "submit_sm" | "unbind", fields: Record<string, unknown>): Promise<PDU> {
  return new Promise((resolve) => session[command](fields, resolve));
}

describe("TLS", () => {
  it("binds and submits over TLS with a certificate the client checks", async () => {
    const session = smpp.connect({ host: "localhost", port: tlsPort, tls: true, ca: cert });
    session.on("error", () => undefined);
    await once(session, "secureConnect");
    const bind = await call(session, "bind_transceiver", { system_id: "tls", password: "pw1234" });
    expect(bind.command_status).toBe(0);
    const resp = await call(session, "submit_sm", {
      source_addr_ton: 1,
      source_addr: a.ownedNumber.slice(1),
      dest_addr_ton: 1,
      destination_addr: "61412345678",
      short_message: Buffer.from("over TLS"),
    });
    expect(resp.command_status).toBe(0);
    const m = await t.app.inject({ method: "GET", url: `/v2/Messages/${resp.message_id as string}`, headers: { authorization: a.auth } });
    expect(m.json()).toMatchObject({ Text: "over TLS", To: "+61412345678" });
    await call(session, "unbind", {});
    session.destroy();
  });

  it("SMPP_SERVER_TLS_PORT without its certificate and key is a configuration error", () => {
    expect(() => loadConfig({ SMPP_SERVER_TLS_PORT: "3550" })).toThrow(/SMPP_SERVER_TLS_PORT needs SMPP_SERVER_TLS_CERT and SMPP_SERVER_TLS_KEY/);
  });

  it("a plain-text bind on the TLS port gets no answer: the connection is dropped", async () => {
    const s = connect(tlsPort, "127.0.0.1");
    s.on("error", () => undefined);
    await once(s, "connect");
    s.write(new smpp.PDU("bind_transceiver", { system_id: "tls", password: "pw1234" }).toBuffer());
    const data: Buffer[] = [];
    s.on("data", (c: Buffer) => data.push(c));
    await once(s, "close");
    // Whatever came back is a TLS alert, never an SMPP PDU.
    expect(Buffer.concat(data).subarray(0, 1).toString("hex")).not.toBe("00");
  });
});
