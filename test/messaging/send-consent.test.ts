/**
 * The consent and destination controls at send time (docs/api.md#opt-out-stop-start-help,
 * docs/api.md#destination-permissions): steps of the one send pipeline, so a send, a batch item and
 * the forward of a reply all obey them, on every wire.
 */
import type { AddressInfo } from "node:net";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { dbKind } from "../support/db.js";
import { addPoolNumbers, simulatorInbound, admin, createTenant, createTestApp, rpcRefusal, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");

async function send(t: TestApp, who: Tenant, body: object) {
  return t.app.inject({ method: "POST", url: `/v2/Properties/${who.propertySid}/Messages`, headers: { authorization: who.auth }, payload: body });
}

async function stored(t: TestApp, who: Tenant): Promise<number> {
  const res = await t.app.inject({ method: "GET", url: `/v2/Properties/${who.propertySid}/Messages?Direction=Transmit`, headers: { authorization: who.auth } });
  return res.json().TotalCount;
}

/** The documented 400 body for one refused field. */
function refusal(code: string, field: string, message: string | RegExp) {
  const m = typeof message === "string" ? message : expect.stringMatching(message);
  return { ResponseStatus: { ErrorCode: code, Message: m, Errors: [{ FieldName: field, ErrorCode: code, Message: m }] } };
}

async function optOut(t: TestApp, who: Tenant, number: string) {
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Accounts/${who.accountSid}/OptOuts`,
    headers: { authorization: who.auth },
    payload: { Number: number },
  });
  expect(res.statusCode, res.body).toBe(200);
}

describe(`opt-outs refuse sends (${dbKind()})`, () => {
  let one: TestApp;
  let two: TestApp;
  let a: Tenant;
  let b: Tenant;

  beforeAll(async () => {
    one = await createTestApp({ now: T0, engine: true });
    // A second API process: its own app, pipeline and caches, on the same database.
    two = await createTestApp({ now: T0, db: one.db });
    a = await createTenant(one.app);
    b = await createTenant(one.app);
  }, 120_000);

  afterAll(async () => {
    await two?.close();
    await one?.close();
  });

  it("a STOP texted through one process refuses the next send through the other: 400 RecipientOptedOut naming To, nothing stored; another account still sends", async () => {
    await addPoolNumbers(one.app, 1, 70);
    const to = "+61412000101";
    const first = await send(one, a, { From: "", To: to, Text: "Your code is 1234" });
    expect(first.statusCode, first.body).toBe(200);
    const pool = first.json().From;
    await simulatorInbound(one.app, to, pool, "  stop ");

    const before = await stored(two, a);
    const refused = await send(two, a, { From: a.ownedNumber, To: to, Text: "After the STOP" });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toStrictEqual(refusal("RecipientOptedOut", "To", new RegExp(`^To \\${to} has opted out of messages from account ${a.accountSid}`)));
    expect(await stored(two, a)).toBe(before);

    const other = await send(two, b, { From: b.ownedNumber, To: to, Text: "Another brand" });
    expect(other.statusCode, other.body).toBe(200);
  });

  it("a batch with one opted-out item: that item alone is refused", async () => {
    const to = "+61412000102";
    await optOut(one, a, to);
    const res = await one.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/BatchMessages`,
      headers: { authorization: a.auth },
      payload: {
        Messages: [
          { From: a.ownedNumber, To: "+61412000103", Text: "one" },
          { From: a.ownedNumber, To: to, Text: "two" },
          { From: a.ownedNumber, To: "+61412000104", Text: "three" },
        ],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const items = res.json().Messages;
    expect(items.map((m: { MessageSid?: string }) => typeof m.MessageSid === "string" && m.MessageSid.startsWith("MG"))).toEqual([true, false, true]);
    expect(items[1].ResponseStatus).toMatchObject({ ErrorCode: "RecipientOptedOut", Errors: [{ FieldName: "To", ErrorCode: "RecipientOptedOut" }] });
  });

  it("the same refusal over Connect and gRPC, with ErrorInfo and the field", async () => {
    const to = "+61412000105";
    await optOut(one, a, to);
    await one.app.listen({ port: 0, host: "127.0.0.1" });
    const baseUrl = `http://127.0.0.1:${(one.app.server.address() as AddressInfo).port}`;
    const sessions = new Http2SessionManager(baseUrl);
    try {
      for (const transport of [createConnectTransport({ baseUrl, httpVersion: "1.1" }), createGrpcTransport({ baseUrl, sessionManager: sessions })]) {
        const client = createClient(MessagingService, transport);
        const err = await rpcRefusal(() =>
          client.sendMessage({ propertySid: a.propertySid, from: a.ownedNumber, to, text: "x" }, { headers: { authorization: a.auth } }),
        );
        expect(err.code).toBe(Code.FailedPrecondition);
        expect(err.findDetails(ErrorInfoSchema).map((d) => d.reason)).toEqual(["RecipientOptedOut"]);
        expect(err.findDetails(BadRequestSchema)[0].fieldViolations.map((v) => v.field)).toEqual(["To"]);
      }
    } finally {
      sessions.abort();
    }
  });
});

