/**
 * The README's first run and five-minute tour, for real: what `npm start` runs (Node 24 from node_modules) on
 * an empty embedded PGlite folder, no SWITCHBOARD_ADMIN_TOKEN. The new folder is prepared by a
 * process of its own (src/first-start.ts) that has exited before the server opens it. The banner's
 * curl line is run with the real curl, the operator token works, SIGTERM exits 0 promptly (even
 * with a gRPC client's h2c session open), and a restart on the same folder prints no banner, keeps
 * every credential and prepares in its own process. A first start whose child fails fails with its message.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { runFirstStart } from "../../src/bootstrap.js";
import { createOrm } from "../../src/db/orm.js";
import { entities } from "../../src/entities.js";
import { dbKind } from "../support/db.js";
import { npmStartArgs } from "../support/service.js";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const NODE = join(ROOT, "node_modules", ".bin", "node");
const SID_RE = (prefix: string) => new RegExp(`^${prefix}[A-Z0-9]{30}$`);
const STARTUP_MS = 90_000;

/** A running `node --import tsx src/main.ts` and everything it wrote. */
interface Service {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((done) => srv.listen(0, "127.0.0.1", done));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((done) => srv.close(() => done()));
  return port;
}

const started: Service[] = [];

/** Starts the service as the README says, on the embedded PGlite folder given, whatever this test's env says. */
function startService(dataUrl: string, port: number): Service {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), DATABASE_URL: dataUrl };
  delete env.SWITCHBOARD_ADMIN_TOKEN;
  delete env.HOST;
  const child = spawn(NODE, npmStartArgs(), { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once("exit", (code, signal) => done({ code, signal })));
  const svc = { child, stdout: () => out, stderr: () => err, exited };
  started.push(svc);
  return svc;
}

