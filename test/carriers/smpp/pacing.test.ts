/**
 * Pacing beside the SMPP carrier's own: KANNEL_TPS caps the Kannel carrier with the same pacer
 * (read from the environment, sendsms calls spaced 1/KANNEL_TPS apart, the claim sized by it),
 * and the dispatcher claims no more than a carrier's capacity. Only lower bounds on time are
 * asserted (a loaded machine makes calls slower, never faster); the rates themselves are
 * measured in the bench (docs/benchmarks.md, SMPP pacing).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { createKannelCarrier } from "../../../src/carriers/kannel.js";
import { createPacer } from "../../../src/carriers/pacer.js";
import { systemClock } from "../../../src/common/clock.js";
import { createSimulatorCarrier } from "../../../src/carriers/simulator.js";
import { ManualClock } from "../../../src/common/clock.js";
import { loadConfig } from "../../../src/config.js";
import { createTenant, createTestApp } from "../../support/harness.js";

describe("the pacer", () => {
  it("starts no burst of two after an idle period or a pause: the second start waits a full interval", async () => {
    const pacer = createPacer({ window: 10, tps: 20 }); // 50 ms apart
    const t0 = performance.now();
    (await pacer.acquire()).done();
    (await pacer.acquire()).done();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(50 - 1);
    await new Promise((r) => setTimeout(r, 200)); // idle
    const t1 = performance.now();
    (await pacer.acquire()).done();
    (await pacer.acquire()).done();
    expect(performance.now() - t1).toBeGreaterThanOrEqual(50 - 1);
    pacer.pause(100); // the SMSC said it is throttled
    const t2 = performance.now();
    const [a, b] = await Promise.all([pacer.acquire(), pacer.acquire()]);
    const t3 = performance.now();
    a.done();
    b.done();
    expect(t3 - t2).toBeGreaterThanOrEqual(100 + 50 - 1);
  });

  it("catches up after a late timer without ever starting more than TPS in one second", async () => {
    const pacer = createPacer({ window: Infinity, tps: 10 }); // 100 ms apart, at most 10 in any 1 s
    const starts: number[] = [];
    const all = Array.from({ length: 12 }, () => pacer.acquire().then((s) => (starts.push(performance.now()), s.done())));
    await new Promise((r) => setTimeout(r, 0));
    const until = performance.now() + 195; // the event loop blocked: the second start's timer fires ~95 ms late
    while (performance.now() < until);
    await Promise.all(all);
    expect(starts[11]! - starts[0]!).toBeGreaterThanOrEqual(1100 - 1); // the rate: 11 intervals
    for (let i = 10; i < starts.length; i++) expect(starts[i]! - starts[i - 10]!, `start ${i}`).toBeGreaterThanOrEqual(1000 - 1);
  });
});

describe("KANNEL_TPS", () => {
  it("is read from the environment (off and 0: no limit)", () => {
    expect(loadConfig({ CARRIER: "kannel", KANNEL_CALLBACK_SECRET: "s".repeat(32), KANNEL_TPS: "20" }).kannel.tps).toBe(20);
    expect(loadConfig({ CARRIER: "kannel", KANNEL_CALLBACK_SECRET: "s".repeat(32), KANNEL_TPS: "off" }).kannel.tps).toBe(0);
    expect(loadConfig({ CARRIER: "kannel", KANNEL_CALLBACK_SECRET: "s".repeat(32) }).kannel.tps).toBe(0);
  });

  it("spaces sendsms calls 1/KANNEL_TPS apart and sizes the dispatcher's claim by the rate", async () => {
    const server = createServer((_req, res) => {
      res.writeHead(202, { "content-type": "text/plain" }).end("0: Accepted for delivery");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const kannel = (tps: number) =>
      createKannelCarrier({
        sendsmsUrl: `${base}/cgi-bin/sendsms`,
        username: "u",
        password: "p",
        callbackBaseUrl: base,
        callbackSecret: "s",
        clock: systemClock,
        tps,
      });
    // When each call starts, as the carrier makes it (the server's arrival times add network noise).
    const calls: number[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = (...args: Parameters<typeof fetch>) => {
      calls.push(performance.now());
      return realFetch(...args);
    };
    try {
      const carrier = kannel(20);
      expect(carrier.capacity?.(30_000)).toBe(600); // 20/s for 30 s
      expect(carrier.status!().tps).toBe(20);
      const sms = (i: number) => ({ messageSid: `MG${i}`, from: "+447700900001", to: `+44770090010${i}`, text: "hi", deliveryReceipt: true });
      const asked = performance.now();
      await Promise.all(Array.from({ length: 6 }, (_, i) => carrier.submit(sms(i))));
      expect(calls).toHaveLength(6);
      // Six calls at 20/s: the sixth starts at least 5 × 50 ms after they were asked for (1 ms for timer rounding).
      expect(calls[5]! - asked).toBeGreaterThanOrEqual(5 * 50 - 1);
      expect(kannel(0).capacity).toBeUndefined();
    } finally {
      globalThis.fetch = realFetch;
      await new Promise((r) => server.close(r));
    }
  });
});

describe("the dispatcher and a paced carrier", () => {
  it("claims no more messages than the carrier's capacity for half the claim time", { timeout: 120_000 }, async () => {
    const clock = new ManualClock(new Date("2026-11-24T12:00:00Z"));
    const simulator = createSimulatorCarrier({ clock, reportDelayMs: 0 });
    const asked: number[] = [];
    const carrier = { ...simulator, capacity: (withinMs: number) => (asked.push(withinMs), 3) };
    const t = await createTestApp({ clock, carrier, engine: { dispatcher: { claimMs: 60_000 } } });
    try {
      const tenant = await createTenant(t.app);
      for (let i = 0; i < 10; i++) {
        const res = await t.app.inject({
          method: "POST",
          url: `/v2/Properties/${tenant.propertySid}/Messages`,
          headers: { authorization: tenant.auth },
          payload: { From: tenant.ownedNumber, To: `+4477009004${i}0`, Text: "paced" },
        });
        expect(res.statusCode, res.body).toBe(200);
      }
      expect(await t.engine!.dispatcher.tick()).toBe(3);
      expect(asked).toContain(30_000);
      expect(await t.engine!.dispatcher.tick()).toBe(3);
    } finally {
      await t.close();
    }
  });
});
