/**
 * Registered sender IDs (issue 45, docs/api.md#sender-ids): the resource (apply, list, withdraw),
 * the operator's review, one live application per name and country, and the send rule
 * SENDER_ID_REGISTRATION on every path: REST, gRPC (Connect), a batch item, a forwarded reply,
 * and the `label` mode's record flag.
 */
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import {
  ADMIN_TOKEN,
  addPoolNumbers,
  admin,
  createTenant,
  createTestApp,
  drainDeliveries,
  registerSenderId,
  rpcRefusal,
  sendOk,
  simulatorInbound,
  type Tenant,
  type TestApp,
} from "../support/harness.js";

const AU = "+61412345601";
const AU2 = "+61412345602";
const NZ = "+64211234567";
const US = "+12025550155";
const NOW = Math.floor(new Date("2026-11-22T12:00:00Z").getTime() / 1000);

const notRegistered = (field: string, name: string, country = "AU") =>
  `${field} "${name}" is not a sender ID registered to this account for ${country}, where registration is required; apply for it (POST /v2/Accounts/{AccountSid}/SenderIds) and send once the operator has registered it, or use one of your numbers.`;
const refusal = (field: string, name: string) => ({
  ResponseStatus: {
    ErrorCode: "SenderIdNotRegistered",
    Message: notRegistered(field, name),
    Errors: [{ FieldName: field, ErrorCode: "SenderIdNotRegistered", Message: notRegistered(field, name) }],
  },
});

