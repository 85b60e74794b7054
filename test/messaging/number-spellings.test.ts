/**
 * Issue 41, defect 2: a number written with its trunk prefix after the calling code
 * (`+610412345679` for `+61412345679`, `+114155559101` for `+14155559101`) was accepted as valid and
 * stored as written, so it got around every check that compares numbers: the opt-out list,
 * BLOCKED_PREFIXES, the deployment's own numbers (To and ForwardToSms) and the 5 live leases to one
 * recipient. Every number the API takes is now refused unless written in its one E164 spelling (a
 * 400 naming the field, with the spelling to use); a carrier's number is brought to that spelling
 * before anything compares or stores it (docs/decisions.md, "One spelling per number").
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { normalizeKannelNumber } from "../../src/carriers/kannel.js";
import { normalizeSmppNumber } from "../../src/carriers/smpp/smpp-codec.js";
import { receiveInbound, sendAfterCommit } from "../../src/delivery/inbound.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, admin, addPoolNumbers, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { sendJudge } from "../../src/messaging/send-pipeline.js";
import { SEND_RULES } from "../../src/messaging/send-steps.js";

let t: TestApp;
let a: Tenant;
let pool: string[];
let seq = 0;

beforeAll(async () => {
  // No send rate limit: the test clock stands still. BLOCKED_PREFIXES as in the probe.
  t = await createTestApp({
    config: { sendRateLimit: 0, destinations: { defaultAllowedCountries: [], blockedPrefixes: ["+61491"], allowPremium: true } },
  });
  a = await createTenant(t.app);
  pool = await addPoolNumbers(t.app, 8, 120);
  await admin(t.app, "/admin/v1/Numbers", { Number: "+14155559101" });
}, 120_000);
afterAll(async () => {
  await t?.close();
});

const send = (body: object, tenant = a) =>
  t.app.inject({ method: "POST", url: `/v2/Properties/${tenant.propertySid}/Messages`, headers: { authorization: tenant.auth }, payload: body });
const batch = (messages: object[], tenant = a) =>
  t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/BatchMessages`,
    headers: { authorization: tenant.auth },
    payload: { Messages: messages },
  });
const optOuts = (tenant = a) => `/v2/Accounts/${tenant.accountSid}/OptOuts`;

/** The messages stored to any of `numbers`, as the table holds them. */
async function storedTo(numbers: string[]): Promise<string[]> {
  const rows = await t.db.orm.em
    .fork()
    .execute<{ recipient: string }[]>(`select recipient from messages where recipient in (${numbers.map(() => "?").join(",")})`, numbers);
  return rows.map((r) => r.recipient);
}

/** The 400 refusing `field` with `code`, whose message gives `canonical` as the spelling to use. */
function expectRefused(res: { statusCode: number; body: string; json(): any }, field: string, code: string, canonical: string) {
  expect(res.statusCode, res.body).toBe(400);
  const rs = res.json().ResponseStatus;
  expect(rs.ErrorCode).toBe(code);
  expect(rs.Errors.map((e: { FieldName: string }) => e.FieldName)).toEqual([field]);
  expect(rs.Errors[0].Message).toContain(`Write it ${canonical} `);
}

