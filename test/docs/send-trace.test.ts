/**
 * docs/architecture.md's send trace is the map a newcomer follows from the socket to the INSERT:
 * it must name every module of ours that a REST send runs. The modules are measured, not listed by
 * hand: V8's precise coverage (the inspector's Profiler, call counts reset before the request)
 * over one `POST /v2/Properties/{PropertySid}/Messages` to a listening app, with the dispatcher's
 * hand-off as `npm start` has it (claim at accept), after warm-up sends. A module counts when it
 * runs a named function in each of three sends, so a timer that fires by chance during one does not.
 */
import { readFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const ROOT = resolve(import.meta.dirname, "..", "..");

/** The section of docs/architecture.md that traces a REST send. */
function sendTraceSection(): string {
  const md = readFileSync(join(ROOT, "docs", "architecture.md"), "utf8");
  const start = md.indexOf("## A REST Send SMS");
  const end = md.indexOf("\n## ", start + 1);
  return md.slice(start, end === -1 ? undefined : end);
}

describe("the send trace of docs/architecture.md", () => {
  let t: TestApp;
  let tenant: Tenant;
  let url: string;

  beforeAll(async () => {
    t = await createTestApp({ engine: { claimAtAccept: true, loops: true } });
    tenant = await createTenant(t.app);
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/v2/Properties/${tenant.propertySid}/Messages`;
  });
  afterAll(async () => {
    await t?.close();
  });

  async function send(): Promise<number> {
    const res = await fetch(url, {
      method: "POST",
      headers: { authorization: tenant.auth, "content-type": "application/json" },
      body: JSON.stringify({ From: tenant.ownedNumber, To: "+61412345678", Text: "hello" }),
    });
    await res.text();
    return res.status;
  }

  /** The src/ modules (relative to src/) with a function called while one send ran. */
  async function modulesOfOneSend(session: Session): Promise<Set<string>> {
    await session.post("Profiler.takePreciseCoverage");
    expect(await send()).toBe(200);
    const { result } = await session.post("Profiler.takePreciseCoverage");
    const ran = new Set<string>();
    for (const script of result) {
      const at = script.url.indexOf("/src/");
      if (at === -1 || script.url.includes("/node_modules/")) continue;
      // Named functions only: the test's module runner reads an export through an anonymous getter
      // (a constant read from config.ts would count it), which the built service does not have.
      if (script.functions.some((f) => f.functionName !== "" && f.ranges[0].count > 0)) ran.add(script.url.slice(at + "/src/".length).replace(/\?.*$/, ""));
    }
    return ran;
  }

  it("names every module of ours that a REST send runs", async () => {
    for (let i = 0; i < 20; i++) expect(await send()).toBe(200);
    const session = new Session();
    session.connect();
    try {
      await session.post("Profiler.enable");
      await session.post("Profiler.startPreciseCoverage", { callCount: true, detailed: false });
      let every: Set<string> | undefined;
      for (let i = 0; i < 3; i++) {
        const ran = await modulesOfOneSend(session);
        every = every ? new Set([...every].filter((m) => ran.has(m))) : ran;
      }
      const section = sendTraceSection();
      const missing = [...every!].filter((m) => !section.includes(`\`${m}\``)).sort();
      expect(missing, `modules a send runs that the trace does not name (as \`folder/file.ts\`); all that ran: ${[...every!].sort().join(", ")}`).toEqual([]);
    } finally {
      await session.post("Profiler.stopPreciseCoverage");
      session.disconnect();
    }
  });
});