describe(`registered sender IDs (${dbKind()})`, () => {
  let db: TestOrm;
  let t: TestApp;
  let a: Tenant;
  let b: Tenant;

  beforeAll(async () => {
    db = await createTestOrm();
    // SENDER_ID_REGISTRATION's default: AU=require; NZ unlisted.
    t = await createTestApp({ db, engine: true });
    a = await createTenant(t.app);
    b = await createTenant(t.app);
  });
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  const apply = (tenant: Tenant, body: Record<string, unknown>) =>
    t.app.inject({ method: "POST", url: `/v2/Accounts/${tenant.accountSid}/SenderIds`, headers: { authorization: tenant.auth }, payload: body });
  const review = (sid: string, status: string) =>
    t.app.inject({
      method: "POST",
      url: `/admin/v1/SenderIds/${sid}/Review`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { Status: status },
    });
  const send = (tenant: Tenant, payload: Record<string, unknown>) =>
    t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { Text: "hello", ...payload },
    });
  const stored = async (from: string) =>
    (await executeBound<{ n: number }>(db.orm.em.fork(), "select count(*)::int as n from messages where sender = ?", [from]))[0].n;

  it("an application is Pending; the operator registers it; then a send from it to AU is 200, letter case aside", async () => {
    const res = await apply(a, { SenderId: "AcmeBank", Country: "au", UseCase: "  One-time codes for sign-in  " });
    expect(res.statusCode, res.body).toBe(200);
    const app = res.json();
    expect(app).toEqual({
      SenderIdSid: expect.stringMatching(/^SI[A-Z0-9]{30}$/),
      AccountSid: a.accountSid,
      SenderId: "AcmeBank",
      Country: "AU",
      UseCase: "One-time codes for sign-in",
      Status: "Pending",
      Created: NOW,
    });
    // Pending is not registered yet.
    const pending = await send(a, { From: "AcmeBank", To: AU });
    expect([pending.statusCode, pending.json()]).toEqual([400, refusal("From", "AcmeBank")]);

    const queue = await t.app.inject({ method: "GET", url: "/admin/v1/SenderIds", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(queue.json().SenderIds.map((s: { SenderIdSid: string }) => s.SenderIdSid)).toContain(app.SenderIdSid);
    const approved = await review(app.SenderIdSid, "Registered");
    expect([approved.statusCode, approved.json()]).toEqual([200, { ...app, Status: "Registered" }]);
    // The same decision again is a 200 that changes nothing; another one is 409.
    expect((await review(app.SenderIdSid, "Registered")).statusCode).toBe(200);
    const other = await review(app.SenderIdSid, "Rejected");
    expect([other.statusCode, other.json().ResponseStatus.ErrorCode]).toEqual([409, "SenderIdNotPending"]);

    const ok = await send(a, { From: "AcmeBank", To: AU });
    expect(ok.statusCode, ok.body).toBe(200);
    const upper = await send(a, { From: "ACMEBANK", To: AU });
    expect(upper.statusCode, upper.body).toBe(200);
    // The record of a checked send says so; one to an unlisted country has no SenderIdRegistered.
    const rec = await t.app.inject({ method: "GET", url: `/v2/Messages/${ok.json().MessageSid}`, headers: { authorization: a.auth } });
    expect(rec.json()).toMatchObject({ From: "AcmeBank", To: AU, SenderIdRegistered: true });
  });

  it("an unregistered name to AU is 400 SenderIdNotRegistered naming From, nothing stored; to NZ it is sent (unchecked)", async () => {
    const res = await send(a, { From: "Unlisted", To: AU });
    expect([res.statusCode, res.json()]).toEqual([400, refusal("From", "Unlisted")]);
    expect(await stored("Unlisted")).toBe(0);
    const nz = await send(a, { From: "Unlisted", To: NZ });
    expect(nz.statusCode, nz.body).toBe(200);
    const rec = await t.app.inject({ method: "GET", url: `/v2/Messages/${nz.json().MessageSid}`, headers: { authorization: a.auth } });
    expect(rec.json()).not.toHaveProperty("SenderIdRegistered");
    // An E164 From to AU is not checked.
    expect(await sendOk(t.app, a, { To: AU2 })).toMatch(/^MG/);
  });

  it("another account's application for the same name (any case) and country is 409 SenderIdTaken naming it; in another country it is its own", async () => {
    const res = await apply(b, { SenderId: "ACMEBANK", Country: "AU", UseCase: "Marketing" });
    const message = `Sender ID "ACMEBANK" is already applied for or registered in AU (letter case aside); a sender ID belongs to one account per country.`;
    expect([res.statusCode, res.json()]).toEqual([
      409,
      { ResponseStatus: { ErrorCode: "SenderIdTaken", Message: message, Errors: [{ FieldName: "SenderId", ErrorCode: "SenderIdTaken", Message: message }] } },
    ]);
    // b cannot send as a's registered name.
    const sent = await send(b, { From: "AcmeBank", To: AU });
    expect([sent.statusCode, sent.json()]).toEqual([400, refusal("From", "AcmeBank")]);
    expect((await apply(b, { SenderId: "AcmeBank", Country: "GB", UseCase: "Marketing" })).statusCode).toBe(200);
  });

  it("two accounts applying for one name at the same moment: one 200, the other 409 SenderIdTaken (the unique index decides)", async () => {
    const [x, y] = await Promise.all([
      apply(a, { SenderId: "RaceName", Country: "AU", UseCase: "Race" }),
      apply(b, { SenderId: "racename", Country: "AU", UseCase: "Race" }),
    ]);
    expect([x.statusCode, y.statusCode].sort()).toEqual([200, 409]);
    expect([x, y].find((r) => r.statusCode === 409)!.json().ResponseStatus.ErrorCode).toBe("SenderIdTaken");
  });

  it("a rejected application frees the name; a withdrawn (deleted) registration makes sends from it unregistered again", async () => {
    const first = (await apply(b, { SenderId: "Freed", Country: "AU", UseCase: "x" })).json();
    expect((await review(first.SenderIdSid, "Rejected")).json().Status).toBe("Rejected");
    const sid = await registerSenderId(t.app, a, "Freed");
    expect((await send(a, { From: "Freed", To: AU })).statusCode).toBe(200);
    const list = await t.app.inject({ method: "GET", url: `/v2/Accounts/${a.accountSid}/SenderIds?Status=Registered`, headers: { authorization: a.auth } });
    expect(list.json().SenderIds.map((s: { SenderId: string }) => s.SenderId)).toEqual(["AcmeBank", "Freed"]);
    const del = await t.app.inject({ method: "DELETE", url: `/v2/Accounts/${a.accountSid}/SenderIds/${sid}`, headers: { authorization: a.auth } });
    expect([del.statusCode, del.json()]).toEqual([200, { SenderIdSid: sid }]);
    // Another account's Sid, or one already deleted: 404.
    const again = await t.app.inject({ method: "DELETE", url: `/v2/Accounts/${a.accountSid}/SenderIds/${sid}`, headers: { authorization: a.auth } });
    expect(again.statusCode).toBe(404);
    const foreign = await t.app.inject({
      method: "DELETE",
      url: `/v2/Accounts/${b.accountSid}/SenderIds/${first.SenderIdSid}`,
      headers: { authorization: a.auth },
    });
    expect(foreign.statusCode).toBe(404);
    expect((await send(a, { From: "Freed", To: AU })).json()).toEqual(refusal("From", "Freed"));
  });

  it("every field is checked at once: SenderId by the alphanumeric From rule, Country ISO alpha-2, UseCase non-empty and at most 500 characters", async () => {
    const res = await apply(a, { SenderId: "Too-Long-Name!", Country: "XX", UseCase: "" });
    expect(res.statusCode).toBe(400);
    expect(res.json().ResponseStatus.Errors).toEqual([
      {
        FieldName: "SenderId",
        ErrorCode: "InvalidSenderId",
        Message:
          'SenderId "Too-Long-Name!" is not a valid alphanumeric sender ID: use 1 to 11 characters of A-Z, a-z, 0-9 and spaces, with at least one letter.',
      },
      { FieldName: "Country", ErrorCode: "InvalidCountryCode", Message: 'Country "XX" is not an ISO 3166-1 alpha-2 country code (e.g. GB, AU, US).' },
      { FieldName: "UseCase", ErrorCode: "MissingParameter", Message: "UseCase is required: what the account sends from this sender ID." },
    ]);
    expect((await apply(a, { SenderId: "Edge500", Country: "NZ", UseCase: "u".repeat(500) })).statusCode).toBe(200);
    const long = await apply(a, { SenderId: "Edge501", Country: "NZ", UseCase: "u".repeat(501) });
    expect([long.statusCode, long.json().ResponseStatus.Errors[0].FieldName]).toEqual([400, "UseCase"]);
  });

  it("a batch refuses only the unregistered item", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/BatchMessages`,
      headers: { authorization: a.auth },
      payload: {
        Messages: [
          { From: "AcmeBank", To: AU, Text: "ok" },
          { From: "Unlisted", To: AU, Text: "no" },
          { From: "Unlisted", To: NZ, Text: "nz" },
        ],
      },
    });
    expect(res.statusCode).toBe(200);
    const [sent, refused, nz] = res.json().Messages;
    expect(sent.MessageSid).toMatch(/^MG/);
    expect(refused).toEqual(refusal("From", "Unlisted"));
    expect(nz.MessageSid).toMatch(/^MG/);
  });

  it("a keyed send (the transaction's path) gets the same answer", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/Messages`,
      headers: { authorization: a.auth, "idempotency-key": "sid-1" },
      payload: { From: "Unlisted", To: AU, Text: "keyed" },
    });
    expect([res.statusCode, res.json()]).toEqual([400, refusal("From", "Unlisted")]);
  });

  it("over Connect: failed_precondition, as the error table says, with the same message", async () => {
    const base = await t.app.listen({ port: 0, host: "127.0.0.1" });
    const client = createClient(MessagingService, createConnectTransport({ baseUrl: base, httpVersion: "1.1" }));
    const headers = { authorization: a.auth };
    const err = await rpcRefusal(() => client.sendMessage({ propertySid: a.propertySid, from: "Unlisted", to: AU, text: "hi" }, { headers }));
    expect([Code[err.code], err.rawMessage]).toEqual(["FailedPrecondition", notRegistered("From", "Unlisted")]);
    const ok = await client.sendMessage({ propertySid: a.propertySid, from: "AcmeBank", to: AU, text: "hi" }, { headers });
    expect(ok.from).toBe("AcmeBank");
  });

  it("a reply forwarded by SMS from an unregistered alphanumeric ForwardFromSms to AU is kept Failed with SenderIdNotRegistered; a registered one is forwarded", async () => {
    const pool = await addPoolNumbers(t.app, 2, 60);
    const forward = async (forwardFromSms: string, recipient: string, forwardTo: string) => {
      const res = await send(a, { From: "", To: recipient, Text: "Reply to this", ForwardToSms: forwardTo, ForwardFromSms: forwardFromSms });
      expect(res.statusCode, res.body).toBe(200);
      expect(pool).toContain(res.json().From);
      await drainDeliveries(t);
      await simulatorInbound(t.app, recipient, res.json().From, "Yes please");
      const em = db.orm.em.fork();
      for (let i = 0; i < 500; i++) {
        const rows = await executeBound<{ status: string; error_code: string; sender: string; sender_id_registered: boolean | null }>(
          em,
          "select status, error_code, sender, sender_id_registered from messages where recipient = ? and in_reply_to is not null",
          [forwardTo],
        );
        if (rows.length > 0) return rows;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error("no forward stored");
    };
    expect(await forward("Unlisted", US, "+61412345611")).toEqual([
      { status: "Failed", error_code: "SenderIdNotRegistered", sender: "Unlisted", sender_id_registered: false },
    ]);
    expect(await forward("AcmeBank", "+12025550156", "+61412345612")).toEqual([
      { status: "Processing", error_code: "", sender: "AcmeBank", sender_id_registered: true },
    ]);
  });
});

