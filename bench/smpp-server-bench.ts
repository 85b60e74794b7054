/**
 * The SMPP server's submit_sm run (issue 44, BENCH_ONLY=rest,smpp-server): the bench account gets
 * SMPP credentials through the operator API (PUT /admin/v1/Accounts/{AccountSid}/Smpp), and a
 * client in the bench process binds as a transmitter to the service's SMPP_SERVER_PORT and keeps
 * BENCH_SMPP_WINDOW submit_sm outstanding (over BENCH_SMPP_BINDS binds) for the REST run's
 * warm-up and measured seconds, in the same rounds as `rest`: the REST run's SMS (its From as
 * source_addr TON 1, its text, a random +4477009NNNNN recipient per submit_sm), so that its
 * throughput is read against REST's of the same run (target: at least 1.0 ×). Every
 * submit_sm_resp with command_status 0 must be a stored message: the stored rows are counted after
 * the run and must equal them.
 *
 * The client (BENCH_SMPP_CLIENT): `raw`, a minimal encoder written here (one template PDU copied
 * per submit_sm, its sequence_number and five recipient digits written in, the PDUs of one turn
 * written together), or `package`, the `smpp` npm package's session (what src/carriers/smpp/ uses).
 * The client shares the two cores with the service (wrk, REST's generator, is a C program): its
 * own CPU per submit_sm is printed with each run.
 */
import { connect, type Socket } from "node:net";
import smpp from "smpp";
import type { LoadResult, LoadSettings } from "./load.js";
import { adminCall, type BenchTarget, countStored, drainQueue, type Measured, measureLoad, SMS } from "./service-runs.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The run's settings, from the environment. */
export interface SmppServerBenchSettings {
  /** submit_sm outstanding at once over all binds (REST's 50 connections have 50 requests outstanding). */
  window: number;
  /** Binds (connections) the window is spread over, evenly; at most the account's MaxBinds. */
  binds: number;
  /** The client: the hand-written encoder, or the `smpp` package's session. */
  client: "raw" | "package";
}

export function smppServerSettings(env: NodeJS.ProcessEnv): SmppServerBenchSettings {
  const num = (name: string, def: number) => (env[name] === undefined || env[name] === "" ? def : Number(env[name]));
  const window = num("BENCH_SMPP_WINDOW", 50);
  const binds = num("BENCH_SMPP_BINDS", 1);
  const client = env.BENCH_SMPP_CLIENT ?? "raw";
  if (!Number.isInteger(window) || window < 1) throw new Error(`BENCH_SMPP_WINDOW must be a whole number ≥ 1; got ${window}`);
  // The server takes at most 100 requests in flight per bind (docs/smpp-server.md), MaxBinds at most 100.
  if (!Number.isInteger(binds) || binds < 1 || binds > 100) throw new Error(`BENCH_SMPP_BINDS must be 1 to 100; got ${binds}`);
  if (window > binds * 100) throw new Error(`BENCH_SMPP_WINDOW ${window} is over 100 per bind (the server's window) with ${binds} bind(s)`);
  if (client !== "raw" && client !== "package") throw new Error(`BENCH_SMPP_CLIENT must be raw or package; got ${client}`);
  return { window, binds, client };
}

/** The bench account's SMPP credentials (system_id at most 15 characters, password at most 8). */
const SYSTEM_ID = "sb-bench";
const PASSWORD = "bench-pw";

/** What the run needs: where to bind, with what, and the account's target (the `rest` run's). */
export interface SmppServerSetup {
  target: BenchTarget;
  port: number;
  settings: SmppServerBenchSettings;
}

// ---------------------------------------------------------------------------------------------
// The clients

/** One bind: submit_sm to a recipient (digits, no +), answered through `done` with the command_status. */
export interface Bind {
  submit(toDigits: string, done: (status: number, messageId: () => string) => void): void;
  close(): Promise<void>;
}

const CMD = {
  generic_nack: 0x80000000,
  bind_transmitter: 0x00000002,
  bind_transmitter_resp: 0x80000002,
  submit_sm: 0x00000004,
  submit_sm_resp: 0x80000004,
  unbind: 0x00000006,
  unbind_resp: 0x80000006,
  enquire_link: 0x00000015,
  enquire_link_resp: 0x80000015,
} as const;

