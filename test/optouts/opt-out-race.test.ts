/**
 * A STOP racing the dispatcher (docs/api.md#opt-out-stop-start-help): every queued message to the number either went to
 * the carrier (claimed first) or ends Failed with RecipientOptedOut (failed first), never both,
 * never neither. Real concurrency on PostgreSQL; PGlite serializes the two.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

let t: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  // Small claims, so that the STOP lands between two of them.
  t = await createTestApp({ engine: { dispatcher: { batchSize: 5 } } });
  tenant = await createTenant(t.app);
});

afterAll(async () => {
  await t?.close();
});

describe(`a STOP while the dispatcher claims (${dbKind()})`, () => {
  it("each queued message is either sent or Failed RecipientOptedOut, exactly one of the two", async () => {
    const to = "+61413000001";
    const sids: string[] = [];
    for (let i = 0; i < 40; i++) {
      const res = await t.app.inject({
        method: "POST",
        url: `/v2/Properties/${tenant.propertySid}/Messages`,
        headers: { authorization: tenant.auth },
        payload: { From: tenant.ownedNumber, To: to, Text: `Message ${i}` },
      });
      expect(res.statusCode, res.body).toBe(200);
      sids.push(res.json().MessageSid);
    }
    const stop = t.app.inject({
      method: "POST",
      url: "/admin/v1/Simulator/Inbound",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { From: to, To: tenant.ownedNumber, Text: "STOP" },
    });
    const ticks = (async () => {
      while ((await t.engine!.dispatcher.tick()) > 0) {
        /* claim and submit until nothing is due */
      }
    })();
    expect((await stop).statusCode).toBe(200);
    await ticks;
    while ((await t.engine!.dispatcher.tick()) > 0) {
      /* the STOP's answer */
    }
    const em = t.db.orm.em.fork();
    for (const until = Date.now() + 10_000; ;) {
      const [{ n }] = await em.execute<{ n: string | number }[]>("select count(*) as n from messages where status in ('Processing', 'Submitted')");
      if (Number(n) === 0) break;
      if (Date.now() > until) throw new Error("timed out waiting for delivery reports");
      await new Promise((r) => setTimeout(r, 10));
    }
    const handset = await t.app.inject({
      method: "GET",
      url: `/admin/v1/Simulator/Handsets/${to.slice(1)}/Messages`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    const delivered = new Set((handset.json().Messages as { MessageSid: string }[]).map((m) => m.MessageSid));
    let failed = 0;
    for (const sid of sids) {
      const rec = (await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: tenant.auth } })).json();
      if (rec.Status === "Failed") {
        expect(rec.ErrorCode).toBe("RecipientOptedOut");
        expect(delivered.has(sid)).toBe(false);
        failed++;
      } else {
        expect(rec.Status, sid).toBe("Delivered");
        expect(delivered.has(sid)).toBe(true);
      }
    }
    // The answer went out as well, once.
    expect(delivered.size).toBe(sids.length - failed + 1);
  });
});