/** Resolves when stdout matches; fails early if the process exits, or after timeoutMs. */
async function waitForStdout(svc: Service, re: RegExp, timeoutMs = STARTUP_MS): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void svc.exited.then(() => (exited = true));
  for (;;) {
    const m = re.exec(svc.stdout());
    if (m) return m;
    if (exited || Date.now() > deadline) {
      throw new Error(`${exited ? "service exited" : "timed out"} waiting for ${re}\n--- stdout\n${svc.stdout()}\n--- stderr\n${svc.stderr()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Sends SIGTERM and returns how the process ended and how long it took. */
async function stop(svc: Service): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  const t0 = Date.now();
  svc.child.kill("SIGTERM");
  const timeout = new Promise<never>((_, fail) => setTimeout(() => fail(new Error(`no exit 15 s after SIGTERM\n--- stderr\n${svc.stderr()}`)), 15_000).unref());
  const res = await Promise.race([svc.exited, timeout]);
  return { ...res, ms: Date.now() - t0 };
}

/** The JSON log lines a process wrote on stdout (the banner's plain lines are left out). */
function logLines(svc: Service): { pid: number; msg: string; childPid?: number; migrations?: number; ms?: number }[] {
  return svc
    .stdout()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l));
}

const BANNER_RE =
  /Switchboard first run: demo data created\.\n {2}Operator token: +(\S+) +\(kept in (.+)\)\n {2}Demo account: +(AC\S+)\n {2}Account token: +(\S+) .*\n {2}Demo property: +(PR\S+)\n {2}Pool number: +(\+\d+)\n\nSend an SMS:\n((?: {2}curl .*\\\n)(?: {4}.*\\\n)*(?: {4}\S+\/Messages))\n/;

const tmp = mkdtempSync(join(tmpdir(), "switchboard-first-run-"));
const dataUrl = join(tmp, "data");

afterAll(async () => {
  for (const svc of started) {
    if (svc.child.exitCode === null && svc.child.signalCode === null) {
      svc.child.kill("SIGKILL");
      await svc.exited;
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

describe("first run of the real service (embedded PGlite folder)", () => {
  let demo: { operatorToken: string; tokenFile: string; accountSid: string; token: string; propertySid: string; poolNumber: string; messageSid: string };
  let port: number;

  it("prints the banner; its curl line sends an SMS; the operator token works; SIGTERM exits 0", { timeout: 150_000 }, async () => {
    // A real curl is part of what is tested: its absence fails here instead of skipping.
    const version = await run("curl", ["--version"]);
    expect(version.stdout).toMatch(/^curl \d/);
    expect(existsSync(NODE), `${NODE} (the Node 24 the project pins)`).toBe(true);

    port = await freePort();
    const svc = startService(dataUrl, port);
    const m = await waitForStdout(svc, BANNER_RE);
    const [, operatorToken, tokenFile, accountSid, token, propertySid, poolNumber, curlLine] = m;
    // The banner is written straight to stdout, the log lines through the logger's buffer: on a
    // busy machine "Switchboard listening" may follow the banner by a moment.
    await waitForStdout(svc, /"msg":"Switchboard listening"/);
    expect(accountSid).toMatch(SID_RE("AC"));
    expect(propertySid).toMatch(SID_RE("PR"));
    expect(token.length).toBeGreaterThanOrEqual(32);
    expect(operatorToken.length).toBeGreaterThanOrEqual(32);
    expect(tokenFile).toBe(join(tmp, "admin-token"));
    expect(readFileSync(tokenFile, "utf8").trim()).toBe(operatorToken);
    expect(curlLine).toContain(`http://localhost:${port}/v2/Properties/${propertySid}/Messages`);

    // The one-time work ran in a child process that logged its steps and exited before the server opened the folder.
    const lines = logLines(svc);
    const msgs = lines.map((l) => l.msg);
    const forked = lines.find((l) => l.msg.startsWith("new data folder: creating"));
    expect(forked, msgs.join("\n")).toMatchObject({ pid: svc.child.pid, childPid: expect.any(Number) });
    const childPid = forked!.childPid!;
    expect(childPid).not.toBe(svc.child.pid);
    expect(lines.find((l) => l.msg === "migrations applied")).toMatchObject({ pid: childPid, migrations: expect.any(Number), ms: expect.any(Number) });
    expect(lines.find((l) => l.msg === "demo data created")).toMatchObject({ pid: childPid });
    expect(lines.find((l) => l.msg === "new data folder ready")).toMatchObject({ pid: svc.child.pid, ms: expect.any(Number) });
    expect(lines.filter((l) => l.pid === svc.child.pid && /^(migrations applied|database schema up to date)$/.test(l.msg))).toEqual([]);
    expect(msgs.indexOf("new data folder ready")).toBeLessThan(msgs.indexOf("Switchboard listening"));
    expect(() => process.kill(childPid, 0), "the child has exited").toThrow();

    // The printed line exactly as a user would paste it, plus -w to see the status code.
    const sent = await run("sh", ["-c", `${curlLine} -w '\\n%{http_code}'`]);
    const body = sent.stdout.slice(0, sent.stdout.lastIndexOf("\n"));
    const status = sent.stdout.slice(sent.stdout.lastIndexOf("\n") + 1);
    expect(status, sent.stdout).toBe("200");
    const msg = JSON.parse(body);
    expect(Object.keys(msg).sort()).toEqual(["AccountSid", "From", "MessageSid", "PropertySid", "Text", "To"]);
    expect(msg).toEqual({
      MessageSid: expect.stringMatching(SID_RE("MG")),
      AccountSid: accountSid,
      PropertySid: propertySid,
      From: poolNumber,
      To: "+14155550123",
      Text: "Hello from Switchboard",
    });
    demo = { operatorToken, tokenFile, accountSid, token, propertySid, poolNumber, messageSid: msg.MessageSid };

    // The README's five-minute tour shows this very line (placeholders for the Sids, token and port).
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const trim = (text: string) =>
      text
        .split("\n")
        .map((l) => l.trim())
        .join("\n");
    const tourCurl = readme.match(/^ {3}```sh\n( {3}curl -s -u AC…:token -H[\s\S]*?)\n {3}```/m)?.[1];
    expect(tourCurl, "the tour's curl block in README.md").toBeDefined();
    const generic = curlLine
      .replaceAll(accountSid, "AC…")
      .replaceAll(token, "token")
      .replaceAll(propertySid, "PR…")
      .replaceAll(`localhost:${port}`, "localhost:8080");
    expect(trim(generic)).toBe(trim(tourCurl!));
    // Its next steps: read the record with the same credentials until it is Delivered (the
    // simulator reports after 200 ms); the simulated handset has the SMS.
    let record: Record<string, unknown> = {};
    for (const deadline = Date.now() + 30_000; record.Status !== "Delivered" && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 100));
      record = JSON.parse((await run("curl", ["-s", "-u", `${accountSid}:${token}`, `http://localhost:${port}/v2/Messages/${msg.MessageSid}`])).stdout);
    }
    expect(record).toMatchObject({ MessageSid: msg.MessageSid, Status: "Delivered", Submitted: expect.any(Number), Delivered: expect.any(Number) });
    expect(record.Delivered).toBeGreaterThan(0);
    const handset = await fetch(`http://127.0.0.1:${port}/admin/v1/Simulator/Handsets/14155550123/Messages`, {
      headers: { authorization: `Bearer ${operatorToken}` },
    });
    expect(handset.status).toBe(200);
    expect(JSON.stringify(await handset.json())).toContain("Hello from Switchboard");
    // And /docs, the last step, is served.
    expect((await fetch(`http://127.0.0.1:${port}/docs`)).status).toBe(200);

    const base = `http://127.0.0.1:${port}`;
    const created = await fetch(`${base}/admin/v1/Accounts`, {
      method: "POST",
      headers: { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" },
      body: JSON.stringify({ Name: "Made by the operator" }),
    });
    expect(created.status).toBe(200);
    expect(await created.json()).toMatchObject({ AccountSid: expect.stringMatching(SID_RE("AC")), Name: "Made by the operator" });
    const refused = await fetch(`${base}/admin/v1/Accounts`, {
      method: "POST",
      headers: { authorization: `Bearer ${operatorToken}x`, "content-type": "application/json" },
      body: "{}",
    });
    expect(refused.status).toBe(401);

    // A gRPC client (h2c) keeps its HTTP/2 session open across the shutdown, as real clients do.
    const sessions = new Http2SessionManager(base);
    try {
      const grpc = createClient(MessagingService, createGrpcTransport({ baseUrl: base, sessionManager: sessions }));
      const rec = await grpc.getMessage(
        { messageSid: msg.MessageSid },
        { headers: { authorization: `Basic ${Buffer.from(`${accountSid}:${token}`).toString("base64")}` } },
      );
      expect(rec).toMatchObject({ messageSid: msg.MessageSid, from: poolNumber, to: "+14155550123" });
      expect(["open", "idle"]).toContain(sessions.state());

      const end = await stop(svc);
      expect(end, svc.stderr()).toMatchObject({ code: 0, signal: null });
      expect(end.ms).toBeLessThan(10_000);
    } finally {
      sessions.abort();
    }
  });

  it("a restart on the same folder prints no banner and keeps the demo and operator credentials", { timeout: 150_000 }, async () => {
    expect(demo, "the first run must have succeeded").toBeDefined();
    const svc = startService(dataUrl, port);
    await waitForStdout(svc, /Switchboard listening/);
    expect(svc.stdout()).not.toContain("first run");
    // An existing folder is prepared by the server itself: nothing to apply.
    expect(logLines(svc).find((l) => l.msg === "database schema up to date")).toMatchObject({ pid: svc.child.pid, migrations: 0 });
    expect(svc.stdout()).not.toContain("new data folder");
    expect(svc.stdout()).not.toContain("Operator token");
    expect(svc.stdout()).not.toContain("operator token for this run");

    const base = `http://127.0.0.1:${port}`;
    const got = await fetch(`${base}/v2/Messages/${demo.messageSid}`, {
      headers: { authorization: `Basic ${Buffer.from(`${demo.accountSid}:${demo.token}`).toString("base64")}` },
    });
    expect(got.status).toBe(200);
    expect(await got.json()).toMatchObject({
      MessageSid: demo.messageSid,
      AccountSid: demo.accountSid,
      PropertySid: demo.propertySid,
      From: demo.poolNumber,
      To: "+14155550123",
      Text: "Hello from Switchboard",
    });

    const fileToken = readFileSync(demo.tokenFile, "utf8").trim();
    expect(fileToken).toBe(demo.operatorToken);
    const renamed = await fetch(`${base}/admin/v1/Accounts/${demo.accountSid}`, {
      method: "POST",
      headers: { authorization: `Bearer ${fileToken}`, "content-type": "application/json" },
      body: JSON.stringify({ Name: "Demo, renamed" }),
    });
    expect(renamed.status).toBe(200);
    expect(await renamed.json()).toMatchObject({ AccountSid: demo.accountSid, Name: "Demo, renamed" });

    const end = await stop(svc);
    expect(end, svc.stderr()).toMatchObject({ code: 0, signal: null });
    expect(end.ms).toBeLessThan(10_000);
  });
});

