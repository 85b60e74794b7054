/**
 * Kannel as the customer (issue 44, must show): a bearerbox whose `smsc = smpp` group binds to
 * the SMPP server; a sendsms request to Kannel becomes a Switchboard message delivered by the
 * simulator, and its receipt comes back through Kannel's dlr-url.
 */
import { createServer, type Server } from "node:http";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTenant, createTestApp, drainDeliveries, type Tenant, type TestApp } from "../support/harness.js";
import { type KannelCustomer, startKannelCustomer } from "./kannel-customer.js";
import { setSmppCredentials } from "./esme.js";

let t: TestApp;
let a: Tenant;
let kannel: KannelCustomer;
let dlrServer: Server;
let dlrPort: number;
const dlrs: URLSearchParams[] = [];

beforeAll(async () => {
  t = await createTestApp({ engine: true, config: { smppServer: { port: 0 }, host: "127.0.0.1" } });
  const port = (await t.app.smppServer!.listen()).port!;
  a = await createTenant(t.app);
  await setSmppCredentials(t.app, a.accountSid, { SystemId: "kannel", Password: "pw1234", PropertySid: a.propertySid });
  dlrServer = createServer((req, reply) => {
    dlrs.push(new URL(req.url ?? "/", "http://x").searchParams);
    reply.end("ok");
  });
  dlrServer.listen(0, "127.0.0.1");
  await once(dlrServer, "listening");
  dlrPort = (dlrServer.address() as { port: number }).port;
  kannel = await startKannelCustomer({ smppPort: port, systemId: "kannel", password: "pw1234" });
}, 60_000);

afterAll(async () => {
  await kannel?.stop();
  dlrServer?.close();
  await t?.close();
});

describe("Kannel as the customer", () => {
  it("binds as a transceiver; a sendsms becomes a message the simulator delivers; its receipt reaches Kannel's dlr-url", async () => {
    const binds = await t.app.inject({
      method: "GET",
      url: `/admin/v1/SmppBinds?AccountSid=${a.accountSid}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(binds.json().Binds.map((b: { SystemId: string; Mode: string }) => [b.SystemId, b.Mode])).toStrictEqual([["kannel", "Transceiver"]]);
    const dlrUrl = `http://127.0.0.1:${dlrPort}/dlr?type=%d&id=%F&status=%A`;
    const params = new URLSearchParams({
      username: "customer",
      password: "customer",
      from: a.ownedNumber,
      to: "+61412345678",
      text: "Hello through Kannel",
      "dlr-mask": "3",
      "dlr-url": dlrUrl,
    });
    const sent = await fetch(`${kannel.sendsmsUrl}?${params}`);
    expect(sent.status).toBe(202);
    // The message Kannel submitted, stored through the send pipeline.
    let sid = "";
    for (const end = Date.now() + 20_000; sid === "" && Date.now() < end;) {
      const rows = await t.db.orm.em.fork().getConnection().execute<{ sid: string }[]>("select sid from messages where text = 'Hello through Kannel'");
      sid = rows[0]?.sid ?? "";
      if (sid === "") await new Promise((r) => setTimeout(r, 100));
    }
    expect(sid, await kannel.diagnostics()).toMatch(/^MG/);
    const m = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: a.auth } });
    expect(m.json()).toMatchObject({ From: a.ownedNumber, To: "+61412345678", Text: "Hello through Kannel" });
    await drainDeliveries(t);
    // Kannel heard the receipt (type 1: delivered) and called the dlr-url with it.
    for (const end = Date.now() + 20_000; !dlrs.some((d) => d.get("type") === "1") && Date.now() < end;) await new Promise((r) => setTimeout(r, 100));
    const delivered = dlrs.find((d) => d.get("type") === "1");
    expect(delivered, `${JSON.stringify(dlrs.map((d) => Object.fromEntries(d)))}\n${await kannel.diagnostics()}`).toBeDefined();
    expect(delivered!.get("status") ?? "").toContain(`id:${sid}`);
  }, 60_000);
});
