/**
 * An open-loop load generator (issue 46): requests start on a fixed schedule whatever the answers
 * do (the i-th is due at t0 + i / rate), and each one's latency is its answer's time minus its
 * scheduled time, so a stall counts in full, for every request that should have started during it
 * (wrk and h2load, closed loops, wait for an answer before the next request and so hide a stall).
 * Nothing ever waits for an answer before starting the next request: HTTP/1.1 goes through an
 * Agent with many sockets, gRPC through several h2 sessions with many streams each.
 *
 * The generator runs in the bench's own process, on the same two cores as the servers: how late it
 * started its requests (the start lag: Node's timers fire on whole milliseconds) and its own
 * event-loop delay are reported beside the latencies, so a saturated generator is visible.
 */
import { Agent, request as httpRequest } from "node:http";
import { connect, type ClientHttp2Session, constants as h2 } from "node:http2";
import { monitorEventLoopDelay } from "node:perf_hooks";
import hdr from "hdr-histogram-js";
import { parseServerTiming } from "../src/common/server-timing.js";

/** One kind of request the generator sends; `build` makes the i-th (a random recipient each, say). */
export type OpenLoopRequest =
  | { kind: "http"; url: string; method: "GET" | "POST"; headers?: Record<string, string>; build: () => { path?: string; body?: string } }
  | { kind: "grpc"; url: string; headers?: Record<string, string>; build: () => Uint8Array };

