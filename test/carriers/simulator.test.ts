import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/common/clock.js";
import { createSimulatorCarrier, SIMULATOR_KEEP } from "../../src/carriers/simulator.js";

/** Submits `count` messages and waits until the simulator has reported every one (so each reached its handset). */
async function deliver(sim: ReturnType<typeof createSimulatorCarrier>, recipients: (i: number) => string, count: number, first = 0): Promise<void> {
  let reported = 0;
  const all = new Promise<void>((resolve) => {
    void sim.start({
      deliveryReport: async () => {
        if (++reported === count) resolve();
      },
      inbound: async () => ({ messageSid: "", inReplyTo: "" }),
    });
  });
  for (let i = first; i < first + count; i++) {
    await sim.submit({ messageSid: `MG${i}`, from: "+447700900001", to: recipients(i), text: `m${i}`, deliveryReceipt: true });
  }
  await all;
}

describe("simulator carrier memory", () => {
  it("keeps the latest messages over all handsets, oldest leaving first", async () => {
    const sim = createSimulatorCarrier({ clock: new ManualClock(), reportDelayMs: 0, keep: 5 });
    // a, b, a, c, a, b, a: with room for 5, the first two (a0, b1) are gone.
    const to = ["+447700900100", "+447700900200", "+447700900100", "+447700900300", "+447700900100", "+447700900200", "+447700900100"];
    await deliver(sim, (i) => to[i], to.length);
    expect(sim.handsetMessages("+447700900100").map((m) => m.messageSid)).toEqual(["MG2", "MG4", "MG6"]);
    expect(sim.handsetMessages("+447700900200").map((m) => m.messageSid)).toEqual(["MG5"]);
    expect(sim.handsetMessages("+447700900300").map((m) => m.messageSid)).toEqual(["MG3"]);
    await sim.stop();
  });

  it(`holds at most ${SIMULATOR_KEEP} messages in all, however many handsets it sees`, async () => {
    const sim = createSimulatorCarrier({ clock: new ManualClock(), reportDelayMs: 0 });
    const n = SIMULATOR_KEEP + 2_000;
    const number = (i: number) => `+4477009${String(10000 + i).padStart(5, "0")}`;
    await deliver(sim, number, n);
    let kept = 0;
    for (let i = 0; i < n; i++) kept += sim.handsetMessages(number(i)).length;
    expect(kept).toBe(SIMULATOR_KEEP);
    expect(sim.handsetMessages(number(0))).toEqual([]);
    expect(sim.handsetMessages(number(n - 1)).map((m) => m.messageSid)).toEqual([`MG${n - 1}`]);
    await sim.stop();
  });

  it("a busy handset keeps its share in order across compactions", async () => {
    const sim = createSimulatorCarrier({ clock: new ManualClock(), reportDelayMs: 0, keep: 3000 });
    await deliver(sim, () => "+447700900123", 10_000);
    const got = sim.handsetMessages("+447700900123").map((m) => m.messageSid);
    expect(got).toHaveLength(3000);
    expect(got[0]).toBe("MG7000");
    expect(got[2999]).toBe("MG9999");
    await sim.stop();
  });
});
