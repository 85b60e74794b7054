/**
 * A reply through real Kannel 1.4.5 (bearerbox + smsbox + fakesmsc, test/support/kannel.ts) to a
 * leased pool number, forwarded all three ways the outbound message asked: by SMS back out through
 * Kannel to fakesmsc, by e-mail to a real SMTP server (smtp-server), and as a signed Response
 * webhook to a real HTTP receiver. The delivery engine runs its loops on the real clock.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import nodemailer from "nodemailer";
import { SMTPServer } from "smtp-server";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addPoolNumbers, createTenant, type Tenant } from "../support/harness.js";
import { type KannelStack, type RunningKannel, startKannelStack } from "../support/kannel.js";
import { without } from "../support/system-packages.js";

const SECRET = "kannel-replies-secret-0123456789abcdef";

interface Hook {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}
interface Mail {
  envelopeFrom: string;
  envelopeTo: string[];
  raw: string;
}

let kannel: RunningKannel | undefined;

async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${kannel ? await kannel.diagnostics() : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The body of a single-part mail, transfer-decoded. */
function mailBody(raw: string): string {
  const split = raw.indexOf("\r\n\r\n");
  const head = raw
    .slice(0, split)
    .replace(/\r\n[ \t]+/g, " ")
    .toLowerCase();
  let body = raw.slice(split + 4);
  if (head.includes("content-transfer-encoding: quoted-printable")) {
    body = Buffer.from(
      body.replace(/=\r?\n/g, "").replace(/=([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))),
      "latin1",
    ).toString("utf8");
  } else if (head.includes("content-transfer-encoding: base64")) {
    body = Buffer.from(body.replace(/\s+/g, ""), "base64").toString("utf8");
  }
  return body;
}