/** Percentiles of one histogram, ms. */
export interface Percentiles {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

/** One open-loop run's outcome. */
export interface OpenLoopResult {
  rate: number;
  seconds: number;
  /** Requests scheduled in the measured part. */
  scheduled: number;
  /** Of those, answered with success (HTTP 2xx; gRPC status 0). */
  ok: number;
  /** Answered with anything else, failed on the socket, or not answered within the timeout. */
  errors: number;
  /** Latency from the scheduled start to the whole answer read, of every answered request (errors included). */
  latency: Percentiles;
  /** How late the generator started its requests (its timers' granularity, and its own stalls). */
  startLag: Percentiles;
  /** Requests started more than `lateMs` after their due time. */
  late: number;
  lateMs: number;
  /**
   * The generator's own event-loop delay over the measured part, ms: perf_hooks' histogram of a 1 ms
   * timer's intervals, less that 1 ms (what the loop was late by).
   */
  generatorDelay: { p50: number; p99: number; max: number };
  /** Each `Server-Timing` step's durations (when the answers carry the header and it was asked for), ms. */
  steps?: Map<string, Percentiles>;
}

/** How one run goes. */
export interface OpenLoopSettings {
  rate: number;
  /** Seconds at the rate before the measured part (same schedule, not recorded). */
  warmup: number;
  seconds: number;
  /** A request not answered within this long is an error (ms; default 10,000). */
  timeoutMs?: number;
  /** Started more than this after its due time counts as late (ms; default 2). */
  lateMs?: number;
  /** Most sockets (HTTP/1.1) or h2 sessions' streams in flight; default 512 sockets, 8 sessions. */
  sockets?: number;
  sessions?: number;
  /** Read each answer's `Server-Timing` header into per-step histograms. */
  collectSteps?: boolean;
  /** Called once when the measured part starts (e.g. to reset a server's event-loop histogram). */
  onMeasureStart?: () => void;
}

/** Latencies are recorded in microseconds, from 1 µs to 60 s, to three significant digits. */
const newHistogram = () => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
type Histogram = ReturnType<typeof newHistogram>;

function percentiles(h: Histogram): Percentiles {
  const ms = (p: number) => (h.totalCount === 0 ? NaN : h.getValueAtPercentile(p) / 1000);
  return { count: h.totalCount, p50: ms(50), p90: ms(90), p99: ms(99), p999: ms(99.9), max: h.totalCount === 0 ? NaN : h.maxValue / 1000 };
}

const us = (ms: number) => Math.max(1, Math.round(ms * 1000));

/** The generator's loop-delay timer, ms: a reading of monitorEventLoopDelay is that interval plus the delay. */
const LOOP_TIMER_MS = 1;
const beyond = (ns: number) => Math.max(0, ns / 1e6 - LOOP_TIMER_MS);

/** What one sent request reports back: success, and the Server-Timing header if any. */
type Answer = (ok: boolean, serverTiming?: string) => void;
type Send = (answer: Answer) => void;

function httpSender(req: Extract<OpenLoopRequest, { kind: "http" }>, s: OpenLoopSettings): { send: Send; close: () => void } {
  const url = new URL(req.url);
  const agent = new Agent({ keepAlive: true, maxSockets: s.sockets ?? 512 });
  const timeoutMs = s.timeoutMs ?? 10_000;
  const send: Send = (answer) => {
    const { path, body } = req.build();
    let settled = false;
    const finish = (ok: boolean, timing?: string) => {
      if (settled) return;
      settled = true;
      answer(ok, timing);
    };
    const r = httpRequest(
      {
        agent,
        host: url.hostname,
        port: url.port,
        method: req.method,
        path: path ?? url.pathname + url.search,
        headers: { ...req.headers, ...(body === undefined ? {} : { "content-length": Buffer.byteLength(body) }) },
      },
      (res) => {
        const ok = res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300;
        const timing = res.headers["server-timing"];
        res.resume();
        res.once("end", () => finish(ok, typeof timing === "string" ? timing : undefined));
        res.once("error", () => finish(false));
      },
    );
    r.setTimeout(timeoutMs, () => r.destroy(new Error("timeout")));
    r.once("error", () => finish(false));
    r.end(body);
  };
  return { send, close: () => agent.destroy() };
}

function grpcSender(req: Extract<OpenLoopRequest, { kind: "grpc" }>, s: OpenLoopSettings): { send: Send; close: () => void } {
  const url = new URL(req.url);
  const sessions: ClientHttp2Session[] = [];
  let next = 0;
  const session = () => {
    // Sessions are made as they are first needed and again after one closes.
    const k = next++ % (s.sessions ?? 8);
    let sess = sessions[k];
    if (!sess || sess.closed || sess.destroyed) {
      sess = connect(url.origin);
      sess.on("error", () => undefined); // its streams fail with it
      sessions[k] = sess;
    }
    return sess;
  };
  const timeoutMs = s.timeoutMs ?? 10_000;
  const send: Send = (answer) => {
    const message = req.build();
    const framed = Buffer.allocUnsafe(5 + message.length);
    framed[0] = 0;
    framed.writeUInt32BE(message.length, 1);
    framed.set(message, 5);
    let status: number | undefined;
    let grpcStatus: string | undefined;
    let settled = false;
    const finish = (ok: boolean) => {
      if (settled) return;
      settled = true;
      answer(ok);
    };
    let stream;
    try {
      stream = session().request({
        [h2.HTTP2_HEADER_METHOD]: "POST",
        [h2.HTTP2_HEADER_PATH]: url.pathname,
        "content-type": "application/grpc",
        te: "trailers",
        ...req.headers,
      });
    } catch {
      return finish(false);
    }
    stream.setTimeout(timeoutMs, () => stream.close(h2.NGHTTP2_CANCEL));
    stream.on("response", (headers) => {
      status = Number(headers[h2.HTTP2_HEADER_STATUS]);
      // A trailers-only answer (an error) carries its status in the headers.
      if (headers["grpc-status"] !== undefined) grpcStatus = String(headers["grpc-status"]);
    });
    stream.on("trailers", (trailers) => {
      if (trailers["grpc-status"] !== undefined) grpcStatus = String(trailers["grpc-status"]);
    });
    stream.on("data", () => undefined);
    stream.on("error", () => finish(false));
    stream.on("close", () => finish(status === 200 && grpcStatus === "0"));
    stream.end(framed);
  };
  return { send, close: () => sessions.forEach((x) => x?.close()) };
}

/**
 * One run at `s.rate`: the warm-up, then the measured part, on one unbroken schedule; resolves
 * once every measured request was answered or timed out.
 */
export async function openLoop(req: OpenLoopRequest, s: OpenLoopSettings): Promise<OpenLoopResult> {
  const { send, close } = req.kind === "http" ? httpSender(req, s) : grpcSender(req, s);
  const lateMs = s.lateMs ?? 2;
  const interval = 1000 / s.rate;
  const warmCount = Math.round(s.warmup * s.rate);
  const total = warmCount + Math.round(s.seconds * s.rate);
  const latency = newHistogram();
  const startLag = newHistogram();
  const steps = new Map<string, Histogram>();
  const delay = monitorEventLoopDelay({ resolution: LOOP_TIMER_MS });
  let ok = 0;
  let errors = 0;
  let late = 0;
  let outstanding = 0;
  let i = 0;
  let allStarted!: () => void;
  const started = new Promise<void>((r) => (allStarted = r));
  let drained: (() => void) | undefined;

  const recordSteps = (header: string) => {
    for (const [name, ms] of parseServerTiming(header)) {
      let h = steps.get(name);
      if (!h) steps.set(name, (h = newHistogram()));
      h.recordValue(us(ms));
    }
  };

  const fire = (index: number, due: number, now: number) => {
    const measured = index >= warmCount;
    if (measured) {
      const lag = now - due;
      startLag.recordValue(us(lag));
      if (lag > lateMs) late++;
      outstanding++;
    }
    send((success, timing) => {
      if (!measured) return;
      latency.recordValue(us(performance.now() - due));
      if (success) ok++;
      else errors++;
      if (timing !== undefined && s.collectSteps) recordSteps(timing);
      if (--outstanding === 0) drained?.();
    });
  };

  const t0 = performance.now() + 5;
  const tick = () => {
    const now = performance.now();
    // Every request due by now starts now, late ones included: the schedule never slips.
    while (i < total && t0 + i * interval <= now) {
      if (i === warmCount) {
        delay.enable();
        s.onMeasureStart?.();
      }
      fire(i, t0 + i * interval, now);
      i++;
    }
    if (i < total) setTimeout(tick, Math.max(0, t0 + i * interval - performance.now()));
    else allStarted();
  };
  setTimeout(tick, 5);
  await started;
  delay.disable();
  if (outstanding > 0) await new Promise<void>((r) => (drained = r));
  close();
  const stepPercentiles = s.collectSteps ? new Map([...steps].map(([name, h]) => [name, percentiles(h)])) : undefined;
  return {
    rate: s.rate,
    seconds: s.seconds,
    scheduled: total - warmCount,
    ok,
    errors,
    latency: percentiles(latency),
    startLag: percentiles(startLag),
    late,
    lateMs,
    generatorDelay: { p50: beyond(delay.percentile(50)), p99: beyond(delay.percentile(99)), max: beyond(delay.max) },
    steps: stepPercentiles,
  };
}
