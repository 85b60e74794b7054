/**
 * Allocation per request of the service under a bench run: a preload that samples allocations
 * (objects collected by minor and major GC included, so the sample is what was allocated, not what
 * survived) from ALLOC_START_S to ALLOC_STOP_S after start, counts the HTTP requests started in that
 * window, and writes ALLOC_DIR/alloc-<pid>.heapprofile (open it in Chrome DevTools' Memory tab) and
 * ALLOC_DIR/alloc-<pid>.txt (bytes sampled per request).
 *
 *   npm run build
 *   ALLOC_DIR=/tmp/alloc BENCH_NODE_FLAGS="--import $PWD/bench/alloc-sampler.mjs" BENCH_ONLY=rest BENCH_WRITE=0 npm run bench
 */
import dc from "node:diagnostics_channel";
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector";

const start = Number(process.env.ALLOC_START_S ?? 8) * 1000;
const stop = Number(process.env.ALLOC_STOP_S ?? 18) * 1000;
const dir = process.env.ALLOC_DIR ?? "/tmp";
let counting = false;
let requests = 0;
dc.subscribe("http.server.request.start", () => {
  if (counting) requests++;
});
const session = new Session();
session.connect();
setTimeout(() => {
  session.post("HeapProfiler.enable", () => {
    const params = { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true };
    session.post("HeapProfiler.startSampling", params, () => {
      counting = true;
    });
  });
  setTimeout(() => {
    counting = false;
    session.post("HeapProfiler.stopSampling", (err, result) => {
      if (err) throw err;
      let total = 0;
      const walk = (node) => {
        total += node.selfSize;
        for (const child of node.children) walk(child);
      };
      walk(result.profile.head);
      mkdirSync(dir, { recursive: true });
      writeFileSync(`${dir}/alloc-${process.pid}.heapprofile`, JSON.stringify(result.profile));
      writeFileSync(`${dir}/alloc-${process.pid}.txt`, `requests ${requests} sampled ${total} bytes per request ${(total / requests).toFixed(0)}\n`);
    });
  }, stop - start).unref();
}, start).unref();