describe(`destination permissions refuse sends (${dbKind()})`, () => {
  let t: TestApp;
  let open: TestApp;
  let a: Tenant;
  let b: Tenant;

  beforeAll(async () => {
    t = await createTestApp({
      now: T0,
      engine: true,
      config: { destinations: { defaultAllowedCountries: ["GB", "AU"], blockedPrefixes: ["+4477009999"], allowPremium: false } },
    });
    // The operator's switch: premium numbers allowed (and every country).
    open = await createTestApp({ now: T0, db: t.db, config: { destinations: { defaultAllowedCountries: [], blockedPrefixes: [], allowPremium: true } } });
    a = await createTenant(t.app);
    b = await createTenant(t.app);
  }, 120_000);

  afterAll(async () => {
    await open?.close();
    await t?.close();
  });

  it("the deployment default, overridden by the account's AllowedCountries, and a blocked prefix", async () => {
    expect((await send(t, a, { From: a.ownedNumber, To: "+61412000201", Text: "AU" })).statusCode).toBe(200);
    const us = await send(t, a, { From: a.ownedNumber, To: "+12025550123", Text: "US" });
    expect(us.statusCode).toBe(400);
    expect(us.json()).toStrictEqual(
      refusal("DestinationNotAllowed", "To", /^To \+12025550123 is in US, which this account may not send to \(allowed: GB, AU\)/),
    );

    await admin(t.app, `/admin/v1/Accounts/${b.accountSid}`, { AllowedCountries: ["US"] });
    expect((await send(t, b, { From: b.ownedNumber, To: "+12025550123", Text: "US" })).statusCode).toBe(200);
    const au = await send(t, b, { From: b.ownedNumber, To: "+61412000201", Text: "AU" });
    expect(au.json()).toStrictEqual(refusal("DestinationNotAllowed", "To", /^To \+61412000201 is in AU, which this account may not send to \(allowed: US\)/));

    const blocked = await send(t, a, { From: a.ownedNumber, To: "+447700999912", Text: "blocked" });
    expect(blocked.json()).toStrictEqual(refusal("DestinationNotAllowed", "To", /^To \+447700999912 is in the blocked prefix \+4477009999/));
  });

  it("a number's country is its calling code's and leading digits' (issue 45): a new Australian block is AU, Christmas Island's CX, GB's drama range GB", async () => {
    const c = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${c.accountSid}`, { AllowedCountries: ["AU"] });
    // +614794… is Australia's mobile range, in a block the bundled metadata does not list yet.
    const au = await send(t, c, { From: c.ownedNumber, To: "+61479489225", Text: "new block" });
    expect(au.statusCode, au.body).toBe(200);
    expect(au.json()).toMatchObject({ To: "+61479489225" });
    const cx = await send(t, c, { From: c.ownedNumber, To: "+61891641234", Text: "Christmas Island" });
    expect(cx.statusCode).toBe(400);
    expect(cx.json()).toStrictEqual(
      refusal(
        "DestinationNotAllowed",
        "To",
        "To +61891641234 is in CX, which this account may not send to (allowed: AU); ask the operator to add it to the account's AllowedCountries.",
      ),
    );
    const gb = await send(t, c, { From: c.ownedNumber, To: "+447700900123", Text: "GB" });
    expect(gb.json()).toStrictEqual(refusal("DestinationNotAllowed", "To", /^To \+447700900123 is in GB, which this account may not send to \(allowed: AU\)/));
    await admin(t.app, `/admin/v1/Accounts/${c.accountSid}`, { AllowedCountries: ["GB"] });
    expect((await send(t, c, { From: c.ownedNumber, To: "+447700900123", Text: "GB" })).statusCode).toBe(200);
    const je = await send(t, c, { From: c.ownedNumber, To: "+447797123456", Text: "Jersey" });
    expect(je.json()).toStrictEqual(refusal("DestinationNotAllowed", "To", /^To \+447797123456 is in JE, which this account may not send to \(allowed: GB\)/));
  });

  it("premium-rate numbers in four countries are refused, and accepted with ALLOW_PREMIUM_DESTINATIONS", async () => {
    await admin(t.app, `/admin/v1/Accounts/${a.accountSid}`, { AllowedCountries: ["GB", "US", "AU", "DE"] });
    for (const to of ["+449098790000", "+19002001234", "+611900123456", "+499001234567"]) {
      const res = await send(t, a, { From: a.ownedNumber, To: to, Text: "win" });
      expect(res.statusCode, to).toBe(400);
      expect(res.json()).toStrictEqual(refusal("DestinationNotAllowed", "To", new RegExp(`^To \\${to} is a premium-rate number`)));
      const allowed = await send(open, a, { From: a.ownedNumber, To: to, Text: "win" });
      expect(allowed.statusCode, allowed.body).toBe(200);
    }
  });

  it("the deployment's own numbers (pool and owned, any account's) are never a destination", async () => {
    const [pool] = await addPoolNumbers(t.app, 1, 80);
    // A fresh account: no AllowedCountries of its own, and `open` sets no deployment default.
    const c = await createTenant(t.app);
    for (const to of [pool, b.ownedNumber, c.ownedNumber]) {
      const res = await send(open, c, { From: c.ownedNumber, To: to, Text: "loop" });
      expect(res.statusCode, to).toBe(400);
      expect(res.json()).toStrictEqual(refusal("DestinationNotAllowed", "To", new RegExp(`^To \\${to} is one of this service's own numbers`)));
    }
  });

  it("a forward of a reply to a destination refused since: kept as a Failed message with ErrorCode DestinationNotAllowed", async () => {
    await addPoolNumbers(t.app, 1, 90);
    await admin(t.app, `/admin/v1/Accounts/${a.accountSid}`, { AllowedCountries: ["US", "AU"] });
    const recipient = "+12025550177";
    const out = await send(t, a, { From: "", To: recipient, Text: "Reply to this", ForwardToSms: "+61412000299" });
    expect(out.statusCode, out.body).toBe(200);
    // The operator narrows the account to the US: Australia is refused from now on.
    await admin(t.app, `/admin/v1/Accounts/${a.accountSid}`, { AllowedCountries: ["US"] });
    await simulatorInbound(t.app, recipient, out.json().From, "yes please");
    const list = await t.app.inject({ method: "GET", url: `/v2/Properties/${a.propertySid}/Messages?Status=Failed`, headers: { authorization: a.auth } });
    const forward = list.json().Messages.find((m: { To: string }) => m.To === "+61412000299");
    expect(forward).toMatchObject({ Direction: "Transmit", Status: "Failed", ErrorCode: "DestinationNotAllowed", Text: "yes please" });
  });
});
