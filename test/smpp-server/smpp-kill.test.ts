/**
 * A process killed with a bind open loses no receipt (issue 44, docs/smpp-server.md#store-and-forward):
 * the real service (`npm start`'s command) with SMPP_SERVER_PORT claims a receipt and sends it to a
 * receiver that never answers; SIGKILL; the next process on the database delivers it to the
 * customer's next bind (Perl's Net::SMPP) once the dead process's claim has ended, and the dead
 * binds drop out of ListSmppBinds.
 */
import { connect } from "node:net";
import { once } from "node:events";
import smpp from "smpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/kannel.js";
import { killService, operatorCall, serviceDatabase, startService, waitForOutput, type Service, type ServiceDatabase } from "../support/service.js";
import { gsmHex, startEsme, type TestEsme } from "./esme.js";

const ADMIN = `smpp-admin-${"k".repeat(24)}`;
let db: ServiceDatabase;
let httpPort: number;
let smppPort: number;
const services: Service[] = [];
const esmes: TestEsme[] = [];

beforeAll(async () => {
  db = await serviceDatabase();
  httpPort = await freePort();
  do smppPort = await freePort();
  while (smppPort === httpPort);
}, 180_000);

afterAll(async () => {
  for (const e of esmes) await e.stop();
  for (const s of services) await killService(s);
  await db?.drop();
});

async function start(): Promise<Service> {
  const svc = await startService({
    port: httpPort,
    env: { DATABASE_URL: db.url, SWITCHBOARD_ADMIN_TOKEN: ADMIN, SMPP_SERVER_PORT: String(smppPort), SEND_RATE_LIMIT: "off" },
    waitReady: false,
  });
  services.push(svc);
  await waitForOutput(svc, /"msg":"Switchboard listening"/);
  await waitForOutput(svc, /"msg":"SMPP server listening"/);
  return svc;
}

describe("a process killed with a bind open", () => {
  it("loses no receipt: the next process delivers it once the claim has ended", async () => {
    const a = await start();
    const op = operatorCall(a.base, ADMIN);
    const account = await op("/admin/v1/Accounts", { Name: "SMPP customer" });
    const property = await op(`/admin/v1/Accounts/${account.AccountSid}/Properties`, { Name: "Site" });
    await op("/admin/v1/Numbers", { Number: "+447700950777", AccountSid: account.AccountSid });
    await op(`/admin/v1/Accounts/${account.AccountSid}/Smpp`, { SystemId: "killed", Password: "pw1234", PropertySid: property.PropertySid }, "PUT");

    // A receiver that takes deliver_sm and never answers one: the process's claim stays.
    const rx = connect(smppPort, "127.0.0.1");
    rx.on("error", () => undefined);
    await once(rx, "connect");
    let buf = Buffer.alloc(0);
    const heard: { command: string; command_status: number; receipted_message_id?: string }[] = [];
    rx.on("data", (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      while (buf.length >= 4 && buf.length >= buf.readUInt32BE(0)) {
        heard.push(new smpp.PDU(buf.subarray(0, buf.readUInt32BE(0)) as never) as never);
        buf = buf.subarray(buf.readUInt32BE(0));
      }
    });
    rx.write(new smpp.PDU("bind_receiver", { system_id: "killed", password: "pw1234" }).toBuffer());

    const tx = await startEsme(smppPort);
    esmes.push(tx);
    tx.send("bind transmitter killed pw1234");
    expect((await tx.next("bind_resp")).f.status).toBe("0");
    tx.send(`submit k1 src=447700950777 dst=61412345678 rd=1 sm=${gsmHex("survives a kill")}`);
    const sent = await tx.next("submit_resp", (x) => x.f.tag === "k1");
    expect(sent.f.status).toBe("0");
    const sid = sent.f.id!;
    // The simulator delivers; the process claims the receipt and sends it, unanswered.
    for (const end = Date.now() + 20_000; !heard.some((p) => p.command === "deliver_sm" && p.receipted_message_id === sid);) {
      if (Date.now() > end) throw new Error(`no deliver_sm: ${JSON.stringify(heard)}\n${a.output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const claimedAt = Date.now();
    await a.kill("SIGKILL");
    rx.destroy();
    await tx.stop();

    const b = await start();
    const next = await startEsme(smppPort);
    esmes.push(next);
    next.send("bind receiver killed pw1234");
    expect((await next.next("bind_resp")).f.status).toBe("0");
    const receipt = await next.next("deliver", (x) => x.f.rmi === sid, 60_000);
    expect(receipt.f).toMatchObject({ esm: "4", state: "2", src: "61412345678", dst: "447700950777" });
    // Not before the dead process's claim (30 s) ended.
    expect(Date.now() - claimedAt).toBeGreaterThanOrEqual(25_000);
    // The dead process's binds stop counting and listing once their heartbeat is 30 s old.
    for (const end = Date.now() + 45_000; ;) {
      const res = await fetch(`${b.base}/admin/v1/SmppBinds?AccountSid=${account.AccountSid}`, { headers: { authorization: `Bearer ${ADMIN}` } });
      const binds = ((await res.json()) as { Binds?: { Mode: string }[] }).Binds ?? [];
      if (binds.length === 1) {
        expect(binds.map((x) => x.Mode)).toStrictEqual(["Receiver"]);
        break;
      }
      if (Date.now() > end) throw new Error(`dead binds still listed: ${JSON.stringify(binds)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }, 180_000);
});