describe.skipIf(without("kannel"))("CARRIER=kannel: a reply to a leased sender is forwarded by SMS, e-mail and webhook", () => {
  let stack: KannelStack;
  let app: FastifyInstance;
  let tenant: Tenant;
  let pool: string[];
  let smtp: SMTPServer;
  let hookServer: Server;
  let hookBase: string;
  let mailTransport: ReturnType<typeof nodemailer.createTransport>;
  const mails: Mail[] = [];
  const hooks: Hook[] = [];

  beforeAll(async () => {
    smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ["STARTTLS"],
      disableReverseLookup: true,
      logger: false,
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on("data", (c: Buffer) => chunks.push(c));
        stream.on("end", () => {
          mails.push({
            envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
            envelopeTo: session.envelope.rcptTo.map((r) => r.address),
            raw: Buffer.concat(chunks).toString("utf8"),
          });
          callback();
        });
      },
    });
    await new Promise<void>((resolve, reject) => {
      smtp.once("error", reject);
      smtp.listen(0, "127.0.0.1", () => resolve());
    });
    const smtpPort = (smtp.server.address() as AddressInfo).port;

    hookServer = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        hooks.push({ method: req.method ?? "", path: (req.url ?? "/").split("?")[0]!, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => hookServer.listen(0, "127.0.0.1", resolve));
    hookBase = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}`;

    mailTransport = nodemailer.createTransport({ host: "127.0.0.1", port: smtpPort, secure: false, ignoreTLS: true });
    stack = await startKannelStack({ secret: SECRET, mailTransport });
    ({ app, kannel } = stack);
    tenant = await createTenant(app);
    pool = await addPoolNumbers(app, 1, 40);
  }, 60_000);

  afterAll(async () => {
    await stack?.stop();
    kannel = undefined;
    mailTransport?.close();
    hookServer?.closeAllConnections();
    await new Promise((r) => (hookServer ? hookServer.close(r) : r(undefined)));
    await new Promise((r) => (smtp ? smtp.close(() => r(undefined)) : r(undefined)));
  });

  it("forwards the handset's reply to the ForwardToSms handset via fakesmsc, to ForwardToEmail over SMTP and as a signed Response webhook", async () => {
    const recipient = "+14155550177";
    const forwardTo = "+447700900177";
    const toEmail = "ops-kannel@example.com";
    const fromEmail = "desk-kannel@switchboard.invalid"; // a domain MAIL_FROM_DOMAINS allows (its default)
    const res = await app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: {
        From: "",
        To: recipient,
        Text: "Your table is booked. Reply to change.",
        ForwardToSms: forwardTo,
        ForwardToEmail: toEmail,
        ForwardFromEmail: fromEmail,
        WebhookUri: `${hookBase}/responses`,
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const out = res.json();
    expect(out.From).toBe(pool[0]);

    await waitFor("fakesmsc to receive the outbound SMS", () => kannel!.fakesmsc.messages().find((m) => m.to === recipient));

    const reply = `Make it 8pm please ${Date.now()}`;
    await kannel!.fakesmsc.sendMo(recipient, pool[0]!, reply);

    // (a) The forwarded SMS reaches the ForwardToSms handset through Kannel.
    const fwd = await waitFor("fakesmsc to receive the forwarded SMS", () => kannel!.fakesmsc.messages().find((m) => m.to === forwardTo));
    expect(fwd).toMatchObject({ from: recipient, to: forwardTo, text: reply });

    // (b) The forwarded e-mail reaches the SMTP server from ForwardFromEmail.
    const mail = await waitFor("the forwarded e-mail", () => mails.find((m) => m.envelopeTo.includes(toEmail)));
    expect(mail.envelopeFrom).toBe(fromEmail);
    expect(mail.envelopeTo).toEqual([toEmail]);
    expect(mailBody(mail.raw)).toContain(reply);

    // (c) The signed Response webhook.
    const call = await waitFor("the Response webhook", () => hooks.find((h) => h.path === "/responses"));
    expect(call.method).toBe("POST");
    const fields = new Webhook(tenant.webhookSecret).verify(call.body, {
      "webhook-id": String(call.headers["webhook-id"]),
      "webhook-timestamp": String(call.headers["webhook-timestamp"]),
      "webhook-signature": String(call.headers["webhook-signature"]),
    }) as Record<string, unknown>;
    expect(fields).toMatchObject({
      Type: "Response",
      InReplyTo: out.MessageSid,
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: recipient,
      To: pool[0],
      Text: reply,
    });
    expect(hooks.filter((h) => h.path === "/responses")).toHaveLength(1);
  }, 60_000);

  // docs/api.md#opt-out-stop-start-help: keywords come through Kannel as through any carrier, to a lease or an owned number.
  it("a STOP through Kannel opts the handset out and is answered once through Kannel; a near miss is only a reply", async () => {
    const recipient = "+14155550178";
    const res = await app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth },
      payload: { From: "", To: recipient, Text: "Your table is booked.", WebhookUri: `${hookBase}/keywords` },
    });
    expect(res.statusCode, res.body).toBe(200);
    await waitFor("fakesmsc to receive the outbound SMS", () => kannel!.fakesmsc.messages().find((m) => m.to === recipient));
    const optOuts = async () =>
      (await app.inject({ method: "GET", url: `/v2/Accounts/${tenant.accountSid}/OptOuts`, headers: { authorization: tenant.auth } })).json().OptOuts;
    const answers = () => kannel!.fakesmsc.messages().filter((m) => m.to === recipient && m.from === pool[0] && m.text.startsWith("You have been"));

    await kannel!.fakesmsc.sendMo(recipient, pool[0]!, "STOP please");
    await waitFor("the near miss's Response webhook", () => hooks.find((h) => h.path === "/keywords" && JSON.parse(h.body).Text === "STOP please"));
    expect(await optOuts()).toEqual([]);

    await kannel!.fakesmsc.sendMo(recipient, pool[0]!, "  sToP ");
    const answer = await waitFor("the STOP's answer through Kannel", () => answers()[0]);
    expect(answer.text).toBe("You have been unsubscribed from Tenant and will get no more messages from it. Reply START to subscribe again.");
    expect(await optOuts()).toEqual([{ Number: recipient, Source: "Keyword", Created: expect.any(Number) }]);
    const hook = await waitFor("the STOP's Response webhook", () => hooks.find((h) => h.path === "/keywords" && JSON.parse(h.body).OptOutType === "Stop"));
    expect(JSON.parse(hook.body)).toMatchObject({ Text: "  sToP ", From: recipient, To: pool[0] });

    // To one of the account's own numbers: no lease, the same keyword handling.
    await kannel!.fakesmsc.sendMo(recipient, tenant.ownedNumber, "start");
    await waitFor("the START's answer from the owned number", () =>
      kannel!.fakesmsc.messages().find((m) => m.to === recipient && m.from === tenant.ownedNumber),
    );
    expect(await optOuts()).toEqual([]);
    expect(answers()).toHaveLength(1);
  }, 60_000);
});