describe(`one spelling per number (issue 41, defect 2; ${dbKind()})`, () => {
  it("after +61412345679 opted out, sends to +610412345679 and +6100412345679 are refused (single and batch), not delivered", async () => {
    const opted = await t.app.inject({ method: "POST", url: optOuts(), headers: { authorization: a.auth }, payload: { Number: "+61412345679" } });
    expect(opted.statusCode, opted.body).toBe(200);
    for (const to of ["+610412345679", "+6100412345679"]) {
      expectRefused(await send({ From: "Acme", To: to, Text: "after STOP" }), "To", "InvalidRecipient", "+61412345679");
    }
    const res = await batch([
      { From: "Acme", To: "+610412345679", Text: "after STOP" },
      { From: "Acme", To: "+61412345679", Text: "after STOP" },
    ]);
    expect(res.statusCode, res.body).toBe(200);
    const [trunk, canonical] = res.json().Messages;
    expect(trunk.ResponseStatus.ErrorCode).toBe("InvalidRecipient");
    expect(trunk.ResponseStatus.Errors[0]).toMatchObject({ FieldName: "To", ErrorCode: "InvalidRecipient" });
    expect(canonical.ResponseStatus.ErrorCode).toBe("RecipientOptedOut");
    expect(await storedTo(["+61412345679", "+610412345679", "+6100412345679"])).toEqual([]);
  });

  it("BLOCKED_PREFIXES=+61491 stops +610491234567: it is refused as not E164, and +61491234567 as blocked", async () => {
    expectRefused(await send({ From: "Acme", To: "+610491234567", Text: "hi" }), "To", "InvalidRecipient", "+61491234567");
    const blocked = await send({ From: "Acme", To: "+61491234567", Text: "hi" });
    expect(blocked.statusCode, blocked.body).toBe(400);
    expect(blocked.json().ResponseStatus.ErrorCode).toBe("DestinationNotAllowed");
    expect(await storedTo(["+610491234567", "+61491234567"])).toEqual([]);
  });

  it("the pool number +14155559101 written +114155559101 is refused as To and as ForwardToSms", async () => {
    expectRefused(await send({ From: "Acme", To: "+114155559101", Text: "hi" }), "To", "InvalidRecipient", "+14155559101");
    expectRefused(
      await send({ From: "Acme", To: "+447700900555", Text: "hi", ForwardToSms: "+114155559101" }),
      "ForwardToSms",
      "InvalidRecipient",
      "+14155559101",
    );
    // Written canonically, both are the loop they always were.
    const own = await send({ From: "Acme", To: "+447700900555", Text: "hi", ForwardToSms: "+14155559101" });
    expect(own.json().ResponseStatus?.ErrorCode).toBe("DestinationNotAllowed");
    expect(await storedTo(["+114155559101", "+14155559101"])).toEqual([]);
  });

  it("after the 5th lease to a recipient, no more are granted under another spelling of it", async () => {
    const r = "+14155553901";
    const schedule = Math.floor(t.clock.now().getTime() / 1000) + 86_400;
    for (let i = 0; i < 5; i++) {
      const res = await send({ From: "", To: r, Text: "hold", Schedule: schedule });
      expect(res.statusCode, res.body).toBe(200);
    }
    expect((await send({ From: "", To: r, Text: "hold", Schedule: schedule })).json().ResponseStatus.ErrorCode).toBe("LeaseLimitReached");
    for (const spelling of ["+114155553901", "+1114155553901"]) {
      const res = await send({ From: "", To: spelling, Text: "hold", Schedule: schedule });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().ResponseStatus.ErrorCode).toBe("InvalidRecipient");
    }
    const leases = await t.db.orm.em
      .fork()
      .execute<{ recipient: string }[]>("select recipient from leases where not released and recipient like ?", ["%4155553901"]);
    expect(leases.map((l) => l.recipient)).toEqual(Array(5).fill(r));
  });

  it("the OptOuts API takes only the one spelling: an add or a delete of another is a 400 naming Number and the spelling to use", async () => {
    const add = await t.app.inject({ method: "POST", url: optOuts(), headers: { authorization: a.auth }, payload: { Number: "+610412345670" } });
    expectRefused(add, "Number", "InvalidParameter", "+61412345670");
    const spaced = await t.app.inject({ method: "POST", url: optOuts(), headers: { authorization: a.auth }, payload: { Number: "+61 412 345 670" } });
    expectRefused(spaced, "Number", "InvalidParameter", "+61412345670");
    const del = await t.app.inject({ method: "DELETE", url: `${optOuts()}/610412345679`, headers: { authorization: a.auth } });
    expect(del.statusCode, del.body).toBe(400);
    expect(del.json().ResponseStatus.Errors[0]).toMatchObject({ FieldName: "Number", ErrorCode: "InvalidParameter" });
    expect(del.json().ResponseStatus.Errors[0].Message).toContain("write it 61412345679 ");
    const list = await t.app.inject({ method: "GET", url: optOuts(), headers: { authorization: a.auth } });
    expect(list.json().OptOuts.map((o: { Number: string }) => o.Number)).toEqual(["+61412345679"]);
  });
});

