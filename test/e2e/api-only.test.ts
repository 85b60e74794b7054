/**
 * DELIVERY=off: `npm start` serves the API only and `npm run worker` processes on the same
 * PostgreSQL database deliver (docs/configuration.md). The setting's parsing, then the two
 * processes end to end (PostgreSQL pass only: the embedded database has no second process).
 */
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { dbKind } from "../support/db.js";
import { freePort } from "../support/kannel.js";
import { ADMIN_TOKEN, basic } from "../support/harness.js";
import { killService, operatorCall, serviceDatabase, type Service, type ServiceDatabase, startService, waitForOutput } from "../support/service.js";

const PG = "postgres://postgres@127.0.0.1:5432/x";

describe("DELIVERY setting", () => {
  it("is on by default, on or off in any case, and off only on PostgreSQL", () => {
    expect(loadConfig({}).delivery).toBe("on");
    expect(loadConfig({ DELIVERY: " OFF ", DATABASE_URL: PG }).delivery).toBe("off");
    expect(loadConfig({ DELIVERY: "on" }).delivery).toBe("on");
    expect(() => loadConfig({ DELIVERY: "no" })).toThrow('DELIVERY must be on or off, got "no"');
    expect(() => loadConfig({ DELIVERY: "off" })).toThrow(/^DELIVERY=off needs a shared PostgreSQL database/);
    expect(() => loadConfig({ DELIVERY: "off", DATABASE_URL: "memory://" })).toThrow(/npm run worker/);
  });
});

describe.skipIf(dbKind() !== "postgres")("npm start with DELIVERY=off beside npm run worker", { timeout: 180_000 }, () => {
  let db: ServiceDatabase | undefined;
  let api: Service | undefined;
  let worker: Service | undefined;

  afterAll(async () => {
    await killService(api);
    await killService(worker);
    await db?.drop();
  });

  it("the API stores a send due now and leaves it queued; a worker started later delivers it", async () => {
    db = await serviceDatabase();
    const env = { DATABASE_URL: db.url, SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: "info", SIMULATOR_REPORT_DELAY_MS: "20" };
    api = await startService({ port: await freePort(), env: { ...env, DELIVERY: "off" } });
    await waitForOutput(api, /"msg":"Switchboard listening"/);
    expect(api.stdout()).toMatch(/"delivery":"off"[^\n]*"msg":"Switchboard listening"/);

    const admin = operatorCall(api.base, ADMIN_TOKEN);
    const account = await admin("/admin/v1/Accounts", { Name: "API only", SmsEnabled: true });
    const property = await admin(`/admin/v1/Accounts/${account.AccountSid}/Properties`, { Name: "Main", SmsEnabled: true });
    await admin("/admin/v1/Numbers", { Number: "+447700900001", AccountSid: account.AccountSid });
    const auth = basic(account.AccountSid, account.Token);
    const url = `${api.base}/v2/Properties/${property.PropertySid}/Messages`;
    const sent = await fetch(url, {
      method: "POST",
      headers: { authorization: auth, "content-type": "application/json" },
      body: JSON.stringify({ From: "+447700900001", To: "+447700900123", Text: "Hello" }),
    });
    expect(sent.status).toBe(200);
    const { MessageSid } = (await sent.json()) as { MessageSid: string };

    const get = async () => {
      const res = await fetch(`${api!.base}/v2/Messages/${MessageSid}`, { headers: { authorization: auth } });
      expect(res.status).toBe(200);
      return (await res.json()) as { Status: string };
    };
    // No dispatcher in the API process: a second later (reports come after 20 ms) it still waits in the queue.
    await new Promise((r) => setTimeout(r, 1000));
    expect((await get()).Status).toBe("Processing");

    worker = await startService({ port: 0, script: "src/worker.ts", waitReady: false, env });
    await waitForOutput(worker, /"msg":"Switchboard worker running"/);
    const deadline = Date.now() + 30_000;
    let status = "";
    while (Date.now() < deadline && (status = (await get()).Status) !== "Delivered") await new Promise((r) => setTimeout(r, 100));
    expect(status).toBe("Delivered");
  });
});
