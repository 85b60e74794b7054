/**
 * Issue 27, defect 6: a reply-forwarding loop. A `ForwardToSms` naming one of the deployment's own
 * numbers (a pool number, or any account's owned number) would bring the forwarded reply back in
 * as a new reply, to be forwarded again without end. It is refused at send time (400
 * DestinationNotAllowed naming ForwardToSms, nothing stored); and, for numbers added after the
 * send, a forward to one of our numbers is not sent when the reply comes, and a reply that comes
 * FROM one of our numbers is stored but never forwarded.
 */
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { admin, ADMIN_TOKEN, addPoolNumbers, createTenant, createTestApp, type Tenant, type TestApp, simulatorInbound } from "../support/harness.js";

const SID = (prefix: string) => expect.stringMatching(new RegExp(`^${prefix}[A-Z0-9]{30}$`));

let t: TestApp;
let a: Tenant;
let b: Tenant;
let pool: string[];
const logLines: string[] = [];
let seq = 0;
/** A fresh US handset (blank From and alphanumeric From alike go out leased there). */
const usNumber = () => `+1415555${String(4000 + ++seq).padStart(4, "0")}`;
/** A fresh UK handset. */
const ukNumber = () => `+447911${String(500000 + ++seq).padStart(6, "0")}`;

beforeAll(async () => {
  const log = pino({ level: "info" }, { write: (l: string) => void logLines.push(l) });
  t = await createTestApp({ engine: { log }, webhookAllowPrivate: true, config: { sendRateLimit: 0 } });
  a = await createTenant(t.app);
  b = await createTenant(t.app);
  pool = await addPoolNumbers(t.app, 3, 60);
}, 120_000);
afterAll(async () => {
  await t?.close();
});

