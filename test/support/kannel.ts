/**
 * A real Kannel 1.4.5 for tests: bearerbox + smsbox + fakesmsc (Debian `kannel`, `kannel-extras`)
 * on free ports in a temporary directory, torn down with their process groups.
 *
 * fakesmsc facts this relies on (Kannel 1.4.5, test/fakesmsc.c and gw/smsc/smsc_fake.c):
 * - Started without message arguments it is interactive: each line on its stdin is one
 *   mobile-originated SMS, `<from> <to> <type> <data>`, type `text` (the rest of the line as is),
 *   `data` (URL-encoded bytes), `ucs2` (URL-encoded UTF-16BE, sets coding 2), `udh-text`,
 *   `udh-data`, `route`, `dlr-mask`. It reads stdin with fgets() into a 256-byte buffer after a
 *   select(): two lines written at once leave the second in stdio's buffer until more input
 *   arrives, so lines are written one at a time with a pause. EOF on stdin crashes it
 *   (double free), so stdin stays open until stop().
 * - Every SMS bearerbox hands it is logged (DEBUG, on stderr) as
 *   `Got message N: <from to type data>`, type `text` (printable ASCII), `data` (URL-encoded),
 *   `ucs-2` (URL-encoded UTF-16BE) or `udh <udh> <type> <data>` for the parts of a long SMS.
 * - The fake SMSC acks each SMS with a type 8 (submitted) report and then a type 1
 *   (delivered) one; it never produces 2 (failed), 4 (buffered) or 16 (rejected). smsbox calls
 *   the dlr-url of both concurrently, so 1 may arrive before 8.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import type { Transporter } from "nodemailer";
import { buildApp } from "../../src/app.js";
import { createKannelCarrier, kannelPatternValue } from "../../src/carriers/kannel.js";
import { systemClock } from "../../src/common/clock.js";
import { checkSecret } from "../../src/config.js";
import { createDeliveryEngine, type DeliveryEngine } from "../../src/delivery/engine.js";
import { createTestOrm, type TestOrm } from "./db.js";
import { ADMIN_TOKEN } from "./harness.js";

const TEMPLATE = join(dirname(fileURLToPath(import.meta.url)), "kannel.conf.template");

/** The sendsms account the template configures. */
export const KANNEL_USER = { username: "switchboard", password: "switchboard" } as const;

/** One SMS fakesmsc received from Kannel, decoded. */
export interface FakesmscMessage {
  from: string;
  to: string;
  /** The text as Kannel sent it (UTF-16BE decoded for `ucs-2`); a long SMS arrives as several parts. */
  text: string;
  /** The raw line fakesmsc logged. */
  line: string;
  /** User data header of a part of a long SMS, hex; "" otherwise. */
  udh: string;
}

/** A running Kannel with its test SMSC. */
export interface RunningKannel {
  sendsmsUrl: string;
  adminUrl: string;
  dir: string;
  fakesmsc: {
    /** Raw lines (`from to type data`) of every SMS fakesmsc received, oldest first. */
    received(): string[];
    /** The same, decoded. */
    messages(): FakesmscMessage[];
    /** Sends a mobile-originated SMS into Kannel (resolves once it is written to fakesmsc). */
    sendMo(from: string, to: string, text: string): Promise<void>;
  };
  /** The tails of the processes' output and Kannel's logs, for failure messages. */
  diagnostics(): Promise<string>;
  stop(): Promise<void>;
}

/** Finds a Kannel binary; the error says how to install it (the tests need it, they are not skipped). */
export function kannelBinary(name: "bearerbox" | "smsbox" | "fakesmsc"): string {
  const dirs = [...new Set(["/usr/sbin", "/usr/bin", "/usr/lib/kannel/test", "/usr/local/sbin", "/usr/local/bin", ...(process.env.PATH ?? "").split(":")])];
  for (const d of dirs) {
    if (d && existsSync(join(d, name))) return join(d, name);
  }
  throw new Error(
    `Kannel's ${name} was not found (looked in ${dirs.filter(Boolean).join(", ")}). ` + "Install Kannel: apt-get install kannel kannel-extras (.ci/run does).",
  );
}

