/**
 * `BENCH_ONLY=rapid-reset npm run bench` (issue 27): the compiled service on PostgreSQL, as
 * `npm start` runs it, under an HTTP/2 rapid-reset flood of gRPC SendMessage streams from one h2c
 * connection at a time (no credentials; a new connection after each GOAWAY, as an attacker
 * would), for BENCH_RESET_SECONDS (default 10). Then: how long until /healthz answers and a REST
 * send succeeds after the flood's end, the service's CPU seconds during the flood, streams sent,
 * GOAWAYs received, the service's resident memory before and after, the messages the reset
 * streams wrote (BENCH_RESET_MODE, below). Prints only.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, toBinary } from "@bufbuild/protobuf";
import pg from "pg";
import { SendMessageRequestSchema } from "../gen/switchboard/v2/messaging_pb.js";
import { freePort } from "../test/support/kannel.js";
import { BUILT_MAIN, buildService, npmStartFlags } from "../test/support/service.js";
import { grpcFrame } from "./load.js";
import { rapidResetFlood } from "./rapid-reset.js";
import { adminCall } from "./service-runs.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Ms from `since` until `attempt` first succeeds (each try bounded by 1 s; retried at once). */
async function msUntil(since: number, attempt: () => Promise<boolean>, giveUpMs = 300_000): Promise<number> {
  for (;;) {
    try {
      if (await attempt()) return Date.now() - since;
    } catch {
      /* not yet */
    }
    if (Date.now() - since > giveUpMs) return NaN;
    await sleep(10);
  }
}

/**
 * `anonymous`: each stream an unauthenticated SendMessage (an empty message) reset with CANCEL, as
 * the probe of issue 27 sent them. `authenticated`: a tenant's complete, valid SendMessage ended
 * cleanly (END_STREAM) and then reset with NO_ERROR, the reset that looks least like one.
 */
export type ResetMode = "anonymous" | "authenticated";