/** TON and NPI of an international number (E.164 without its +). */
const TON_INTERNATIONAL = 1;
const NPI_ISDN = 1;

const cstr = (s: string) => Buffer.from(`${s}\0`, "latin1");

function pduBytes(commandId: number, sequence: number, body: Buffer = Buffer.alloc(0), commandStatus = 0): Buffer {
  const b = Buffer.allocUnsafe(16 + body.length);
  b.writeUInt32BE(16 + body.length, 0);
  b.writeUInt32BE(commandId, 4);
  b.writeUInt32BE(commandStatus, 8);
  b.writeUInt32BE(sequence, 12);
  body.copy(b, 16);
  return b;
}

/** The recipient's fixed part: SMS.to is +4477009 and five random digits per request. */
const TO_PREFIX = SMS.to.slice(1, SMS.to.indexOf("{"));
const FROM_DIGITS = SMS.from.slice(1);
/** The text as data_coding 0 (GSM 7 unpacked): letters, digits and spaces are the same octets as ASCII. */
const TEXT = (() => {
  if (!/^[A-Za-z0-9 ]+$/.test(SMS.text)) throw new Error("the bench text is not plain GSM 7 letters and digits");
  return Buffer.from(SMS.text, "latin1");
})();

/** A recipient's five random digits, as wrk's script picks them (math.random(10000, 99999)). */
export const randomDigits = () => String(10000 + Math.floor(Math.random() * 90000));

/**
 * The submit_sm every raw send copies: service_type "", source TON 1 NPI 1 and the bench's From,
 * destination TON 1 NPI 1 and +4477009 with five digits written in per send (at `toOffset`),
 * esm_class, protocol_id, priority 0, no schedule or validity, registered_delivery 0, data_coding 0.
 */
export function submitTemplate(): { template: Buffer; toOffset: number } {
  const head = Buffer.concat([cstr(""), Buffer.from([TON_INTERNATIONAL, NPI_ISDN]), cstr(FROM_DIGITS), Buffer.from([TON_INTERNATIONAL, NPI_ISDN])]);
  const body = Buffer.concat([
    head,
    cstr(`${TO_PREFIX}00000`),
    Buffer.from([0, 0, 0]), // esm_class, protocol_id, priority_flag
    cstr(""), // schedule_delivery_time
    cstr(""), // validity_period
    Buffer.from([0, 0, 0, 0, TEXT.length]), // registered_delivery, replace_if_present_flag, data_coding, sm_default_msg_id, sm_length
    TEXT,
  ]);
  return { template: pduBytes(CMD.submit_sm, 0, body), toOffset: 16 + head.length + TO_PREFIX.length };
}

