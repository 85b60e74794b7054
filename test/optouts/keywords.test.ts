/**
 * STOP, START and HELP through the simulator (docs/api.md#opt-out-stop-start-help):
 * a keyword texted as a reply to an account's lease, or to one of its own numbers, changes that
 * account's opt-out list, fails what is still queued to the number, and is answered once by an
 * SMS from the number it was sent to; the reply is still stored and its Response webhook carries
 * OptOutType. Every call goes through REST; the workers are driven by hand.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEYWORDS } from "../../src/optouts/keywords.js";
import { dbKind } from "../support/db.js";
import {
  admin,
  addPoolNumbers,
  createTenant,
  createTestApp,
  type Tenant,
  type TestApp,
  simulatorInbound,
  drainDeliveries,
  handsetTexts,
} from "../support/harness.js";

let t: TestApp;
let pool: string;
let hookServer: Server;
let hookUrl = "";
const hooks: Record<string, unknown>[] = [];

let seq = 0;
/** A fresh Australian handset. */
const handset = () => `+6141${String(process.pid % 1000).padStart(3, "0")}${String(++seq).padStart(4, "0")}`;

beforeAll(async () => {
  t = await createTestApp({ engine: true, webhookAllowPrivate: true });
  // The others are for more leases to the same handset (a pool number is leased to a recipient once at a time).
  [pool] = await addPoolNumbers(t.app, 3);
  hookServer = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      hooks.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((resolve) => hookServer.listen(0, "127.0.0.1", resolve));
  hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}/hook`;
});

afterAll(async () => {
  await t?.close();
  await new Promise<void>((resolve) => (hookServer ? hookServer.close(() => resolve()) : resolve()));
});

async function get(tenant: Tenant, url: string): Promise<any> {
  const res = await t.app.inject({ method: "GET", url, headers: { authorization: tenant.auth } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** Sends from a leased sender (a pool number) to the handset and hands it to the carrier; returns its Sid. */
async function leasedSend(tenant: Tenant, to: string, extra: object = {}): Promise<string> {
  const res = await t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: tenant.auth },
    payload: { To: to, Text: "Your table is booked", WebhookUri: hookUrl, ...extra },
  });
  expect(res.statusCode, res.body).toBe(200);
  await drain();
  return res.json().MessageSid;
}

/** The handset texts the service. */
async function inbound(from: string, to: string, text: string): Promise<{ MessageSid: string; InReplyTo: string }> {
  return simulatorInbound(t.app, from, to, text);
}

/** Submits every due message, waits for the simulator's reports (it delivers to the handset then), calls the due webhooks. */
async function drain(): Promise<void> {
  await drainDeliveries(t);
  await t.engine!.webhooks.tick();
}

/** What the simulated network delivered to the handset from `from`, texts in order. */
const delivered = (number: string, from: string) => handsetTexts(t.app, number, from);

const optOuts = async (tenant: Tenant) =>
  (await get(tenant, `/v2/Accounts/${tenant.accountSid}/OptOuts`)).OptOuts as { Number: string; Source: string; Created: number }[];
const optedOut = async (tenant: Tenant, number: string) => (await optOuts(tenant)).some((o) => o.Number === number);

const STOP_ANSWER = "You have been unsubscribed from Tenant and will get no more messages from it. Reply START to subscribe again.";
const START_ANSWER = "You have been subscribed to Tenant again. Reply STOP to unsubscribe, HELP for help.";
const HELP_ANSWER = "Tenant: reply STOP to unsubscribe from these messages, START to subscribe again.";

/** Several casings of a keyword, with spaces, a tab or a newline around it. */
const casings = (word: string) => [word, ` ${word.toLowerCase()}  `, `\t${word[0]}${word.slice(1).toLowerCase()}\n`];

describe(`keywords through the simulator (${dbKind()})`, () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t.app);
  });

  it("every opt-out keyword in every casing opts the sender out and is answered once", async () => {
    for (const word of KEYWORDS.Stop) {
      for (const text of casings(word)) {
        const phone = handset();
        await leasedSend(tenant, phone);
        const reply = await inbound(phone, pool, text);
        expect(reply.MessageSid).toMatch(/^MG/);
        await drain();
        expect(await delivered(phone, pool), JSON.stringify(text)).toEqual(["Your table is booked", STOP_ANSWER]);
        expect((await optOuts(tenant)).find((o) => o.Number === phone)).toEqual({
          Number: phone,
          Source: "Keyword",
          Created: Math.floor(t.clock.now().getTime() / 1000),
        });
        // The reply itself is stored as any reply, and its Response webhook says what it was.
        expect((await get(tenant, `/v2/Messages/${reply.MessageSid}`)).Status).toBe("Received");
        expect(hooks.find((h) => h.MessageSid === reply.MessageSid)).toMatchObject({ Type: "Response", Text: text, OptOutType: "Stop" });
      }
    }
  });

  it("START and its synonyms remove the opt-out; HELP and INFO change nothing; each answered once", async () => {
    for (const word of KEYWORDS.Start) {
      for (const text of casings(word)) {
        const phone = handset();
        await leasedSend(tenant, phone);
        await inbound(phone, pool, "STOP");
        await drain();
        expect(await optedOut(tenant, phone)).toBe(true);
        const reply = await inbound(phone, pool, text);
        await drain();
        expect(await optedOut(tenant, phone)).toBe(false);
        expect(await delivered(phone, pool)).toEqual(["Your table is booked", STOP_ANSWER, START_ANSWER]);
        expect(hooks.find((h) => h.MessageSid === reply.MessageSid)).toMatchObject({ OptOutType: "Start" });
      }
    }
    for (const word of KEYWORDS.Help) {
      for (const text of casings(word)) {
        const phone = handset();
        await leasedSend(tenant, phone);
        const reply = await inbound(phone, pool, text);
        await drain();
        expect(await optedOut(tenant, phone)).toBe(false);
        expect(await delivered(phone, pool)).toEqual(["Your table is booked", HELP_ANSWER]);
        expect(hooks.find((h) => h.MessageSid === reply.MessageSid)).toMatchObject({ OptOutType: "Help" });
      }
    }
  });

  it("a near miss is no keyword: no opt-out, no answer, OptOutType empty", async () => {
    for (const text of ["STOP please", "stop.", "S TOP", "STOPP", "please stop", "", "HELP ME"]) {
      const phone = handset();
      await leasedSend(tenant, phone);
      const reply = await inbound(phone, pool, text);
      await drain();
      expect(await optedOut(tenant, phone), JSON.stringify(text)).toBe(false);
      expect(await delivered(phone, pool)).toEqual(["Your table is booked"]);
      expect(hooks.find((h) => h.MessageSid === reply.MessageSid)).toMatchObject({ OptOutType: "" });
    }
  });

  it("the scope is the account: another account's list and queue are untouched", async () => {
    const other = await createTenant(t.app);
    const phone = handset();
    await leasedSend(tenant, phone);
    const later = { Schedule: Math.floor(t.clock.now().getTime() / 1000) + 86_400, Text: "Reminder" };
    const mine = await leasedSend(tenant, phone, later);
    const theirs = await leasedSend(other, phone, later);
    const theirPool = (await get(other, `/v2/Messages/${theirs}`)).From;
    expect(theirPool).not.toBe(pool);
    await inbound(phone, pool, "STOP");
    await drain();
    expect(await optedOut(tenant, phone)).toBe(true);
    expect(await optOuts(other)).toEqual([]);
    // The message scheduled before the STOP will not go out; the other account's will.
    expect(await get(tenant, `/v2/Messages/${mine}`)).toMatchObject({ Status: "Failed", ErrorCode: "RecipientOptedOut" });
    expect(await get(other, `/v2/Messages/${theirs}`)).toMatchObject({ Status: "Scheduled", ErrorCode: "" });
    t.clock.advance(86_401_000);
    await drain();
    expect(await delivered(phone, pool)).toEqual(["Your table is booked", STOP_ANSWER]);
    expect(await delivered(phone, theirPool)).toEqual(["Reminder"]);
    expect(await get(tenant, `/v2/Messages/${mine}`)).toMatchObject({ Status: "Failed", ErrorCode: "RecipientOptedOut" });
  });

  it("the account's own texts answer, and a keyword to one of its own numbers counts too", async () => {
    const own = await createTenant(t.app);
    await admin(t.app, `/admin/v1/Accounts/${own.accountSid}`, { OptOutText: "Bye from Acme. START to rejoin.", HelpText: "Acme help: 1300 000 000" });
    const phone = handset();
    await inbound(phone, own.ownedNumber, " Stop ");
    await drain();
    await inbound(phone, own.ownedNumber, "help");
    await drain();
    expect(await optOuts(own)).toEqual([{ Number: phone, Source: "Keyword", Created: Math.floor(t.clock.now().getTime() / 1000) }]);
    expect(await delivered(phone, own.ownedNumber)).toEqual(["Bye from Acme. START to rejoin.", "Acme help: 1300 000 000"]);
    // From one of the deployment's own numbers: not acted on.
    await inbound(tenant.ownedNumber, own.ownedNumber, "STOP");
    await drain();
    expect((await optOuts(own)).map((o) => o.Number)).toEqual([phone]);
    expect(await delivered(tenant.ownedNumber, own.ownedNumber)).toEqual([]);
    // Not a keyword: kept apart as before, no answer.
    await inbound(phone, own.ownedNumber, "hello?");
    await drain();
    expect(await delivered(phone, own.ownedNumber)).toHaveLength(2);
  });

  it("OptOutKeywords false: a STOP is only a reply (no opt-out, no answer, OptOutType empty)", async () => {
    const own = await createTenant(t.app);
    const updated = await admin(t.app, `/admin/v1/Accounts/${own.accountSid}`, { OptOutKeywords: false });
    expect(updated.OptOutKeywords).toBe(false);
    const phone = handset();
    await leasedSend(own, phone);
    const reply = await inbound(phone, pool, "STOP");
    await inbound(phone, own.ownedNumber, "STOP");
    await drain();
    expect(await optOuts(own)).toEqual([]);
    expect(await delivered(phone, pool)).toEqual(["Your table is booked"]);
    expect(await delivered(phone, own.ownedNumber)).toEqual([]);
    expect(hooks.find((h) => h.MessageSid === reply.MessageSid)).toMatchObject({ OptOutType: "" });
  });
});