function send(body: object, tenant = a) {
  return t.app.inject({ method: "POST", url: `/v2/Properties/${tenant.propertySid}/Messages`, headers: { authorization: tenant.auth }, payload: body });
}
async function messageCount(): Promise<number> {
  const rows = await t.db.orm.em.fork().execute<{ n: string | number }[]>("select count(*) as n from messages");
  return Number(rows[0].n);
}
/** The handset sends an SMS into the service (POST /admin/v1/Simulator/Inbound). */
async function inbound(from: string, to: string, text: string): Promise<{ MessageSid: string; InReplyTo: string }> {
  return simulatorInbound(t.app, from, to, text);
}
/** What the simulated network delivered to a handset. */
async function handset(number: string): Promise<{ From: string; To: string; Text: string }[]> {
  const res = await t.app.inject({
    method: "GET",
    url: `/admin/v1/Simulator/Handsets/${number.slice(1)}/Messages`,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().Messages;
}
/** Submits every due message and waits for the simulator's reports. */
async function drain(): Promise<void> {
  while ((await t.engine!.dispatcher.tick()) > 0) {
    /* every due message */
  }
  const em = t.db.orm.em.fork();
  for (let i = 0; i < 1000; i++) {
    const rows = await em.execute<{ n: string | number }[]>(
      "select count(*) as n from messages where direction = 'Transmit' and status in ('Processing', 'Submitted')",
    );
    if (Number(rows[0].n) === 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("delivery reports did not come");
}
/** The account's Transmit messages carrying `text` (a forwarded SMS has its reply's text). */
async function transmitted(text: string, tenant = a): Promise<any[]> {
  const res = await t.app.inject({
    method: "GET",
    url: `/v2/Properties/${tenant.propertySid}/Messages?Direction=Transmit`,
    headers: { authorization: tenant.auth },
  });
  return res.json().Messages.filter((m: { Text: string }) => m.Text === text);
}

function expectRefused(res: { statusCode: number; json(): any; body: string }, number: string): void {
  expect(res.statusCode, res.body).toBe(400);
  expect(res.json()).toEqual({
    ResponseStatus: {
      ErrorCode: "DestinationNotAllowed",
      Message: `ForwardToSms ${number} is one of this service's own numbers: a reply forwarded there would come back as a new reply and be forwarded again without end. Forward to a number outside this service, or leave ForwardToSms blank.`,
      Errors: [
        {
          FieldName: "ForwardToSms",
          ErrorCode: "DestinationNotAllowed",
          Message: `ForwardToSms ${number} is one of this service's own numbers: a reply forwarded there would come back as a new reply and be forwarded again without end. Forward to a number outside this service, or leave ForwardToSms blank.`,
        },
      ],
    },
  });
}

describe("ForwardToSms naming one of the deployment's own numbers is refused at send time (issue 27)", () => {
  it("the probe's loop: ForwardToSms = the pool number the send itself would get is 400 DestinationNotAllowed, and nothing is stored", async () => {
    const before = await messageCount();
    // The lowest free pool number for a fresh recipient: the one the send is given.
    expectRefused(await send({ To: usNumber(), Text: "Reply to this", ForwardToSms: pool[0] }), pool[0]);
    expect(await messageCount()).toBe(before);
  });

  it("any pool number, the account's own number and another account's owned number alike; a leased or an alphanumeric From alike", async () => {
    const before = await messageCount();
    for (const number of [pool[2], a.ownedNumber, b.ownedNumber]) {
      expectRefused(await send({ To: usNumber(), Text: "x", ForwardToSms: number }), number);
      // Lease options are validated whenever given, even when the message does not go out leased.
      expectRefused(await send({ From: "Acme", To: ukNumber(), Text: "x", ForwardToSms: number }), number);
    }
    expect(await messageCount()).toBe(before);
  });

  it("in a batch, only the item that names one is refused; a number outside the service is accepted", async () => {
    const outside = ukNumber();
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/BatchMessages`,
      headers: { authorization: a.auth },
      payload: {
        Messages: [
          { To: usNumber(), Text: "one", ForwardToSms: b.ownedNumber },
          { To: usNumber(), Text: "two", ForwardToSms: outside },
          { To: usNumber(), Text: "three" },
        ],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const [refused, accepted, plain] = res.json().Messages;
    expect(refused.ResponseStatus.ErrorCode).toBe("DestinationNotAllowed");
    expect(refused.ResponseStatus.Errors[0].FieldName).toBe("ForwardToSms");
    expect(accepted.MessageSid).toEqual(SID("MG"));
    expect(plain.MessageSid).toEqual(SID("MG"));
    expect((await transmitted("one")).length).toBe(0);
  });
});

describe("numbers that became ours after the send (issue 27)", () => {
  it("a reply FROM one of our numbers is stored but not forwarded (no SMS, no e-mail), and logged at info without its text", async () => {
    const handsetNumber = usNumber();
    const forwardTo = ukNumber();
    const sent = await send({ To: handsetNumber, Text: "Ping", ForwardToSms: forwardTo, ForwardToEmail: "inbox@example.com" });
    expect(sent.statusCode, sent.body).toBe(200);
    const lease = sent.json().From;
    await drain();
    // The recipient's number joins the deployment: now an SMS from it is one of ours coming back.
    await admin(t.app, "/admin/v1/Numbers", { Number: handsetNumber, AccountSid: b.accountSid });
    logLines.length = 0;

    const reply = await inbound(handsetNumber, lease, "secret loop text");
    expect(reply).toEqual({ MessageSid: SID("MG"), InReplyTo: sent.json().MessageSid });
    const stored = await t.app.inject({ method: "GET", url: `/v2/Messages/${reply.MessageSid}`, headers: { authorization: a.auth } });
    expect(stored.json()).toMatchObject({ Direction: "Receive", Status: "Received", From: handsetNumber, To: lease, Text: "secret loop text" });
    await drain();
    expect(await handset(forwardTo)).toEqual([]);
    expect(await transmitted("secret loop text")).toEqual([]);
    const emails = await t.app.inject({ method: "GET", url: "/admin/v1/Emails", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(emails.json().Emails.filter((e: { MessageSid: string }) => e.MessageSid === reply.MessageSid)).toEqual([]);

    const logged = logLines.map((l) => JSON.parse(l)).filter((l) => l.messageSid === reply.MessageSid);
    expect(logged).toEqual([
      expect.objectContaining({ level: 30, messageSid: reply.MessageSid, inReplyTo: sent.json().MessageSid, from: handsetNumber, to: lease }),
    ]);
    expect(logLines.join("\n")).not.toContain("secret loop text");
  });

  it("a ForwardToSms that became one of our numbers is not sent when the reply comes: Failed with DestinationNotAllowed, the reply kept", async () => {
    const recipient = usNumber();
    const forwardTo = `+1202555${String(90 + (seq % 9)).padStart(4, "0")}`;
    const sent = await send({ To: recipient, Text: "Ping", ForwardToSms: forwardTo });
    expect(sent.statusCode, sent.body).toBe(200);
    await drain();
    await admin(t.app, "/admin/v1/Numbers", { Number: forwardTo });

    const reply = await inbound(recipient, sent.json().From, "would loop");
    expect(reply.InReplyTo).toBe(sent.json().MessageSid);
    await drain();
    expect(await handset(forwardTo)).toEqual([]);
    expect(await transmitted("would loop")).toMatchObject([{ From: recipient, To: forwardTo, Status: "Failed", ErrorCode: "DestinationNotAllowed" }]);
  });

  it("an ordinary forward still goes out", async () => {
    const recipient = usNumber();
    const forwardTo = ukNumber();
    const sent = await send({ To: recipient, Text: "Ping", ForwardToSms: forwardTo });
    expect(sent.statusCode, sent.body).toBe(200);
    await drain();
    await inbound(recipient, sent.json().From, "Pong");
    await drain();
    expect(await handset(forwardTo)).toMatchObject([{ From: recipient, To: forwardTo, Text: "Pong" }]);
  });
});