/**
 * A port nothing listens on right now, below the kernel's ephemeral range (32768-60999 on Linux).
 * A port from listen(0) is in that range, and between this call and the moment it is bound (a
 * Kannel box binds its ports seconds later under load; the crash test binds its service's port
 * again after every kill) the kernel may hand it to any process's listen(0) or use it as the
 * local port of any outgoing connection: the busier the machine, the likelier. Below the range,
 * only another caller of this function can pick it.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canListen(port)) return port;
  }
  return listenPort(0);
}

function canListen(port: number): Promise<boolean> {
  return listenPort(port).then(
    () => true,
    () => false,
  );
}

function listenPort(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", reject);
    srv.listen(port, "127.0.0.1", () => {
      const bound = (srv.address() as { port: number }).port;
      srv.close(() => resolve(bound));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Decodes `%XX` and `+` (Kannel's octstr_url_encode writes a space as `+`) to bytes. */
function urlBytes(s: string): Buffer {
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "+") out.push(0x20);
    else if (s[i] === "%" && /^[0-9a-fA-F]{2}$/.test(s.slice(i + 1, i + 3))) {
      out.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else out.push(...Buffer.from(s[i]!, "utf8"));
  }
  return Buffer.from(out);
}

/** Parses a line fakesmsc logged for an SMS it received. */
export function parseFakesmscLine(line: string): FakesmscMessage {
  const words = line.split(" ");
  const [from = "", to = ""] = words;
  let i = 2;
  let udh = "";
  if (words[i] === "udh") {
    udh = urlBytes(words[i + 1] ?? "").toString("hex");
    i += 2;
  }
  const type = words[i] ?? "";
  const data = words.slice(i + 1).join(" ");
  let text: string;
  if (type === "text") text = data;
  else if (type === "ucs-2" || type === "ucs2") text = urlBytes(data).swap16().toString("utf16le");
  else text = urlBytes(data).toString("utf8");
  return { from, to, text, line, udh };
}

/** The line fakesmsc reads for one mobile-originated SMS: `text` when it can, else UCS-2 like a handset. */
export function fakesmscMoLine(from: string, to: string, text: string): string {
  if (/\s/.test(from) || /\s/.test(to)) throw new Error("fakesmsc numbers cannot contain spaces");
  if (/[\r\n]/.test(text)) throw new Error("fakesmsc takes one line per SMS: no line breaks in the text");
  const line = /^[\x20-\x7e]*$/.test(text)
    ? `${from} ${to} text ${text}`
    : `${from} ${to} ucs2 ${[...Buffer.from(text, "utf16le").swap16()].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("")}`;
  // fakesmsc reads stdin with fgets() into 256 bytes: a longer line would become two SMS.
  if (Buffer.byteLength(line) + 1 > 255) throw new Error(`fakesmsc lines are limited to 254 bytes; this one has ${Buffer.byteLength(line)}`);
  return line;
}

class Tail {
  private buf = "";
  constructor(private readonly max = 20_000) {}
  push(s: string) {
    this.buf = (this.buf + s).slice(-this.max);
  }
  toString() {
    return this.buf;
  }
}

interface Box {
  name: string;
  proc: ChildProcess;
  out: Tail;
  exited: Promise<void>;
}

/** Process groups still alive, killed when the test process exits however it exits. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;
function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const pgid of liveGroups) {
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  });
}

function spawnBox(name: string, cmd: string, args: string[], cwd: string, stdin: "pipe" | "ignore" = "ignore"): Box {
  // detached: its own process group, so stop() can end it and anything it started.
  const proc = spawn(cmd, args, { cwd, detached: true, stdio: [stdin, "pipe", "pipe"] });
  const out = new Tail();
  proc.stdout?.setEncoding("utf8").on("data", (s: string) => out.push(s));
  proc.stderr?.setEncoding("utf8").on("data", (s: string) => out.push(s));
  const exited = new Promise<void>((resolve) => {
    proc.once("exit", (code, signal) => {
      out.push(`\n[${name} exited: ${signal ?? code}]\n`);
      if (proc.pid) liveGroups.delete(proc.pid);
      resolve();
    });
    proc.once("error", (err) => {
      out.push(`\n[${name} failed to start: ${err.message}]\n`);
      resolve();
    });
  });
  if (proc.pid) liveGroups.add(proc.pid);
  return { name, proc, out, exited };
}

async function stopBox(box: Box, graceMs = 4000): Promise<void> {
  const pgid = box.proc.pid;
  if (!pgid || box.proc.exitCode !== null || box.proc.signalCode !== null) return;
  try {
    process.kill(-pgid, "SIGTERM");
  } catch {
    return;
  }
  const done = await Promise.race([box.exited.then(() => true), sleep(graceMs).then(() => false)]);
  if (!done) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      /* gone meanwhile */
    }
    await box.exited;
  }
  liveGroups.delete(pgid);
}