describe(`SENDER_ID_REGISTRATION=AU=label (${dbKind()})`, () => {
  let t: TestApp;
  let a: Tenant;

  beforeAll(async () => {
    t = await createTestApp({ engine: true, config: { senderIdRegistration: new Map([["AU", "label"]]) } });
    a = await createTenant(t.app);
    await registerSenderId(t.app, a, "Known");
  });
  afterAll(async () => {
    await t?.close();
  });

  const record = async (sid: string) => (await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: a.auth } })).json();

  it("an unregistered name to AU is sent and its record says SenderIdRegistered: false; a registered one true; the one-statement and keyed paths alike", async () => {
    const plain = await sendOk(t.app, a, { From: "Stranger", To: AU });
    expect(await record(plain)).toMatchObject({ From: "Stranger", SenderIdRegistered: false });
    expect(await record(await sendOk(t.app, a, { From: "known", To: AU }))).toMatchObject({ SenderIdRegistered: true });
    const keyed = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/Messages`,
      headers: { authorization: a.auth, "idempotency-key": "label-1" },
      payload: { From: "Stranger", To: AU2, Text: "keyed" },
    });
    expect(keyed.statusCode, keyed.body).toBe(200);
    expect(await record(keyed.json().MessageSid)).toMatchObject({ SenderIdRegistered: false });
    // Unlisted country: no flag.
    expect(await record(await sendOk(t.app, a, { From: "Stranger", To: NZ }))).not.toHaveProperty("SenderIdRegistered");
  });

  it("a FoneDynamics account's record leaves SenderIdRegistered out", async () => {
    await admin(t.app, `/admin/v1/Accounts/${a.accountSid}`, { RestCompatibility: "FoneDynamics" });
    const sent = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/Messages`,
      headers: { authorization: a.auth },
      payload: { From: "Stranger", To: AU, Text: "hello" },
    });
    expect(sent.statusCode, sent.body).toBe(200);
    const sid = sent.json().Message.MessageSid;
    const rec = await t.app.inject({ method: "GET", url: `/v2/Messages/${sid}`, headers: { authorization: a.auth } });
    expect(rec.json().Message).toMatchObject({ From: "Stranger" });
    expect(rec.json().Message).not.toHaveProperty("SenderIdRegistered");
  });

  it("counts the unregistered sends it labelled in /metrics, by country", async () => {
    const res = await t.app.inject({ method: "GET", url: "/metrics" });
    expect(res.body).toMatch(/^switchboard_unregistered_sender_ids_total\{country="AU"\} 3$/m);
  });
});
