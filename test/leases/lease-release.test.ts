/**
 * Issue 41 (8): a lease whose message never reached a carrier is released when the message fails
 * (here NoRoute at submission), so 5 such failures no longer hold the recipient's 5 leases for 30
 * days. The release is one conditional statement: a lease some message of which is still queued,
 * or was ever submitted to a carrier, stays.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Carrier, CarrierError } from "../../src/delivery/carrier.js";
import { createSimulatorCarrier } from "../../src/carriers/simulator.js";
import { ManualClock } from "../../src/common/clock.js";
import { NO_ROUTE } from "../../src/common/errors.js";
import { dbKind } from "../support/db.js";
import { addPoolNumbers, createTenant, createTestApp, submissionsWritten, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
/** Recipients under +1415 have no route: the carrier refuses them with NoRoute, as the router does. */
const NOWHERE = "+1415";

let seq = 0;
const recipient = () => `+1415555${String(4000 + ++seq).padStart(4, "0")}`;

describe(`a lease whose message never reached a carrier is released (${dbKind()})`, () => {
  let t: TestApp;
  let a: Tenant;
  const clock = new ManualClock(T0);
  const sim = createSimulatorCarrier({ clock, reportDelayMs: 0 });
  const carrier: Carrier = {
    name: "test",
    async submit(sms) {
      if (sms.to.startsWith(NOWHERE)) throw new CarrierError(`no route matches ${sms.to}`, NO_ROUTE, true);
      return sim.submit(sms);
    },
    start: (e) => sim.start(e),
    stop: () => sim.stop(),
  };

  beforeAll(async () => {
    t = await createTestApp({ clock, carrier, engine: true, config: { sendRateLimit: 0 } });
    a = await createTenant(t.app);
    await addPoolNumbers(t.app, 8, 70);
  }, 120_000);
  afterAll(() => t?.close());

  async function send(body: Record<string, unknown>) {
    return t.app.inject({ method: "POST", url: `/v2/Properties/${a.propertySid}/Messages`, headers: { authorization: a.auth }, payload: body });
  }
  async function leasedSend(to: string, schedule?: number): Promise<string> {
    const res = await send({ From: "", To: to, Text: "leased", ...(schedule ? { Schedule: schedule } : {}) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().MessageSid;
  }
  const dispatch = async () => {
    while ((await t.engine!.dispatcher.tick()) > 0);
    await submissionsWritten(t);
  };
  async function leaseOf(sid: string): Promise<{ sid: string; released: boolean }> {
    const rows = await t.db.orm.em.fork().execute<{ sid: string; released: boolean }[]>("select sid, released from leases where message_sid = ?", [sid]);
    return rows[0];
  }

  it("5 NoRoute failures leave no live lease; the recipient's next leased send is accepted, not LeaseLimitReached", async () => {
    const r = recipient();
    const sids: string[] = [];
    for (let i = 0; i < 5; i++) sids.push(await leasedSend(r));
    await dispatch();
    for (const sid of sids) {
      const rec = (await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: a.auth } })).json();
      expect(rec).toMatchObject({ Status: "Failed", ErrorCode: "NoRoute" });
      expect(await leaseOf(sid)).toMatchObject({ released: true });
    }
    const live = await t.db.orm.em.fork().execute<{ n: number }[]>("select count(*)::int as n from leases where recipient = ? and not released", [r]);
    expect(live[0].n).toBe(0);
    const sixth = await send({ From: "", To: r, Text: "after the failures" });
    expect(sixth.statusCode, sixth.body).toBe(200);
  });

  it("a lease another message still names (queued, to be sent) is not released by the first one's failure", async () => {
    const r = recipient();
    const first = await leasedSend(r);
    const second = await leasedSend(recipient(), Math.floor(clock.now().getTime() / 1000) + 86_400);
    const lease = await leaseOf(first);
    // The second message goes out on the first one's lease (the race the statement guards against).
    await t.db.orm.em.fork().execute("update messages set lease_sid = ? where sid = ?", [lease.sid, second]);
    await dispatch();
    expect(await leaseOf(first)).toEqual({ sid: lease.sid, released: false });
  });

  it("a message that reached the carrier keeps its lease when it fails later (replies may still come)", async () => {
    const sid = await leasedSend("+447400123457");
    await dispatch();
    await t.db.orm.em.fork().execute("update messages set status = 'Processing' where sid = ?", [sid]);
    const { failUnsubmitted } = await import("../../src/delivery/receipts.js");
    await t.db.orm.em
      .fork()
      .transactional((tx) => failUnsubmitted(tx, [{ messageSid: sid, status: "Failed", errorCode: "CarrierFailed", at: clock.now(), now: clock.now() }]));
    expect(await leaseOf(sid)).toMatchObject({ released: false });
  });
});