describe.skipIf(dbKind() !== "postgres")("first run on an empty PostgreSQL database", () => {
  it("creates no demo data and prints no banner (only the embedded default gets them), just this run's operator token", { timeout: 150_000 }, async () => {
    const server = new URL(process.env.DATABASE_URL!);
    const url = new URL(server.toString());
    url.pathname = `/sb_first_run_${process.pid}_${Date.now()}`;
    const svc = startService(url.toString(), await freePort());
    try {
      await waitForStdout(svc, /SWITCHBOARD_ADMIN_TOKEN is not set; operator token for this run: \S+/);
      expect(svc.stdout()).not.toMatch(/first run|Demo account|curl |new data folder/);
      // PostgreSQL is migrated by the server itself: the one-time work there is the server's, not Node's heap.
      expect(logLines(svc).find((l) => l.msg === "migrations applied")).toMatchObject({ pid: svc.child.pid, migrations: expect.any(Number) });
      const orm = await createOrm({ entities, databaseUrl: url.toString(), poolMax: 1 });
      try {
        const counts = await orm.em
          .fork()
          .execute<{ accounts: string; numbers: string }[]>("select (select count(*) from accounts) as accounts, (select count(*) from numbers) as numbers");
        expect(counts.map((c) => [Number(c.accounts), Number(c.numbers)])).toEqual([[0, 0]]);
      } finally {
        await orm.close(true);
      }
      expect((await stop(svc)).code).toBe(0);
    } finally {
      const admin = await createOrm({ entities, databaseUrl: server.toString(), poolMax: 1 });
      await admin.em.fork().execute(`drop database if exists "${url.pathname.slice(1)}" with (force)`);
      await admin.close(true);
    }
  });
});