/** The hand-written client: bind_transmitter, then submit_sm copied from one template, written once per turn. */
async function rawBind(port: number, systemId: string, password: string): Promise<Bind> {
  const socket: Socket = connect({ host: "127.0.0.1", port });
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  const { template, toOffset } = submitTemplate();
  const waiting = new Map<number, (status: number, body: Buffer) => void>();
  let sequence = 0;
  let closed = false;
  let pending: Buffer[] = [];
  let flushQueued = false;
  let buf: Buffer = Buffer.alloc(0);
  const next = () => (sequence = sequence >= 0x7fffffff ? 1 : sequence + 1);
  const flush = () => {
    flushQueued = false;
    if (pending.length === 0 || closed) return;
    socket.write(pending.length === 1 ? pending[0]! : Buffer.concat(pending));
    pending = [];
  };
  const send = (bytes: Buffer) => {
    pending.push(bytes);
    if (!flushQueued) {
      flushQueued = true;
      process.nextTick(flush);
    }
  };
  const request = (commandId: number, body?: Buffer) =>
    new Promise<{ status: number; body: Buffer }>((resolve) => {
      const seq = next();
      waiting.set(seq, (status, b) => resolve({ status, body: b }));
      send(pduBytes(commandId, seq, body));
    });
  socket.on("data", (chunk: Buffer) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    let off = 0;
    while (buf.length - off >= 16) {
      const length = buf.readUInt32BE(off);
      if (length < 16) throw new Error(`the SMPP server sent a PDU of length ${length}`);
      if (buf.length - off < length) break;
      const commandId = buf.readUInt32BE(off + 4);
      const status = buf.readUInt32BE(off + 8);
      const seq = buf.readUInt32BE(off + 12);
      if (commandId === CMD.enquire_link) send(pduBytes(CMD.enquire_link_resp, seq));
      else if (commandId === CMD.unbind) {
        send(pduBytes(CMD.unbind_resp, seq));
        closed = true;
      } else if ((commandId & 0x80000000) !== 0) {
        const done = waiting.get(seq);
        waiting.delete(seq);
        done?.(status, buf.subarray(off + 16, off + length));
      }
      off += length;
    }
    buf = off === buf.length ? Buffer.alloc(0) : buf.subarray(off);
  });
  const lost = () => {
    closed = true;
    for (const done of waiting.values()) done(-1, Buffer.alloc(0));
    waiting.clear();
  };
  socket.on("close", lost);
  socket.on("error", () => undefined);
  const bound = await request(CMD.bind_transmitter, Buffer.concat([cstr(systemId), cstr(password), cstr(""), Buffer.from([0x34, 0, 0]), cstr("")]));
  if (bound.status !== 0) {
    socket.destroy();
    throw new Error(`bind_transmitter refused: ${statusName(bound.status)}`);
  }
  return {
    submit(toDigits, done) {
      if (closed) return done(-1, () => "");
      const seq = next();
      const b = Buffer.allocUnsafe(template.length);
      template.copy(b);
      b.writeUInt32BE(seq, 12);
      b.write(toDigits, toOffset, "latin1");
      waiting.set(seq, (status, body) => done(status, () => body.toString("latin1", 0, Math.max(0, body.indexOf(0)))));
      send(b);
    },
    async close() {
      if (!closed) await Promise.race([request(CMD.unbind), sleep(2000)]);
      closed = true;
      socket.end();
      setTimeout(() => socket.destroy(), 1000).unref();
    },
  };
}

/** The `smpp` package's session as the client (connect, bind_transmitter, submit_sm with a callback each). */
async function packageBind(port: number, systemId: string, password: string): Promise<Bind> {
  const session = smpp.connect({ host: "127.0.0.1", port });
  let closed = false;
  session.on("error", () => undefined);
  session.on("close", () => (closed = true));
  await new Promise<void>((resolve, reject) => {
    session.once("connect", resolve);
    session.once("error", reject);
  });
  const bound = await new Promise<number>((resolve) => {
    session.send(new smpp.PDU("bind_transmitter", { system_id: systemId, password, interface_version: 0x34 }), (pdu) => resolve(pdu.command_status));
  });
  if (bound !== 0) {
    session.destroy();
    throw new Error(`bind_transmitter refused: ${statusName(bound)}`);
  }
  return {
    submit(toDigits, done) {
      if (closed) return done(-1, () => "");
      session.submit_sm(
        {
          source_addr_ton: TON_INTERNATIONAL,
          source_addr_npi: NPI_ISDN,
          source_addr: FROM_DIGITS,
          dest_addr_ton: TON_INTERNATIONAL,
          dest_addr_npi: NPI_ISDN,
          destination_addr: `${TO_PREFIX}${toDigits}`,
          registered_delivery: 0,
          data_coding: 0,
          short_message: TEXT,
        },
        (pdu) => done(pdu.command_status, () => String(pdu.message_id ?? "")),
      );
    },
    async close() {
      if (!closed) await Promise.race([new Promise<void>((resolve) => session.unbind({}, () => resolve())), sleep(2000)]);
      closed = true;
      session.close();
    },
  };
}

const STATUS_NAMES = new Map(Object.entries(smpp.errors).map(([name, code]) => [code, name] as const));
/** A command_status by its name (ESME_RTHROTTLED …); -1 is "no answer" (the connection ended or the wait ran out). */
export function statusName(status: number): string {
  if (status === -1) return "no answer";
  return STATUS_NAMES.get(status) ?? `0x${status.toString(16).padStart(8, "0")}`;
}

