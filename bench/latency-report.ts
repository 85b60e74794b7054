/**
 * The latency mode's tables (bench/latency.ts): latency per target and rate, the ratios issue 46
 * sets targets on, and (BENCH_LATENCY_STEPS=1) where a REST send's time goes, step by step.
 */
import { SERVER_TIMING_STEPS } from "../src/common/server-timing.js";
import type { OpenLoopResult, Percentiles } from "./open-loop.js";
import { f0, f2 } from "./service-runs.js";

/** The targets, in the order each rate runs them. */
export const TARGETS = [
  { key: "kannel", name: "Kannel sendsms, spool store (peer)" },
  { key: "floor", name: "Floor: Fastify + group-commit INSERT (`/bare/Batched`)" },
  { key: "rest", name: "REST Send SMS, `npm start` (API + delivery)" },
  { key: "rest-api", name: "REST Send SMS, `DELIVERY=off` (API only)" },
  { key: "grpc", name: "gRPC SendMessage, `npm start`" },
  { key: "floor-h2", name: "h2 floor: node:http2 + gRPC framing, group commit" },
] as const;

export type TargetKey = (typeof TARGETS)[number]["key"];

export const TARGET_KEYS: readonly string[] = TARGETS.map((t) => t.key);

/** One measured run of one target at one rate. */
export interface LatencyRun {
  key: TargetKey;
  rate: number;
  round: number;
  result: OpenLoopResult;
  /** The service's event-loop delay over the measured part (REST and gRPC targets), ms. */
  serverDelay?: { p50: number; p99: number; max: number };
}

/** The median of some numbers (NaN for none). */
function med(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

type Key = keyof Percentiles;

/** Steps take tens of microseconds: three decimals. */
const f3 = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : "—");

/** Each column's median over the rounds of one target at one rate. */
interface Row {
  latency: Record<Key, number>;
  errors: number;
  scheduled: number;
  late: number;
  startLagP99: number;
  generatorP99: number;
  generatorMax: number;
  server?: { p50: number; p99: number; max: number };
  steps: Map<string, { p50: number; p99: number }>;
}

function rowOf(runs: LatencyRun[]): Row | undefined {
  if (runs.length === 0) return undefined;
  const pick = (f: (r: LatencyRun) => number) => med(runs.map(f));
  const keys: Key[] = ["count", "p50", "p90", "p99", "p999", "max"];
  const latency = Object.fromEntries(keys.map((k) => [k, pick((r) => r.result.latency[k])])) as Record<Key, number>;
  const withServer = runs.filter((r) => r.serverDelay);
  const steps = new Map<string, { p50: number; p99: number }>();
  for (const [name] of SERVER_TIMING_STEPS) {
    const seen = runs.filter((r) => r.result.steps?.has(name));
    if (seen.length) steps.set(name, { p50: med(seen.map((r) => r.result.steps!.get(name)!.p50)), p99: med(seen.map((r) => r.result.steps!.get(name)!.p99)) });
  }
  return {
    latency,
    // Errors and late starts: every round's, summed (one is worth seeing).
    errors: runs.reduce((n, r) => n + r.result.errors, 0),
    scheduled: runs.reduce((n, r) => n + r.result.scheduled, 0),
    late: runs.reduce((n, r) => n + r.result.late, 0),
    startLagP99: pick((r) => r.result.startLag.p99),
    generatorP99: pick((r) => r.result.generatorDelay.p99),
    generatorMax: pick((r) => r.result.generatorDelay.max),
    server: withServer.length
      ? {
          p50: med(withServer.map((r) => r.serverDelay!.p50)),
          p99: med(withServer.map((r) => r.serverDelay!.p99)),
          max: med(withServer.map((r) => r.serverDelay!.max)),
        }
      : undefined,
    steps,
  };
}