async function httpText(url: string, timeoutMs = 1000): Promise<{ status: number; body: string } | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return { status: res.status, body: await res.text() };
  } catch {
    return undefined;
  }
}

/**
 * Starts bearerbox, fakesmsc and smsbox with the template's configuration and waits until a
 * sendsms request would reach fakesmsc: the fake SMSC is online and smsbox is connected.
 */
export async function startKannel(opts: {
  callbackBaseUrl: string;
  secret: string;
  timeoutMs?: number;
  /**
   * Kannel log level (0 debug … 4 panic) for the log files, stderr and fakesmsc; default: debug
   * files, info stderr. Above 0, fakesmsc no longer logs the SMS it receives: `received()` stays empty.
   */
  logLevel?: number;
}): Promise<RunningKannel> {
  const bins = { bearerbox: kannelBinary("bearerbox"), smsbox: kannelBinary("smsbox"), fakesmsc: kannelBinary("fakesmsc") };
  installExitHook();
  const dir = await mkdtemp(join(tmpdir(), "switchboard-kannel-"));
  await mkdir(join(dir, "spool"));
  const [adminPort, smsboxPort, fakesmscPort, sendsmsPort] = await distinctFreePorts(4);
  const adminPassword = "kannel-admin";
  const values: Record<string, string> = {
    ADMIN_PORT: String(adminPort),
    ADMIN_PASSWORD: adminPassword,
    SMSBOX_PORT: String(smsboxPort),
    FAKESMSC_PORT: String(fakesmscPort),
    SENDSMS_PORT: String(sendsmsPort),
    DIR: dir,
    CALLBACK_BASE_URL: opts.callbackBaseUrl.replace(/\/+$/, ""),
    SECRET: kannelPatternValue(opts.secret),
    LOG_LEVEL: String(opts.logLevel ?? 0),
  };
  const conf = (await readFile(TEMPLATE, "utf8")).replace(/\{\{([A-Z_]+)\}\}/g, (m, k: string) => values[k] ?? m);
  const confPath = join(dir, "kannel.conf");
  await writeFile(confPath, conf);

  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const sendsmsUrl = `http://127.0.0.1:${sendsmsPort}/cgi-bin/sendsms`;
  const status = async () => (await httpText(`${adminUrl}/status.txt?password=${adminPassword}`))?.body ?? "";
  const boxes: Box[] = [];
  const received: string[] = [];
  let fakesmsc: Box | undefined;
  let moChain: Promise<void> = Promise.resolve();
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);

  const diagnostics = async () => {
    const logs = await Promise.all(
      ["bearerbox.log", "smsbox.log"].map(async (f) => `--- ${f}\n${(await readFile(join(dir, f), "utf8").catch(() => "")).slice(-4000)}`),
    );
    return [...boxes.map((b) => `--- ${b.name} output\n${b.out.toString().slice(-4000)}`), ...logs].join("\n");
  };
  const stop = async () => {
    // smsbox first (it holds the bearerbox connection), then the SMSC client, then bearerbox.
    for (const name of ["smsbox", "fakesmsc", "bearerbox"]) {
      const b = boxes.find((x) => x.name === name);
      if (b) await stopBox(b);
    }
    await rm(dir, { recursive: true, force: true });
  };
  const waitFor = async (what: string, check: () => Promise<boolean>) => {
    while (!(await check())) {
      const dead = boxes.find((b) => b.proc.exitCode !== null || b.proc.signalCode !== null);
      if (dead || Date.now() > deadline) {
        const why = dead ? `${dead.name} exited` : "timed out";
        const diag = await diagnostics();
        await stop();
        throw new Error(`Kannel did not start (${why} waiting for ${what})\n${diag}`);
      }
      await sleep(100);
    }
  };

  try {
    boxes.push(spawnBox("bearerbox", bins.bearerbox, ["-v", String(opts.logLevel ?? 1), confPath], dir));
    // The fake SMSC's listening socket exists once bearerbox reports the connection.
    await waitFor("bearerbox admin status", async () => (await status()).includes(`FAKE:${fakesmscPort}`));
    fakesmsc = spawnBox(
      "fakesmsc",
      bins.fakesmsc,
      ["-H", "127.0.0.1", "-r", String(fakesmscPort), "-i", "0", ...(opts.logLevel ? ["-v", String(opts.logLevel)] : [])],
      dir,
      "pipe",
    );
    boxes.push(fakesmsc);
    fakesmsc.proc.stdin?.on("error", () => undefined); // EPIPE after it is stopped
    // Kannel logs to stderr; read stdout too in case a build logs there.
    for (const stream of [fakesmsc.proc.stderr, fakesmsc.proc.stdout]) {
      let pending = "";
      stream?.on("data", (s: string) => {
        pending += s;
        const lines = pending.split("\n");
        pending = lines.pop() ?? "";
        for (const l of lines) {
          const m = /Got message \d+: <(.*)>\s*$/.exec(l);
          if (m) received.push(m[1]!);
        }
      });
    }
    boxes.push(spawnBox("smsbox", bins.smsbox, ["-v", String(opts.logLevel ?? 1), confPath], dir));
    await waitFor("the fake SMSC online and smsbox connected", async () => {
      const s = await status();
      return /FAKE:\d+ \(online/.test(s) && /smsbox:.*on-line/.test(s);
    });
    // smsbox opens the sendsms port after connecting; any HTTP answer (403 without credentials) means it is up.
    await waitFor("sendsms", async () => (await httpText(sendsmsUrl)) !== undefined);
  } catch (e) {
    await stop();
    throw e;
  }

  return {
    sendsmsUrl,
    adminUrl,
    dir,
    fakesmsc: {
      received: () => [...received],
      messages: () => received.map(parseFakesmscLine),
      sendMo(from, to, text) {
        const line = fakesmscMoLine(from, to, text);
        // One line at a time with a pause: see the fgets()/select() note at the top.
        moChain = moChain.then(async () => {
          fakesmsc?.proc.stdin?.write(`${line}\n`);
          await sleep(300);
        });
        return moChain;
      },
    },
    diagnostics,
    stop,
  };
}

