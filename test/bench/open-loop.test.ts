/**
 * The latency bench's generator (bench/open-loop.ts) is an open loop: a server stall counts in full
 * for every request due during it, where a closed loop would see one slow answer per connection.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { openLoop } from "../../bench/open-loop.js";

describe("the open-loop generator", () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((done) => (server ? server.close(() => done()) : done())));

  it("keeps its schedule through a stall and counts each request from its due time", async () => {
    // From 300 ms after the first request to 500 ms, the server holds every answer until the stall ends.
    let first: number | undefined;
    server = createServer((req, res) => {
      req.resume();
      const now = performance.now();
      first ??= now;
      const stallEnd = first + 500;
      const wait = now >= first + 300 && now < stallEnd ? stallEnd - now : 0;
      setTimeout(() => res.end("ok"), wait);
    });
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const r = await openLoop({ kind: "http", url, method: "POST", build: () => ({ body: "{}" }) }, { rate: 200, warmup: 0, seconds: 1 });
    expect(r.scheduled).toBe(200);
    expect(r.ok).toBe(200);
    expect(r.errors).toBe(0);
    // About 40 requests were due during the 200 ms stall, waiting up to all of it: a tenth of the
    // run waited half of it or more. A closed loop of a few connections would show a few slow answers.
    expect(r.latency.max).toBeGreaterThan(150);
    expect(r.latency.p90).toBeGreaterThan(60);
    expect(r.latency.p50).toBeLessThan(60);
  });
});
