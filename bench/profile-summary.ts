/**
 * Summarizes a V8 .cpuprofile (from `BENCH_NODE_FLAGS="--cpu-prof --cpu-prof-dir=DIR" npm run bench`):
 * self time by function and by package/source area, and total (inclusive) time of chosen frames.
 * Usage: [SKIP_S=seconds] [UNTIL_S=seconds] [FOCUS=function] node --import tsx bench/profile-summary.ts FILE.cpuprofile [top=30]
 */
import { readFileSync } from "node:fs";

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) throw new Error("usage: profile-summary FILE.cpuprofile [top]");
const top = Number(topArg ?? 30);
const prof = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Time per sample: the delta to the next sample. SKIP_S=<seconds> leaves out the start (module loading).
const skipUs = Number(process.env.SKIP_S ?? 0) * 1e6;
const untilUs = Number(process.env.UNTIL_S ?? Infinity) * 1e6;
const selfUs = new Map<number, number>();
let at = 0;
for (let i = 0; i < prof.samples.length; i++) {
  at += prof.timeDeltas[i] ?? 0;
  const dt = prof.timeDeltas[i + 1] ?? 0;
  if (at < skipUs || at > untilUs) continue;
  selfUs.set(prof.samples[i], (selfUs.get(prof.samples[i]) ?? 0) + dt);
}
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);

function area(url: string, fn: string): string {
  if (!url) return fn.startsWith("(") ? fn : "(native/builtin)";
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1];
  const src = /\/(src|gen|bench)\/(.*)$/.exec(url);
  if (src) return `${src[1]}/${src[2]}`;
  if (url.startsWith("node:")) return url;
  return url;
}
const label = (n: Node) => `${n.callFrame.functionName || "(anonymous)"} ${area(n.callFrame.url, n.callFrame.functionName)}:${n.callFrame.lineNumber + 1}`;

const fnSelf = new Map<string, number>();
const areaSelf = new Map<string, number>();
for (const [id, us] of selfUs) {
  const n = byId.get(id)!;
  fnSelf.set(label(n), (fnSelf.get(label(n)) ?? 0) + us);
  const a = area(n.callFrame.url, n.callFrame.functionName);
  areaSelf.set(a, (areaSelf.get(a) ?? 0) + us);
}

// Inclusive time per area: a sample counts once for every area on its stack.
const areaIncl = new Map<string, number>();
for (const [id, us] of selfUs) {
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const n = byId.get(cur)!;
    const a = area(n.callFrame.url, n.callFrame.functionName);
    if (!seen.has(a)) {
      seen.add(a);
      areaIncl.set(a, (areaIncl.get(a) ?? 0) + us);
    }
  }
}

const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)} %`;
const show = (title: string, m: Map<string, number>) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(v)}  ${k}\n`);
};
process.stdout.write(`profile: ${(total / 1e6).toFixed(2)} s sampled\n`);
show("self time by function", fnSelf);
show("self time by area", areaSelf);
show("inclusive time by area", areaIncl);

// With FOCUS=<function name>: the heaviest call stacks that end in that function.
const focus = process.env.FOCUS;
if (focus) {
  const stacks = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const n = byId.get(id)!;
    if (n.callFrame.functionName !== focus) continue;
    const frames: string[] = [];
    for (let cur: number | undefined = id; cur !== undefined && frames.length < 14; cur = parent.get(cur)) frames.push(label(byId.get(cur)!));
    const key = frames.join("\n      ← ");
    stacks.set(key, (stacks.get(key) ?? 0) + us);
  }
  show(`stacks ending in ${focus}`, stacks);
}