async function distinctFreePorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

/** A listening Switchboard on the Kannel carrier with its delivery engine running on the real clock. */
export interface KannelStack {
  kannel: RunningKannel;
  db: TestOrm;
  app: FastifyInstance;
  engine: DeliveryEngine;
  /** Where Kannel calls the service back. */
  base: string;
  stop(): Promise<void>;
}

/**
 * Starts Kannel, a fresh database, the Kannel carrier, a delivery engine (loops on) and the app
 * listening on a free port. The real clock, not the harness's ManualClock: Kannel's callbacks and
 * webhook signature checks happen in real time.
 */
export async function startKannelStack(opts: { secret: string; mailTransport?: Transporter }): Promise<KannelStack> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  // The secret a deployment could start with (KANNEL_CALLBACK_SECRET's rules), so that the tests run a real configuration.
  checkSecret("the Kannel test secret", opts.secret, "the Kannel callbacks' shared secret");
  const [db, kannel] = await Promise.all([createTestOrm(), startKannel({ callbackBaseUrl: base, secret: opts.secret })]);
  const carrier = createKannelCarrier({
    sendsmsUrl: kannel.sendsmsUrl,
    ...KANNEL_USER,
    callbackBaseUrl: base,
    callbackSecret: opts.secret,
    clock: systemClock,
  });
  const engine = createDeliveryEngine({ orm: db.orm, clock: systemClock, carrier, webhookAllowPrivate: true, pollMs: 50, mailTransport: opts.mailTransport });
  const app = await buildApp({
    orm: db.orm,
    clock: systemClock,
    carrier,
    onQueued: () => engine.nudge(),
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: true, noAlphaCountries: new Set(["US", "CA"]), bodyLimit: 1024 * 1024 },
  });
  await engine.start();
  await app.listen({ port, host: "127.0.0.1" });
  return {
    kannel,
    db,
    app,
    engine,
    base,
    async stop() {
      await engine.stop().catch(() => undefined);
      await app.close().catch(() => undefined);
      await kannel.stop();
      await db.close();
    },
  };
}
