/**
 * SERVER_TIMING (issue 46): with it on, a REST send answers a `Server-Timing` header naming the
 * steps of its handling; off (the default), no such header.
 */
import { afterEach, describe, expect, it } from "vitest";
import { parseServerTiming, SERVER_TIMING_STEPS } from "../../src/common/server-timing.js";
import { createTenant, createTestApp, type TestApp } from "../support/harness.js";

describe("Server-Timing on a REST send", () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  async function send(app: TestApp, authorization?: string) {
    const tenant = await createTenant(app.app);
    return app.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: authorization ?? tenant.auth, "content-type": "application/json" },
      payload: { From: tenant.ownedNumber, To: "+61412345678", Text: "hello" },
    });
  }

  it("names every step of a send, the hand-off's reservation and the shared limits included, when on", async () => {
    // The engine's dispatcher takes the sends claimed at accept, as in `npm start`; the default send rate limit is on.
    t = await createTestApp({ config: { serverTiming: true }, engine: { claimAtAccept: true } });
    const res = await send(t);
    expect(res.statusCode).toBe(200);
    const steps = parseServerTiming(String(res.headers["server-timing"]));
    expect([...steps.keys()]).toEqual(SERVER_TIMING_STEPS.map(([name]) => name));
    for (const ms of steps.values()) expect(ms).toBeGreaterThanOrEqual(0);
    // The steps lie inside the whole.
    const total = steps.get("total")!;
    for (const [name, ms] of steps) if (name !== "total") expect(ms).toBeLessThanOrEqual(total + 0.001);
  });

  it("names the edge's steps on a call refused before the service", async () => {
    t = await createTestApp({ config: { serverTiming: true } });
    const res = await send(t, `Basic ${Buffer.from("AC00000000000000000000000000000000:wrong").toString("base64")}`);
    expect(res.statusCode).toBe(401);
    const steps = parseServerTiming(String(res.headers["server-timing"]));
    expect(steps.has("intercept")).toBe(false); // the service was never reached: no end to the interceptors' step
    expect(steps.has("total")).toBe(true);
    expect(steps.has("statement")).toBe(false);
  });

  it("is not answered when off (the default)", async () => {
    t = await createTestApp();
    const res = await send(t);
    expect(res.statusCode).toBe(200);
    expect(res.headers["server-timing"]).toBeUndefined();
  });
});
