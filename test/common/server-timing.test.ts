import { describe, expect, it } from "vitest";
import { markBatch, parseServerTiming, ServerTiming } from "../../src/common/server-timing.js";

describe("ServerTiming", () => {
  it("reports each step whose two ends were marked, in the pipeline's order, as a Server-Timing value", () => {
    const t = new ServerTiming(100);
    t.mark("method", 100.25);
    t.mark("decoded", 100.3);
    t.mark("submitted", 100.5);
    t.mark("batch", 101.5);
    t.mark("statementStart", 101.6);
    t.mark("statementEnd", 103.6);
    t.mark("written", 104);
    // No admit (no limit asked): validate runs from the decoded request; no reserve, resume or after marks.
    expect(t.header()).toBe("intercept;dur=0.250, decode;dur=0.050, validate;dur=0.200, gather;dur=1.000, statement;dur=2.000, total;dur=4.000");
    // The header's three decimals read back.
    expect([...parseServerTiming(t.header())]).toEqual(t.steps().map(([name, ms]) => [name, Number(ms.toFixed(3))]));
  });

  it("marks a batch's timed sends at one instant, and leaves the others alone", () => {
    const timed = new ServerTiming(0);
    const items: { timing?: ServerTiming }[] = [{}, { timing: timed }, {}];
    markBatch(items, "reserveStart");
    markBatch(items, "reserveEnd");
    expect(timed.steps().map(([name]) => name)).toEqual(["reserve"]);
    expect(items[0].timing).toBeUndefined();
  });
});
