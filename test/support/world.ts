/**
 * Accounts with one resource of every kind and state, made through the API itself: what the
 * fuzz tests aim their Sids at and what the tenant-isolation matrix attacks.
 */
import type { FastifyInstance } from "fastify";
import { addPoolNumbers, admin, createTenant, type Tenant } from "./harness.js";

/** A tenant with resources of every kind in every interesting state. */
export interface RichTenant extends Tenant {
  /** The main property (SMS enabled) and a second one that is not. */
  properties: { main: string; disabled: string };
  messages: {
    /** Scheduled, from the owned number: cancelable. */
    scheduled: string;
    /** Sent at once: Processing (no dispatcher runs). */
    processing: string;
    /** Scheduled from a leased pool number (alphanumeric From to a US recipient). */
    leased: string;
    canceled: string;
    /** A reply to the leased message: Direction Receive, Status Received. */
    received: string;
  };
  addresses: { active: string; pending: string; rejected: string };
  /** Sender IDs (AU): one registered by the operator, one waiting for review. */
  senderIds: { registered: string; pending: string };
  /** One more Pending sender ID, outside `senderIds`: the one a test of the withdrawal itself withdraws. */
  spareSenderId: string;
  /** Owned numbers (E164): the first has the active address and a Friendly name. */
  numbers: string[];
  /** The pool number leased to this tenant's recipient. */
  leasedNumber: string;
  /** The recipient of the leased message (who replied). */
  leasedRecipient: string;
  /** Strings only this tenant's data holds: none may appear in an answer to anyone else. */
  secrets: string[];
}

let seq = 0;

async function call(app: FastifyInstance, method: "GET" | "POST" | "DELETE", url: string, auth: string, body?: object): Promise<any> {
  const res = await app.inject({ method, url, headers: { authorization: auth }, ...(body ? { payload: body } : {}) });
  if (res.statusCode !== 200) throw new Error(`${method} ${url} → ${res.statusCode} ${res.body}`);
  return res.json();
}

/**
 * Creates a tenant with every kind of resource. The app needs a started simulator carrier
 * (createTestApp with `engine: { loops: false }`) for the reply; `label` marks its data.
 */
export async function createRichTenant(app: FastifyInstance, label: string, nowSeconds: number): Promise<RichTenant> {
  const t = await createTenant(app);
  const n = ++seq;
  const disabled = await admin(app, `/admin/v1/Accounts/${t.accountSid}/Properties`, { Name: `${label} off`, SmsEnabled: false });
  const second = `+4477008${String(process.pid % 100).padStart(2, "0")}${String(n).padStart(3, "0")}`;
  await admin(app, "/admin/v1/Numbers", { Number: second, AccountSid: t.accountSid });
  await addPoolNumbers(app, 1, 100 + n);

  const add = (body: object) => call(app, "POST", `/v2/Accounts/${t.accountSid}/Addresses`, t.auth, body).then((a) => a.AddressSid as string);
  const active = await add({ Line1: `${label} secret line`, City: "San Francisco", CountryCode: "US", PostalCode: "94103", Friendly: `${label} home` });
  const pending = await add({ Line1: `${label} pending line`, City: "San Francisco", CountryCode: "US" });
  const rejected = await add({ Line1: `${label} rejected line`, City: "San Francisco", CountryCode: "US" });
  await admin(app, `/admin/v1/Addresses/${rejected}/Review`, { Status: "Rejected" });
  await call(app, "POST", `/v2/Numbers/${t.ownedNumber.slice(1)}`, t.auth, { Friendly: `${label} desk`, AddressSid: active });

  const apply = (senderId: string) =>
    call(app, "POST", `/v2/Accounts/${t.accountSid}/SenderIds`, t.auth, { SenderId: senderId, Country: "AU", UseCase: `${label} secret use` }).then(
      (x) => x.SenderIdSid as string,
    );
  const registered = await apply(`${label}Reg`.slice(-11));
  await admin(app, `/admin/v1/SenderIds/${registered}/Review`, { Status: "Registered" });
  const pendingSenderId = await apply(`${label}Pend`.slice(-11));
  const spareSenderId = await apply(`${label}Spare`.slice(-11));

  // A ledger entry whose Reference is a secret: another tenant's BalanceEntries must never show it.
  await admin(app, `/admin/v1/Accounts/${t.accountSid}/BalanceEntries`, { Type: "TopUp", Amount: "25.00", Reference: `${label} secret invoice` });

  const send = (body: object) => call(app, "POST", `/v2/Properties/${t.propertySid}/Messages`, t.auth, body).then((m) => m);
  const later = nowSeconds + 3600;
  const scheduled = (await send({ From: t.ownedNumber, To: "+447700900123", Text: `${label} secret scheduled`, Schedule: later })).MessageSid;
  const processing = (await send({ From: "Acme", To: "+447700900124", Text: `${label} secret now` })).MessageSid;
  const recipient = `+1415555${String(1000 + n).padStart(4, "0")}`;
  const leasedMsg = await send({ From: "Acme", To: recipient, Text: `${label} secret leased`, Schedule: later });
  const canceled = (await send({ From: t.ownedNumber, To: "+447700900125", Text: `${label} secret canceled`, Schedule: later })).MessageSid;
  await call(app, "DELETE", `/v2/Messages/${canceled}`, t.auth);
  const reply = await admin(app, "/admin/v1/Simulator/Inbound", { From: recipient, To: leasedMsg.From, Text: `${label} secret reply` });
  if (reply.InReplyTo !== leasedMsg.MessageSid) throw new Error(`the reply did not match the lease: ${JSON.stringify(reply)}`);

  return {
    ...t,
    properties: { main: t.propertySid, disabled: disabled.PropertySid },
    messages: { scheduled, processing, leased: leasedMsg.MessageSid, canceled, received: reply.MessageSid },
    addresses: { active, pending, rejected },
    senderIds: { registered, pending: pendingSenderId },
    spareSenderId,
    numbers: [t.ownedNumber, second],
    leasedNumber: leasedMsg.From,
    leasedRecipient: recipient,
    secrets: [`${label} secret`, `${label} home`, `${label} desk`, `${label} pending line`, `${label} rejected line`, t.token, t.webhookSecret],
  };
}
