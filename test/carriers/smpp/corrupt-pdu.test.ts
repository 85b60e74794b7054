/**
 * A PDU whose command_length cannot be (0xDEADBEEF, 2 GB; or under the 16-byte header) closes the
 * SMPP link at once (issue 41, defect 12): the link shows down, not Bound, so routes fail over, the
 * reason is in its status and the log, and it binds again with the usual backoff. Before, the
 * library stopped reading without a word and the link showed Bound until a response timed out 30 s
 * later. The Net::SMPP SMSC (test/carriers/smpp/smsc.pl, `corrupt LEN`) writes the bad header.
 */
import type { Logger } from "pino";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestOrm, dbKind, type TestOrm } from "../../support/db.js";
import { acceptedSubmits, startSmsc, type TestSmsc } from "./smsc.js";
import { type SmppWorld, startSmppWorld, waitFor } from "./world.js";

describe(`SMPP corrupt command_length (${dbKind()})`, { timeout: 120_000 }, () => {
  let smsc: TestSmsc;
  let db: TestOrm;
  let world: SmppWorld;
  const lines: Record<string, unknown>[] = [];

  beforeAll(async () => {
    smsc = await startSmsc();
    db = await createTestOrm();
    const log: Logger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    world = await startSmppWorld(db.orm, smsc, { tps: 0, log });
  }, 120_000);

  afterAll(async () => {
    await world?.close();
    await smsc?.stop();
    await db?.close();
  });

  for (const length of [0xdeadbeef, 8]) {
    it(`closes the link at once on command_length ${length}, shows it down with the reason, binds again and submits`, async () => {
      const { carrier } = world;
      await waitFor("Bound", () => carrier.status().link === "Bound");
      const binds = () => smsc.events.filter((e) => e.kind === "bind" && e.f.ok === "1").length;
      const bindsBefore = binds();
      const seen = smsc.events.length;
      const linkStates: string[] = [];
      const watch = setInterval(() => linkStates.push(carrier.status().link), 10);
      const sentAt = performance.now();
      smsc.send(`corrupt ${length}`);
      try {
        // Well within the 30 s response timeout (and before any enquire_link, every 30 s).
        await waitFor("the link to drop", () => carrier.status().link !== "Bound" || linkStates.some((s) => s !== "Bound"), 3000);
      } finally {
        clearInterval(watch);
      }
      const droppedMs = performance.now() - sentAt;
      expect(carrier.status().lastError).toContain(`command_length ${length}`);
      await smsc.waitFor("the connection closed", (ev) => ev.slice(seen).some((e) => e.kind === "closed"), 3000);
      expect(lines.some((l) => l.commandLength === length && String(l.msg).includes("corrupt PDU length"))).toBe(true);

      // Bound again with the usual backoff, and it submits.
      await smsc.waitFor("a new bind", () => binds() > bindsBefore, 10_000);
      await waitFor("Bound again", () => carrier.status().link === "Bound", 10_000);
      const to = `+4477009004${String(length % 100).padStart(2, "0")}`;
      const sid = await world.send({ From: world.tenant.ownedNumber, To: to, Text: `After corrupt ${length}` });
      await waitFor("Submitted", async () => (await world.record(sid)).Status === "Submitted", 10_000);
      expect(acceptedSubmits(smsc.events).some((e) => e.f.destination_addr === to.slice(1))).toBe(true);
      console.log(`corrupt command_length ${length}: link down after ${droppedMs.toFixed(0)} ms`);
    });
  }
});
