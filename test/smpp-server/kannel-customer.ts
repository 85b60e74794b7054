/**
 * Kannel 1.4.5 as a customer of the SMPP server: a bearerbox whose `smsc = smpp` group binds to
 * Switchboard as a transceiver, and an smsbox whose sendsms requests it submits there. Runs in a
 * temporary directory on free ports, torn down with its process groups.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, kannelBinary } from "../support/kannel.js";

export interface KannelCustomer {
  sendsmsUrl: string;
  /** bearerbox's status.txt. */
  status(): Promise<string>;
  diagnostics(): Promise<string>;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startKannelCustomer(opts: { smppPort: number; systemId: string; password: string; timeoutMs?: number }): Promise<KannelCustomer> {
  const dir = await mkdtemp(join(tmpdir(), "switchboard-kannel-esme-"));
  const ports: number[] = [];
  while (ports.length < 3) {
    const p = await freePort();
    if (!ports.includes(p)) ports.push(p);
  }
  const [adminPort, smsboxPort, sendsmsPort] = ports as [number, number, number];
  const conf = `
group = core
admin-port = ${adminPort}
admin-password = kannel-admin
status-password = kannel-admin
admin-allow-ip = "127.0.0.1"
smsbox-port = ${smsboxPort}
box-allow-ip = "127.0.0.1"
dlr-storage = internal
log-file = "${dir}/bearerbox.log"
log-level = 0

group = smsc
smsc = smpp
smsc-id = switchboard
host = 127.0.0.1
port = ${opts.smppPort}
transceiver-mode = true
smsc-username = ${opts.systemId}
smsc-password = ${opts.password}
system-type = ""
source-addr-ton = 1
source-addr-npi = 1
dest-addr-ton = 1
dest-addr-npi = 1
enquire-link-interval = 30
reconnect-delay = 1

group = smsbox
bearerbox-host = 127.0.0.1
bearerbox-port = ${smsboxPort}
sendsms-port = ${sendsmsPort}
sendsms-interface = 127.0.0.1
log-file = "${dir}/smsbox.log"
log-level = 0

group = sendsms-user
username = customer
password = customer
user-allow-ip = "127.0.0.1"
concatenation = true
max-messages = 10
`;
  const confPath = join(dir, "kannel.conf");
  await writeFile(confPath, conf);
  const boxes: ChildProcess[] = [];
  const output: string[] = [];
  const box = (bin: string) => {
    const proc = spawn(kannelBinary(bin as "bearerbox"), ["-v", "1", confPath], { cwd: dir, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    proc.stdout?.setEncoding("utf8").on("data", (s: string) => output.push(s));
    proc.stderr?.setEncoding("utf8").on("data", (s: string) => output.push(s));
    boxes.push(proc);
  };
  const status = async () => {
    try {
      const res = await fetch(`http://127.0.0.1:${adminPort}/status.txt?password=kannel-admin`, { signal: AbortSignal.timeout(1000) });
      return await res.text();
    } catch {
      return "";
    }
  };
  const diagnostics = async () => {
    const logs = await Promise.all(
      ["bearerbox.log", "smsbox.log"].map(async (f) => `--- ${f}\n${(await readFile(join(dir, f), "utf8").catch(() => "")).slice(-3000)}`),
    );
    return [`--- output\n${output.join("").slice(-3000)}`, ...logs].join("\n");
  };
  const stop = async () => {
    for (const p of boxes.reverse()) {
      if (!p.pid || p.exitCode !== null) continue;
      try {
        process.kill(-p.pid, "SIGTERM");
      } catch {
        continue;
      }
      const exited = new Promise((r) => p.once("exit", r));
      if ((await Promise.race([exited.then(() => true), sleep(4000).then(() => false)])) === false) {
        try {
          process.kill(-p.pid, "SIGKILL");
        } catch {
          /* gone */
        }
      }
    }
    await rm(dir, { recursive: true, force: true });
  };
  box("bearerbox");
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  // The SMPP link is up (bound) and smsbox is connected.
  let smsboxStarted = false;
  for (;;) {
    const s = await status();
    if (!smsboxStarted && s.includes("Status: running")) {
      box("smsbox");
      smsboxStarted = true;
    }
    if (/switchboard.*online/.test(s) && /smsbox:.*online|Box connections:\s*\n\s*smsbox/.test(s)) break;
    if (Date.now() > deadline) {
      const diag = await diagnostics();
      await stop();
      throw new Error(`Kannel did not bind to the SMPP server\n${s}\n${diag}`);
    }
    await sleep(200);
  }
  return { sendsmsUrl: `http://127.0.0.1:${sendsmsPort}/cgi-bin/sendsms`, status, diagnostics, stop };
}