describe(`a carrier's numbers in the one spelling (issue 41, defect 2; ${dbKind()})`, () => {
  const inbound = (from: string, to: string, text: string) =>
    // The forward and the keyword's answer are sent once the inbound SMS is stored (issue 41, defects 3 and 4), as the engine does.
    receiveInbound(t.db.orm.em.fork(), { from, to, text, at: t.clock.now() }, t.clock.now(), {}).then((r) =>
      sendAfterCommit({ orm: t.db.orm, noAlphaCountries: new Set(["US", "CA"]), judge: sendJudge(SEND_RULES) }, r),
    );

  it("a STOP from +610412345671 (SMPP TON 1, Kannel) opts out +61412345671, and sends to it are refused", async () => {
    const b = await createTenant(t.app);
    const smppFrom = normalizeSmppNumber("610412345671", 1);
    const result = await inbound(smppFrom, b.ownedNumber, "STOP");
    expect(result.keyword?.kind).toBe("Stop");
    const list = await t.app.inject({ method: "GET", url: optOuts(b), headers: { authorization: b.auth } });
    expect(list.json().OptOuts.map((o: { Number: string }) => o.Number)).toEqual(["+61412345671"]);
    const res = await send({ From: "Acme", To: "+61412345671", Text: "hi" }, b);
    expect(res.json().ResponseStatus.ErrorCode).toBe("RecipientOptedOut");

    const kannelFrom = normalizeKannelNumber("0061 0412 345 672");
    expect((await inbound(kannelFrom, b.ownedNumber, "STOP")).keyword?.kind).toBe("Stop");
    const again = await t.app.inject({ method: "GET", url: optOuts(b), headers: { authorization: b.auth } });
    expect(
      again
        .json()
        .OptOuts.map((o: { Number: string }) => o.Number)
        .sort(),
    ).toEqual(["+61412345671", "+61412345672"]);
  });

  it("a reply from the recipient's other spelling, to the pool number's other spelling, matches the lease", async () => {
    const r = `+1415555${String(3950 + ++seq)}`;
    const res = await send({ From: "", To: r, Text: "reply to me" });
    expect(res.statusCode, res.body).toBe(200);
    const leased = res.json().From as string;
    expect(pool).toContain(leased);
    const reply = await inbound(`+1${r.slice(1)}`, `+1${leased.slice(1)}`, "yes");
    expect(reply.inReplyTo).toBe(res.json().MessageSid);
    const rows = await t.db.orm.em
      .fork()
      .execute<{ sender: string; recipient: string }[]>("select sender, recipient from messages where sid = ?", [reply.messageSid]);
    expect(rows).toEqual([{ sender: r, recipient: leased }]);
  });

  it("a lease stored before (ForwardToSms in another spelling) forwards to the one spelling, and not to our own number", async () => {
    const outside = `+1415555${String(3960 + ++seq)}`;
    const looped = `+1415555${String(3960 + ++seq)}`;
    const kept: { sid: string; from: string; to: string }[] = [];
    for (const [to, forward] of [
      [outside, "+447700900777"],
      [looped, "+447700900778"],
    ]) {
      const res = await send({ From: "", To: to, Text: "forward my reply", ForwardToSms: forward });
      expect(res.statusCode, res.body).toBe(200);
      kept.push({ sid: res.json().MessageSid, from: res.json().From, to });
    }
    // As a row stored before numbers had one spelling would hold them.
    const em = t.db.orm.em.fork();
    await em.execute("update messages set forward_to_sms = ? where sid = ?", ["+4407700900777", kept[0].sid]);
    await em.execute("update messages set forward_to_sms = ? where sid = ?", ["+114155559101", kept[1].sid]);

    const forwarded = await inbound(kept[0].to, kept[0].from, "here is my reply");
    expect(forwarded.forward).toMatchObject({ status: "Processing", errorCode: "" });
    const rows = await t.db.orm.em.fork().execute<{ recipient: string }[]>("select recipient from messages where sid = ?", [forwarded.forward!.messageSid]);
    expect(rows).toEqual([{ recipient: "+447700900777" }]);

    // +114155559101 is the pool number +14155559101: a forward there would come back as a new reply.
    const loop = await inbound(kept[1].to, kept[1].from, "and mine");
    expect(loop.forward).toMatchObject({ status: "Failed", errorCode: "DestinationNotAllowed" });
  });

  it("an alphanumeric sender stays as it came and is never a number: its STOP to an owned number opts nothing out", async () => {
    const c = await createTenant(t.app);
    const result = await inbound("Vodafone", c.ownedNumber, "STOP");
    expect(result.keyword).toBeUndefined();
    const list = await t.app.inject({ method: "GET", url: optOuts(c), headers: { authorization: c.auth } });
    expect(list.json().OptOuts).toEqual([]);
    const kept = await t.db.orm.em.fork().execute<{ sender: string }[]>("select sender from unmatched_inbound where recipient = ?", [c.ownedNumber]);
    expect(kept).toEqual([{ sender: "Vodafone" }]);
  });
});

describe(`the operator's numbers (issue 41, defect 2; ${dbKind()})`, () => {
  it("the operator's pool numbers take only the one spelling", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: "/admin/v1/Numbers",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { Number: "+114155559102" },
    });
    expectRefused(res, "Number", "InvalidParameter", "+14155559102");
  });
});