export async function benchRapidReset(log: (s: string) => void, opts: { pgUrl: string; seconds: number; logLevel: string; mode: ResetMode }): Promise<string> {
  buildService();
  const dbName = `sb_bench_reset_${process.pid}_${randomBytes(3).toString("hex")}`;
  const admin = new pg.Client({ connectionString: opts.pgUrl });
  admin.on("error", (e) => log(`database connection lost: ${e.message}`));
  await admin.connect();
  await admin.query(`create database "${dbName}"`);
  const dbUrl = new URL(opts.pgUrl);
  dbUrl.pathname = `/${dbName}`;
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const token = `bench-admin-${randomBytes(16).toString("hex")}`;
  let service: ChildProcess | undefined;
  const out: string[] = [];
  try {
    service = spawn(process.execPath, [...npmStartFlags(), BUILT_MAIN], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: dbUrl.toString(),
        PORT: String(port),
        HOST: "127.0.0.1",
        SWITCHBOARD_ADMIN_TOKEN: token,
        LOG_LEVEL: opts.logLevel,
        CARRIER: "simulator",
        SEND_RATE_LIMIT: "off",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    service.stdout!.setEncoding("utf8").on("data", (s: string) => out.push(s));
    service.stderr!.setEncoding("utf8").on("data", (s: string) => out.push(s));
    service.once("exit", (code, signal) => log(`service exited (${code ?? signal}):\n${out.join("").slice(-4000)}`));
    const pid = service.pid!;
    if (Number.isNaN(await msUntil(Date.now(), async () => (await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(1000) })).ok, 60_000))) {
      throw new Error(`the service did not start:\n${out.join("")}`);
    }
    const call = adminCall(base, token);
    const account = await call("/admin/v1/Accounts", { Name: "Bench", SmsEnabled: true });
    const property = await call(`/admin/v1/Accounts/${account.AccountSid}/Properties`, { Name: "Bench", SmsEnabled: true });
    await call("/admin/v1/Numbers", { Number: "+447700900001", AccountSid: account.AccountSid });
    const auth = `Basic ${Buffer.from(`${account.AccountSid}:${account.Token}`).toString("base64")}`;
    const db = new pg.Client({ connectionString: dbUrl.toString() });
    db.on("error", (e) => log(`database connection lost: ${e.message}`));
    await db.connect();
    const countMessages = async () => Number((await db.query("select count(*)::int as n from messages")).rows[0].n);
    const restSend = async () => {
      const res = await fetch(`${base}/v2/Properties/${property.PropertySid}/Messages`, {
        method: "POST",
        headers: { authorization: auth, "content-type": "application/json" },
        body: JSON.stringify({ From: "+447700900001", To: "+447700900123", Text: "after the flood" }),
        signal: AbortSignal.timeout(1000),
      });
      await res.arrayBuffer();
      return res.status === 200;
    };
    if (!(await restSend())) throw new Error("REST send failed before the flood");
    await sleep(2000);

    const load = loadavg();
    const rssBefore = rssMiB(pid);
    const cpu0 = cpuSeconds(pid);
    log(`rapid reset: ${opts.seconds} s flood of gRPC SendMessage streams on ${base} (service pid ${pid})`);
    const started = Date.now();
    const request =
      opts.mode === "authenticated"
        ? {
            headers: [["authorization", auth]] as [string, string][],
            body: grpcFrame(
              toBinary(
                SendMessageRequestSchema,
                create(SendMessageRequestSchema, { propertySid: property.PropertySid, from: "+447700900001", to: "+447700900124", text: "reset" }),
              ),
            ),
            endStream: true,
            resetCode: 0,
          }
        : { body: new Uint8Array(5) };
    const messages0 = await countMessages();
    const flood = await rapidResetFlood(
      { port, path: "/switchboard.v2.MessagingService/SendMessage", ...request },
      { until: () => Date.now() - started >= opts.seconds * 1000 },
    );
    const ended = Date.now();
    const cpuFlood = cpuSeconds(pid) - cpu0;
    const rssEnd = rssMiB(pid);
    const [healthzMs, sendMs] = await Promise.all([
      msUntil(ended, async () => (await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(1000) })).ok),
      msUntil(ended, restSend),
    ]);
    const cpuUntilRecovered = cpuSeconds(pid) - cpu0;
    await sleep(5000);
    // Less the one REST send that measured the recovery (and any tried before it answered).
    const written = (await countMessages()) - messages0;
    const rssAfter = rssMiB(pid);
    const lines = [
      `Rapid reset (BENCH_ONLY=rapid-reset, BENCH_RESET_MODE=${opts.mode}, ${opts.seconds} s, load average before ${load.map((l) => l.toFixed(2)).join(" ")})`,
      `  streams sent ${flood.streams.toLocaleString("en")} on ${flood.connections} connections; GOAWAYs received ${flood.goaways}${flood.lastGoawayCode !== undefined ? ` (code ${flood.lastGoawayCode})` : ""}`,
      `  /healthz answered ${healthzMs} ms after the flood's end (target < 1000 ms); REST send succeeded after ${sendMs} ms (target < 2000 ms)`,
      `  service CPU during the flood ${cpuFlood.toFixed(1)} s (until both answered: ${cpuUntilRecovered.toFixed(1)} s)`,
      `  service RSS ${rssBefore.toFixed(0)} MiB before, ${rssEnd.toFixed(0)} MiB at the flood's end, ${rssAfter.toFixed(0)} MiB 5 s after recovery`,
      `  messages written meanwhile ${written} (the REST sends that measured the recovery included)`,
    ];
    await db.end();
    return lines.join("\n");
  } finally {
    if (service && service.exitCode === null) {
      service.kill("SIGTERM");
      await Promise.race([new Promise((r) => service!.once("exit", r)), sleep(15_000).then(() => service!.kill("SIGKILL"))]);
    }
    await admin.query(`drop database if exists "${dbName}" with (force)`).catch(() => undefined);
    await admin.end();
  }
}