/** A transmitter bind to the SMPP server on 127.0.0.1:`port` with the given client. */
export function openClientBind(client: SmppServerBenchSettings["client"], port: number, systemId: string, password: string): Promise<Bind> {
  return (client === "raw" ? rawBind : packageBind)(port, systemId, password);
}

function openBind(s: SmppServerSetup): Promise<Bind> {
  return openClientBind(s.settings.client, s.port, SYSTEM_ID, PASSWORD);
}

// ---------------------------------------------------------------------------------------------
// The load

/** One drive of the binds: what came back. */
export interface Drive {
  result: LoadResult;
  /** submit_sm_resp with command_status 0. */
  ok: number;
  /** Every other answer, by status name ("no answer" for none). */
  refused: Map<string, number>;
  /** submit_sm_resp 0 by the second of the run they came in (the last, partial second left out). */
  perSecond: number[];
  /** The client's own CPU (this process, user + system) per submit_sm, µs. */
  clientCpuUs: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** How long the last submit_sm may take to be answered once the seconds are over. */
const ANSWER_WAIT_MS = 10_000;

/**
 * Keeps `window` submit_sm outstanding over the binds (spread evenly) for `seconds`, each to a new
 * random recipient; then sends no more and waits for the outstanding ones. Every submit_sm sent is
 * counted, answered or not (one not answered within ANSWER_WAIT_MS after the end is an error), and
 * the run lasts until its last answer: so the OK answers are exactly the messages the run stored.
 */
export async function drive(binds: Bind[], window: number, seconds: number): Promise<Drive> {
  const latencies: number[] = [];
  const perSecond: number[] = [];
  const refused = new Map<string, number>();
  let ok = 0;
  let sent = 0;
  let answered = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  let last = t0;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const share = binds.map((_, i) => Math.floor(window / binds.length) + (i < window % binds.length ? 1 : 0));
  const outstanding = binds.map(() => 0);
  /** Binds whose connection ended: sent no more (each submit_sm would fail at once, again and again). */
  const gone = binds.map(() => false);
  const fill = (i: number) => {
    const b = binds[i]!;
    while (outstanding[i]! < share[i]! && !gone[i]) {
      const now = performance.now();
      if (now >= end) break;
      outstanding[i]++;
      sent++;
      b.submit(randomDigits(), (status) => {
        const at = performance.now();
        outstanding[i]--;
        answered++;
        last = at;
        if (status === -1) gone[i] = true;
        latencies.push(at - now);
        if (status === 0) {
          ok++;
          const second = Math.floor((at - t0) / 1000);
          perSecond[second] = (perSecond[second] ?? 0) + 1;
        } else {
          const name = statusName(status);
          refused.set(name, (refused.get(name) ?? 0) + 1);
        }
        if (at < end) fill(i);
        else if (answered === sent) finish();
      });
    }
  };
  binds.forEach((_, i) => fill(i));
  const endTimer = setTimeout(() => answered === sent && finish(), end - t0 + 1);
  const waitTimer = setTimeout(finish, end - t0 + ANSWER_WAIT_MS);
  await finished;
  clearTimeout(endTimer);
  clearTimeout(waitTimer);
  const cpu = process.cpuUsage(cpu0);
  const unanswered = sent - answered;
  if (unanswered > 0) refused.set("no answer", (refused.get("no answer") ?? 0) + unanswered);
  const sorted = Float64Array.from(latencies).sort();
  const runSeconds = Math.max(0.001, (last - t0) / 1000);
  const errors = sent - ok;
  // Whole seconds only: the last one is cut short by the end of the run.
  const full = perSecond.slice(0, Math.floor(runSeconds));
  return {
    result: { rps: sent / runSeconds, requests: sent, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), errors, seconds: runSeconds },
    ok,
    refused,
    perSecond: Array.from(full, (n) => n ?? 0),
    clientCpuUs: ((cpu.user + cpu.system) / Math.max(1, sent)) | 0,
  };
}

async function openBinds(s: SmppServerSetup): Promise<Bind[]> {
  const binds: Bind[] = [];
  try {
    for (let i = 0; i < s.settings.binds; i++) binds.push(await openBind(s));
  } catch (err) {
    await Promise.all(binds.map((b) => b.close()));
    throw err;
  }
  return binds;
}

