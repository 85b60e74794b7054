/**
 * The compiled build `npm start` runs (scripts/build.mjs → dist/src/main.js, with `npm start`'s
 * node flags): it starts, answers /readyz, serves its OpenAPI document with the package version
 * and the proto comments (files it finds relative to its own module), sends an SMS that the
 * simulator delivers, and exits 0 on SIGTERM. The rest of the suite runs the TypeScript through
 * tsx; this is what keeps a broken build from passing. The compiled worker (`npm run worker`)
 * needs PostgreSQL, so it runs in the PostgreSQL pass.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind } from "../support/db.js";
import { freePort } from "../support/kannel.js";
import {
  buildService,
  killService,
  serviceDatabase,
  type Service,
  type ServiceDatabase,
  startService,
  stopService,
  waitForOutput,
} from "../support/service.js";

const ADMIN = "built-service-admin-token-0123456789";
const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

describe("npm start's compiled build", () => {
  let db: ServiceDatabase | undefined;
  let svc: Service | undefined;

  beforeAll(() => buildService(), 60_000);

  afterAll(async () => {
    await killService(svc);
    await db?.drop();
  });

  it("starts, answers /readyz, serves OpenAPI, sends an SMS and stops on SIGTERM", { timeout: 120_000 }, async () => {
    db = await serviceDatabase();
    svc = await startService({ port: await freePort(), compiled: true, env: { DATABASE_URL: db.url, SWITCHBOARD_ADMIN_TOKEN: ADMIN, LOG_LEVEL: "warn" } });
    expect((await fetch(`${svc.base}/readyz`)).status).toBe(200);

    const doc = (await (await fetch(`${svc.base}/openapi.json`)).json()) as { info: { version: string }; tags: { name: string; description?: string }[] };
    expect(doc.info.version).toBe(VERSION);
    expect(doc.tags.find((t) => t.name === "Messaging")?.description).toBe("Sends, schedules, lists and cancels SMS messages of a property.");

    const admin = async (path: string, body: object) => {
      const res = await fetch(`${svc!.base}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(res.status, `${path}: ${await res.clone().text()}`).toBe(200);
      return (await res.json()) as Record<string, string>;
    };
    const account = await admin("/admin/v1/Accounts", { Name: "Built", SmsEnabled: true });
    const property = await admin(`/admin/v1/Accounts/${account.AccountSid}/Properties`, { Name: "Built", SmsEnabled: true });
    await admin("/admin/v1/Numbers", { Number: "+447700900001", AccountSid: account.AccountSid });
    const auth = `Basic ${Buffer.from(`${account.AccountSid}:${account.Token}`).toString("base64")}`;
    const sent = await fetch(`${svc.base}/v2/Properties/${property.PropertySid}/Messages`, {
      method: "POST",
      headers: { authorization: auth, "content-type": "application/json" },
      body: JSON.stringify({ From: "+447700900001", To: "+447700900123", Text: "Hello from the build" }),
    });
    expect(sent.status).toBe(200);
    const { MessageSid } = (await sent.json()) as { MessageSid: string };
    let record: Record<string, unknown> = {};
    for (const deadline = Date.now() + 30_000; record.Status !== "Delivered" && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 100));
      record = (await (await fetch(`${svc.base}/v2/Messages/${MessageSid}`, { headers: { authorization: auth } })).json()) as Record<string, unknown>;
    }
    expect(record).toMatchObject({ MessageSid, Status: "Delivered" });

    expect(await stopService(svc)).toMatchObject({ code: 0, signal: null });
    expect(svc.stderr()).toBe("");
  });

  it("`npm start` itself: a SIGTERM sent to npm reaches the service, which stops gracefully", { timeout: 120_000 }, async () => {
    const startDb = await serviceDatabase();
    const port = await freePort();
    const npm = spawn("npm", ["start", "--silent"], {
      cwd: new URL("../..", import.meta.url),
      env: { ...process.env, PORT: String(port), DATABASE_URL: startDb.url, SWITCHBOARD_ADMIN_TOKEN: ADMIN, LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    npm.stdout.on("data", (d: Buffer) => (out += d.toString()));
    npm.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => npm.once("exit", (code, signal) => resolve([code, signal])));
    try {
      for (const deadline = Date.now() + 60_000; !/"msg":"Switchboard listening"/.test(out);) {
        if (Date.now() > deadline || npm.exitCode !== null) throw new Error(`npm start did not come up:\n${out.slice(-4000)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
      npm.kill("SIGTERM");
      // The service logs its graceful stop and npm exits with it; nothing keeps the port.
      expect(await exited).toEqual([0, null]);
      expect(out).toMatch(/"signal":"SIGTERM","msg":"shutting down"[\s\S]*"msg":"stopped"/);
      await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    } finally {
      if (npm.exitCode === null) npm.kill("SIGKILL");
      await startDb.drop();
    }
  });

  it.skipIf(dbKind() !== "postgres")("runs the compiled worker (npm run worker)", { timeout: 120_000 }, async () => {
    const workerDb = await serviceDatabase();
    const worker = await startService({
      port: await freePort(),
      script: "src/worker.ts",
      compiled: true,
      waitReady: false,
      env: { DATABASE_URL: workerDb.url, LOG_LEVEL: "info" },
    });
    try {
      await waitForOutput(worker, /"msg":"Switchboard worker running"/);
      expect(await stopService(worker)).toMatchObject({ code: 0, signal: null });
    } finally {
      await killService(worker);
      await workerDb.drop();
    }
  });
});
