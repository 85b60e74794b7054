/**
 * Smart encoding (issue 45, docs/api.md#smart-encoding): the account's SmartEncoding and a send's
 * override, the stored text, NumSegments and SmartEncoded as the API reads them back, on REST,
 * a batch item and gRPC; a FoneDynamics account's record keeps its exact shape.
 */
import type { AddressInfo } from "node:net";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const HEAD = "\u201CHello\u201D \u2013 it\u2019s ";
/** 160 characters: curly quotes, an en dash and a curly apostrophe, the rest GSM-7. */
const CURLY = HEAD + "x".repeat(160 - HEAD.length);
const REPLACED = `"Hello" - it's ${"x".repeat(160 - HEAD.length)}`;

describe(`smart encoding (${dbKind()})`, () => {
  let t: TestApp;
  let a: Tenant;

  beforeAll(async () => {
    t = await createTestApp({ now: T0 });
    a = await createTenant(t.app);
  }, 120_000);

  afterAll(async () => {
    await t?.close();
  });

  async function send(who: Tenant, body: object) {
    const res = await t.app.inject({ method: "POST", url: `/v2/Properties/${who.propertySid}/Messages`, headers: { authorization: who.auth }, payload: body });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }
  async function record(who: Tenant, sid: string) {
    const res = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: who.auth } });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }

  it("a new account has it on: 160 characters with curly quotes and an en dash are 1 GSM-7 segment, stored as sent to the carrier", async () => {
    const account = await admin(t.app, `/admin/v1/Accounts/${a.accountSid}`, {});
    expect(account.SmartEncoding).toBe(true);
    const sent = await send(a, { From: a.ownedNumber, To: "+61412000301", Text: CURLY });
    expect(sent).toStrictEqual({
      MessageSid: sent.MessageSid,
      AccountSid: a.accountSid,
      PropertySid: a.propertySid,
      From: a.ownedNumber,
      To: "+61412000301",
      Text: REPLACED,
    });
    expect(await record(a, sent.MessageSid)).toMatchObject({ Text: REPLACED, NumSegments: 1, Encoding: "GSM7", SmartEncoded: true });
  });

  it("SmartEncoding false on the send: the same text is 3 UCS-2 segments, untouched", async () => {
    const sent = await send(a, { From: a.ownedNumber, To: "+61412000302", Text: CURLY, SmartEncoding: false });
    expect(sent.Text).toBe(CURLY);
    expect(await record(a, sent.MessageSid)).toMatchObject({ Text: CURLY, NumSegments: 3, Encoding: "UCS2", SmartEncoded: false });
  });

  it("a text that needs no replacing, and one with an emoji, are left as they are (SmartEncoded false)", async () => {
    const plain = await send(a, { From: a.ownedNumber, To: "+61412000303", Text: "Plain GSM-7 text" });
    expect(await record(a, plain.MessageSid)).toMatchObject({ Text: "Plain GSM-7 text", NumSegments: 1, Encoding: "GSM7", SmartEncoded: false });
    const emoji = `${HEAD}\u{1F600}`;
    const kept = await send(a, { From: a.ownedNumber, To: "+61412000304", Text: emoji });
    expect(await record(a, kept.MessageSid)).toMatchObject({ Text: emoji, NumSegments: 1, Encoding: "UCS2", SmartEncoded: false });
  });

  it("the operator turns it off for the account: sends keep their text unless the send asks; a batch item and gRPC alike", async () => {
    const b = await createTenant(t.app);
    const off = await admin(t.app, `/admin/v1/Accounts/${b.accountSid}`, { SmartEncoding: false });
    expect(off.SmartEncoding).toBe(false);
    const kept = await send(b, { From: b.ownedNumber, To: "+61412000305", Text: CURLY });
    expect(await record(b, kept.MessageSid)).toMatchObject({ Text: CURLY, NumSegments: 3, Encoding: "UCS2", SmartEncoded: false });
    const asked = await send(b, { From: b.ownedNumber, To: "+61412000306", Text: CURLY, SmartEncoding: true });
    expect(await record(b, asked.MessageSid)).toMatchObject({ Text: REPLACED, NumSegments: 1, Encoding: "GSM7", SmartEncoded: true });

    const batch = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${b.propertySid}/BatchMessages`,
      headers: { authorization: b.auth },
      payload: {
        Messages: [
          { From: b.ownedNumber, To: "+61412000307", Text: CURLY, SmartEncoding: true },
          { From: b.ownedNumber, To: "+61412000308", Text: CURLY },
        ],
      },
    });
    expect(batch.statusCode, batch.body).toBe(200);
    const [one, two] = batch.json().Messages;
    expect(await record(b, one.MessageSid)).toMatchObject({ Text: REPLACED, NumSegments: 1, SmartEncoded: true });
    expect(await record(b, two.MessageSid)).toMatchObject({ Text: CURLY, NumSegments: 3, SmartEncoded: false });

    await t.app.listen({ port: 0, host: "127.0.0.1" });
    const port = (t.app.server.address() as AddressInfo).port;
    const client = createClient(MessagingService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` }));
    const headers = { authorization: b.auth };
    const viaGrpc = await client.sendMessage(
      { propertySid: b.propertySid, from: b.ownedNumber, to: "+61412000309", text: CURLY, smartEncoding: true },
      { headers },
    );
    expect(viaGrpc.text).toBe(REPLACED);
    const rec = await client.getMessage({ messageSid: viaGrpc.messageSid }, { headers });
    expect({ numSegments: rec.numSegments, encoding: rec.encoding, smartEncoded: rec.smartEncoded }).toEqual({
      numSegments: 1,
      encoding: "GSM7",
      smartEncoded: true,
    });
  });

  it("a FoneDynamics account's record has no SmartEncoded (its SDKs' exact shape); the text is still replaced", async () => {
    const f = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${f.accountSid}`, { RestCompatibility: "FoneDynamics" });
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${f.propertySid}/Messages`,
      headers: { authorization: f.auth },
      payload: { From: f.ownedNumber, To: "+61412000310", Text: CURLY },
    });
    expect(res.statusCode, res.body).toBe(200);
    const sid = res.json().Message.MessageSid;
    const got = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: f.auth } });
    const message = got.json().Message;
    expect(message).toMatchObject({ Text: REPLACED, NumSegments: 1, Encoding: "GSM7" });
    expect(Object.keys(message)).not.toContain("SmartEncoded");
    const list = await t.app.inject({ method: "GET", url: `/v2/Properties/${f.propertySid}/Messages`, headers: { authorization: f.auth } });
    for (const m of list.json().Messages) expect(Object.keys(m)).not.toContain("SmartEncoded");
  });

  it("a new account may be created with it off", async () => {
    const acc = await admin(t.app, "/admin/v1/Accounts", { Name: "Plain", SmartEncoding: false });
    const got = await t.app.inject({ method: "GET", url: `/admin/v1/Accounts/${acc.AccountSid}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(got.json().SmartEncoding).toBe(false);
  });
});