// ---------------------------------------------------------------------------------------------
// Set-up and the run

/**
 * Gives the bench account SMPP credentials for its property (MaxBinds: at least the binds the run
 * opens) through the operator API, then binds once and sends one submit_sm (to +447700912345),
 * which must be answered 0 with a MessageSid that is a stored message of the account.
 */
export async function prepareSmppServer(
  base: string,
  adminToken: string,
  target: BenchTarget,
  port: number,
  settings: SmppServerBenchSettings,
): Promise<SmppServerSetup> {
  const call = adminCall(base, adminToken);
  await call(
    `/admin/v1/Accounts/${target.accountSid}/Smpp`,
    { SystemId: SYSTEM_ID, Password: PASSWORD, PropertySid: target.propertySid, MaxBinds: Math.max(4, settings.binds) },
    "PUT",
  );
  const setup: SmppServerSetup = { target, port, settings };
  const bind = await openBind(setup);
  try {
    const { status, messageId } = await new Promise<{ status: number; messageId: string }>((resolve) =>
      bind.submit("12345", (st, id) => resolve({ status: st, messageId: id() })),
    );
    if (status !== 0) throw new Error(`SMPP submit_sm refused: ${statusName(status)}`);
    const row = await target.db.query("select recipient, sender from messages where sid = $1 and account_sid = $2", [messageId, target.accountSid]);
    if (row.rows[0]?.recipient !== `+${TO_PREFIX}12345` || row.rows[0]?.sender !== SMS.from) {
      throw new Error(`submit_sm answered ${messageId}, but no such message of the account to +${TO_PREFIX}12345 from ${SMS.from} is stored`);
    }
  } finally {
    await bind.close();
  }
  target.log(
    `SMPP: the bench account bound as ${SYSTEM_ID} on port ${port} (${settings.binds} transmitter bind(s), window ${settings.window}, ${settings.client} client)`,
  );
  return setup;
}

/**
 * The SMPP run of one round: binds, a warm-up of `warm.seconds`, the queue drained, then the
 * measured `load.seconds` charged with the service's and its database's CPU as the REST run is;
 * the stored rows counted after (they must equal the OK answers), the binds closed.
 */
export async function smppServerRun(s: SmppServerSetup, load: LoadSettings, warm: LoadSettings): Promise<Measured> {
  const t = s.target;
  await drainQueue(t);
  const binds = await openBinds(s);
  try {
    await drive(binds, s.settings.window, warm.seconds);
    await drainQueue(t);
    const before = await countStored(t);
    const measured: { drive?: Drive } = {};
    const m = await measureLoad(t, [t.servicePid], true, async () => (measured.drive = await drive(binds, s.settings.window, load.seconds)).result);
    await sleep(500);
    const stored = (await countStored(t)) - before;
    const run = measured.drive!;
    // Every OK answer a stored message, and no stored message without its OK answer.
    if (stored !== run.ok) m.result.errors += Math.abs(stored - run.ok);
    const refusals = [...run.refused].map(([name, n]) => `${n} ${name}`).join(", ");
    const seconds = run.perSecond.length ? `${Math.min(...run.perSecond)}–${Math.max(...run.perSecond)} OK per whole second` : "";
    t.log(
      `  smpp-server: ${run.ok} submit_sm_resp 0 in ${run.result.seconds.toFixed(2)} s${refusals ? `, refused: ${refusals}` : ""}; OK per second ${run.perSecond.join(" ")}; p50 ${run.result.p50Ms.toFixed(2)} ms, p99 ${run.result.p99Ms.toFixed(2)} ms; client CPU ${run.clientCpuUs} µs/submit_sm (${s.settings.client}); stored ${stored}`,
    );
    return {
      ...m,
      note: `${stored} stored for ${run.ok} submit_sm_resp 0${stored === run.ok ? "" : " (MISMATCH)"}${refusals ? `; refused: ${refusals}` : ""}; ${seconds}; ${s.settings.binds} bind(s), ${s.settings.client} client at ${run.clientCpuUs} µs CPU per submit_sm`,
    };
  } finally {
    await Promise.all(binds.map((b) => b.close()));
  }
}