describe("a first start whose preparing process fails", () => {
  const log = pino({ level: "silent" });
  /** A stand-in for src/first-start.ts: the same protocol (one message, then exit), a known outcome. */
  function script(name: string, body: string): URL {
    const file = join(tmp, name);
    writeFileSync(file, body);
    return pathToFileURL(file);
  }

  it("fails the start with the child's own message", { timeout: 30_000 }, async () => {
    const failing = script("fails.mjs", `process.send({ ok: false, error: "Error: disk full while writing base/1" }, () => process.exit(1));\n`);
    await expect(runFirstStart({ script: failing, execArgv: [], log })).rejects.toThrow(
      "preparing the new data folder failed: Error: disk full while writing base/1",
    );
  });

  it("fails the start when the child dies without a word, naming its exit code or signal", { timeout: 30_000 }, async () => {
    await expect(runFirstStart({ script: script("exits.mjs", "process.exit(3);\n"), execArgv: [], log })).rejects.toThrow(
      "the process preparing the new data folder ended (exit code 3) without reporting success",
    );
    await expect(runFirstStart({ script: script("killed.mjs", "process.kill(process.pid, 'SIGKILL');\n"), execArgv: [], log })).rejects.toThrow(
      "(signal SIGKILL)",
    );
  });

  it("returns what a successful child sends", { timeout: 30_000 }, async () => {
    const demo = { accountSid: "AC1", token: "t", propertySid: "PR1", poolNumber: "+12025550100" };
    const ok = script("ok.mjs", `process.send({ ok: true, demo: ${JSON.stringify(demo)} }, () => process.exit(0));\n`);
    expect(await runFirstStart({ script: ok, execArgv: [], log })).toEqual(demo);
  });
});
