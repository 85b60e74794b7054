/**
 * The load generators the benchmark drives: wrk (HTTP/1.1, REST, Kannel and the bare route) and
 * h2load (gRPC over h2c). Both are C programs, so they take less of the two cores than a Node
 * load generator would.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** One measured run. */
export interface LoadResult {
  /** Completed requests per second (errors included, as wrk and h2load count them). */
  rps: number;
  /** Completed requests. */
  requests: number;
  p50Ms: number;
  p99Ms: number;
  /** Socket errors, timeouts and answers that were not a success (HTTP ≥ 400; for gRPC see the caller). */
  errors: number;
  seconds: number;
}

/** One HTTP request, sent again and again; `{{N}}` in the URL or body becomes a random 5-digit number each time. */
export interface HttpRequestSpec {
  url: string;
  method: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
}

/** What stands for the per-request random number in a request spec. */
export const VARY = "{{N}}";

/** Load settings shared by every run. */
export interface LoadSettings {
  connections: number;
  threads: number;
  seconds: number;
  /**
   * wrk only: each connection waits this long before each request, ms (a fraction is dithered
   * between the two whole milliseconds around it), to hold a rate below the maximum (the soak).
   */
  delayMs?: number;
}

function run(cmd: string, args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    proc.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    proc.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
    proc.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A Lua string literal that holds any bytes (decimal escapes). */
function luaString(s: string): string {
  return `"${[...Buffer.from(s, "utf8")].map((b) => `\\${b}`).join("")}"`;
}

/**
 * wrk with a script that sends `req` and, at the end, prints one JSON line with the count,
 * latency percentiles and error counts (wrk counts HTTP status ≥ 400 under errors.status).
 */
export async function wrk(req: HttpRequestSpec, load: LoadSettings): Promise<LoadResult> {
  const dir = await mkdtemp(join(tmpdir(), "sb-bench-wrk-"));
  try {
    const url = new URL(req.url);
    const headers = Object.entries({ host: url.host, ...(req.headers ?? {}) })
      .map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`)
      .join(", ");
    const path = url.pathname + url.search.replaceAll(encodeURIComponent(VARY), VARY);
    const varies = path.includes(VARY) || (req.body ?? "").includes(VARY);
    // A fixed request is formatted once; a varying one each time (cheap in LuaJIT).
    const script = `
local method, path, headers, body = ${luaString(req.method)}, ${luaString(path)}, { ${headers} }, ${req.body === undefined ? "nil" : luaString(req.body)}
local fixed = ${varies ? "nil" : "wrk.format(method, path, headers, body)"}
function request()
  if fixed then return fixed end
  local n = tostring(math.random(10000, 99999))
  return wrk.format(method, (string.gsub(path, "{{N}}", n)), headers, body and (string.gsub(body, "{{N}}", n)))
end
${
  load.delayMs
    ? `local dlo, dfrac = ${Math.floor(load.delayMs)}, ${(load.delayMs - Math.floor(load.delayMs)).toFixed(3)}
function delay()
  if math.random() < dfrac then return dlo + 1 end
  return dlo
end`
    : ""
}
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), e.connect, e.read, e.write, e.status, e.timeout))
end
`;
    const scriptPath = join(dir, "bench.lua");
    await writeFile(scriptPath, script);
    const args = ["-t", String(load.threads), "-c", String(load.connections), "-d", `${load.seconds}s`, "--timeout", "5s", "-s", scriptPath, req.url];
    const out = await run("wrk", args, (load.seconds + 30) * 1000);
    const line = out.stdout.split("\n").find((l) => l.startsWith("WRKJSON "));
    if (!line) throw new Error(`wrk printed no result (exit ${out.code}):\n${out.stdout}\n${out.stderr}`);
    const r = JSON.parse(line.slice("WRKJSON ".length)) as Record<string, number>;
    const seconds = r.duration_us / 1e6;
    return {
      rps: r.requests / seconds,
      requests: r.requests,
      p50Ms: r.p50_us / 1000,
      p99Ms: r.p99_us / 1000,
      errors: r.connect + r.read + r.write + r.status + r.timeout,
      seconds,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A gRPC request for h2load: the URL of the method, the framed protobuf body and extra headers. */
export interface GrpcRequestSpec {
  url: string;
  body: Uint8Array;
  headers: Record<string, string>;
}

/** Frames a protobuf message as one gRPC length-prefixed message (uncompressed). */
export function grpcFrame(message: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + message.length);
  new DataView(out.buffer).setUint32(1, message.length);
  out.set(message, 5);
  return out;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/**
 * h2load over h2c: `connections` connections with one stream each, so that concurrency matches
 * the HTTP/1.1 runs. h2load reports only HTTP status; gRPC puts its status in trailers, so the
 * caller checks the outcome another way (the benchmark counts the stored messages).
 * Percentiles come from h2load's per-request log.
 */
export async function h2load(req: GrpcRequestSpec, load: LoadSettings): Promise<LoadResult> {
  const dir = await mkdtemp(join(tmpdir(), "sb-bench-h2load-"));
  try {
    const bodyPath = join(dir, "body.bin");
    const logPath = join(dir, "requests.tsv");
    await writeFile(bodyPath, req.body);
    const headerArgs = Object.entries({ "content-type": "application/grpc", te: "trailers", ...req.headers }).flatMap(([k, v]) => ["-H", `${k}: ${v}`]);
    const args = [
      "-t",
      String(load.threads),
      "-c",
      String(load.connections),
      "-m",
      "1",
      "-D",
      String(load.seconds),
      "-d",
      bodyPath,
      ...headerArgs,
      "--log-file",
      logPath,
      req.url,
    ];
    const out = await run("h2load", args, (load.seconds + 30) * 1000);
    const m = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out.stdout);
    const fin = /finished in ([\d.]+)(m?s)/.exec(out.stdout);
    if (!m || !fin) throw new Error(`h2load printed no result (exit ${out.code}):\n${out.stdout}\n${out.stderr}`);
    const [, , , done, succeeded, failed] = m.map(Number);
    const seconds = Number(fin[1]) / (fin[2] === "ms" ? 1000 : 1);
    const lat = (await readFile(logPath, "utf8").catch(() => ""))
      .split("\n")
      .filter(Boolean)
      .map((l) => Number(l.split("\t")[2]))
      .filter((n) => Number.isFinite(n))
      .sort((a, b) => a - b);
    return {
      rps: done / seconds,
      requests: done,
      p50Ms: percentile(lat, 50) / 1000,
      p99Ms: percentile(lat, 99) / 1000,
      // failed counts errored and timed-out requests; done - succeeded counts HTTP statuses ≥ 400.
      errors: Math.max(done - succeeded, failed),
      seconds,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