/** The report: `header` lines, the latency table, the ratios by rate, the targets at 1,000 req/s and the steps' table. */
export function renderLatency(runs: LatencyRun[], s: { rates: number[]; steps: boolean }, header: string[]): string {
  const row = (key: TargetKey, rate: number) => rowOf(runs.filter((r) => r.key === key && r.rate === rate));
  const lateMs = runs[0]?.result.lateMs ?? 2;
  const out = [
    ...header,
    "",
    `| Target | req/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | errors | late starts (> ${lateMs} ms) | start lag p99 ms | generator loop delay p99 / max ms | service loop delay p50 / p99 / max ms |`,
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
  ];
  for (const rate of s.rates) {
    for (const t of TARGETS) {
      const r = row(t.key, rate);
      if (!r) continue;
      const l = r.latency;
      const server = r.server ? `${f2(r.server.p50)} / ${f2(r.server.p99)} / ${f2(r.server.max)}` : "—";
      out.push(
        `| ${t.name} | ${f0(rate)} | ${f2(l.p50)} | ${f2(l.p90)} | ${f2(l.p99)} | ${f2(l.p999)} | ${f2(l.max)} | ${r.errors} of ${f0(r.scheduled)} | ${f0(r.late)} | ${f2(r.startLagP99)} | ${f2(r.generatorP99)} / ${f2(r.generatorMax)} | ${server} |`,
      );
    }
  }

  // The ratios, at every rate: each wire against its own floor, REST against the peer.
  const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined && b > 0 ? a / b : NaN);
  out.push(
    "",
    "| req/s | REST ÷ floor, p50 | REST ÷ floor, p99 | REST ÷ Kannel, p99 | API only ÷ floor, p50 / p99 | gRPC ÷ h2 floor, p50 / p99 |",
    "| ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const rate of s.rates) {
    const [rest, floor, kannel, restApi, grpc, h2] = (["rest", "floor", "kannel", "rest-api", "grpc", "floor-h2"] as const).map((k) => row(k, rate)?.latency);
    out.push(
      `| ${f0(rate)} | ${f2(ratio(rest?.p50, floor?.p50))} | ${f2(ratio(rest?.p99, floor?.p99))} | ${f2(ratio(rest?.p99, kannel?.p99))} | ${f2(ratio(restApi?.p50, floor?.p50))} / ${f2(ratio(restApi?.p99, floor?.p99))} | ${f2(ratio(grpc?.p50, h2?.p50))} / ${f2(ratio(grpc?.p99, h2?.p99))} |`,
    );
  }

  // Issue 46's targets, at 1,000 req/s with the delivery engine on.
  const at = 1000;
  const rest = row("rest", at)?.latency;
  const floor = row("floor", at)?.latency;
  const kannel = row("kannel", at)?.latency;
  out.push("", "| Target (at 1,000 req/s, same run) | Measured | Verdict |", "| --- | --- | --- |");
  const verdict = (x: number, limit: number) => (!Number.isFinite(x) ? "not measured" : x <= limit ? "met" : `missed: ${f2(x / limit)} × the limit`);
  if (!s.rates.includes(at)) out.push(`| — | 1,000 req/s not among BENCH_LATENCY_RATES | not measured |`);
  else {
    const p50 = ratio(rest?.p50, floor?.p50);
    const p99 = ratio(rest?.p99, floor?.p99);
    const p99k = ratio(rest?.p99, kannel?.p99);
    out.push(
      `| REST p50 ≤ 2 × the floor's | ${f2(rest?.p50 ?? NaN)} ms vs ${f2(floor?.p50 ?? NaN)} ms: ${f2(p50)} × | ${verdict(p50, 2)} |`,
      `| REST p99 ≤ 2 × the floor's | ${f2(rest?.p99 ?? NaN)} ms vs ${f2(floor?.p99 ?? NaN)} ms: ${f2(p99)} × | ${verdict(p99, 2)} |`,
      `| REST p99 ≤ 3 × Kannel's | ${f2(rest?.p99 ?? NaN)} ms vs ${f2(kannel?.p99 ?? NaN)} ms: ${f2(p99k)} × | ${verdict(p99k, 3)} |`,
    );
  }

  if (s.steps) {
    // Where a send's time goes: each Server-Timing step's p50 and p99 at each rate.
    for (const key of ["rest", "rest-api"] as const) {
      const rows = s.rates.map((rate) => row(key, rate));
      if (!rows.some((r) => r && r.steps.size)) continue;
      out.push(
        "",
        `Where a send's time goes: ${TARGETS.find((t) => t.key === key)!.name}, the \`Server-Timing\` header's steps (src/common/server-timing.ts), ms`,
        "",
        `| Step | ${s.rates.map((r) => `p50 / p99 at ${f0(r)}`).join(" | ")} |`,
        `| --- | ${s.rates.map(() => "---:").join(" | ")} |`,
      );
      for (const [name] of SERVER_TIMING_STEPS) {
        const cells = rows.map((r) => r?.steps.get(name));
        if (cells.every((c) => !c)) continue;
        out.push(`| ${name} | ${cells.map((c) => (c ? `${f3(c.p50)} / ${f3(c.p99)}` : "—")).join(" | ")} |`);
      }
      // Beside the handler's total, what the client saw: the difference is outside the handler
      // (the socket, Node's parser, Fastify's routing and body read, the answer's write, the generator).
      out.push(`| client's latency (open loop), for comparison | ${rows.map((r) => (r ? `${f3(r.latency.p50)} / ${f3(r.latency.p99)}` : "—")).join(" | ")} |`);
    }
  }
  return `${out.join("\n")}\n`;
}
