/**
 * The Fone Dynamics compatible REST format, at the HTTP layer (issue 21): an account with
 * RestCompatibility "FoneDynamics" gets {"Message": …} from send, get and cancel, a record that
 * also carries Scheduled, a batch answered as a bare array with flat failed items, and a body
 * without a charset that is not UTF-8 read as ISO-8859-1. Everything else, and every account left
 * on "None", answers as before. The last block is a client written the way Fone Dynamics' SDK
 * reads responses, against a listening server.
 */
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { changedTables, dbDigest } from "../support/surface.js";

let t: TestApp;
let fone: Tenant;
let plain: Tenant;
let now: number;

beforeAll(async () => {
  t = await createTestApp();
  fone = await createTenant(t.app);
  await admin(t.app, `/admin/v1/Accounts/${fone.accountSid}`, { RestCompatibility: "FoneDynamics" });
  plain = await createTenant(t.app);
  now = Math.floor(t.clock.now().getTime() / 1000);
});
afterAll(async () => {
  await t?.close();
});

function call(tenant: Tenant, method: "GET" | "POST" | "DELETE", url: string, payload?: string | Buffer | object, contentType = "application/json") {
  return t.app.inject({
    method,
    url,
    headers: { authorization: tenant.auth, ...(payload === undefined ? {} : { "content-type": contentType }) },
    ...(payload === undefined ? {} : { payload: payload as string }),
  });
}

const send = (tenant: Tenant, body: object, headers: Record<string, string> = {}) =>
  t.app.inject({ method: "POST", url: `/v2/Properties/${tenant.propertySid}/Messages`, headers: { authorization: tenant.auth, ...headers }, payload: body });

const MESSAGE_KEYS = ["AccountSid", "From", "MessageSid", "PropertySid", "Text", "To"];

describe("a FoneDynamics account's message responses", () => {
  it('send and scheduled send: {"Message": <the six fields>}', async () => {
    for (const body of [
      { From: "Acme", To: "+447700900123", Text: "now" },
      { From: "Acme", To: "+447700900124", Text: "later", Schedule: now + 3600 },
    ]) {
      const res = await send(fone, body);
      expect(res.statusCode, res.body).toBe(200);
      const json = res.json();
      expect(Object.keys(json)).toStrictEqual(["Message"]);
      expect(Object.keys(json.Message).sort()).toStrictEqual(MESSAGE_KEYS);
      expect(json.Message).toMatchObject({ AccountSid: fone.accountSid, PropertySid: fone.propertySid, From: "Acme", To: body.To, Text: body.Text });
    }
  });

  it('get and cancel: {"Message": <the record>} with Scheduled equal to Schedule', async () => {
    const schedule = now + 7200;
    const sid = (await send(fone, { From: "Acme", To: "+447700900125", Text: "to cancel", Schedule: schedule })).json().Message.MessageSid;
    const plainRecord = (await call(plain, "GET", `/v2/Messages/${sid}`)).statusCode; // another account: 404, not a leak
    expect(plainRecord).toBe(404);

    const got = await call(fone, "GET", `/v2/Messages/${sid}`);
    expect(got.statusCode).toBe(200);
    const record = got.json().Message;
    expect(Object.keys(got.json())).toStrictEqual(["Message"]);
    expect(record).toMatchObject({ MessageSid: sid, Status: "Scheduled", Schedule: schedule, Scheduled: schedule, Text: "to cancel" });

    const canceled = await call(fone, "DELETE", `/v2/Messages/${sid}`);
    expect(canceled.statusCode).toBe(200);
    expect(canceled.json().Message).toMatchObject({ MessageSid: sid, Status: "Canceled", Schedule: schedule, Scheduled: schedule });

    // The same record for a None account: bare, no Scheduled.
    const mine = (await send(plain, { From: "Acme", To: "+447700900126", Text: "x", Schedule: schedule })).json();
    const bare = (await call(plain, "GET", `/v2/Messages/${mine.MessageSid}`)).json();
    expect(bare.MessageSid).toBe(mine.MessageSid);
    expect(bare.Schedule).toBe(schedule);
    expect("Scheduled" in bare).toBe(false);
    expect("Message" in bare).toBe(false);
  });

  it("batch: a bare array in request order; a failed item is flat, with To, From and Text as received", async () => {
    const url = `/v2/Properties/${fone.propertySid}/BatchMessages`;
    const body = {
      Messages: [
        { From: "Acme", To: "+447700900127", Text: "one" },
        { From: "Acme", To: "not a number", Text: "two" },
        { Text: "three" },
        { From: "Acme", To: "+447700900128", Text: "four" },
      ],
    };
    const res = await call(fone, "POST", url, body);
    expect(res.statusCode, res.body).toBe(200);
    const items = res.json();
    expect(Array.isArray(items)).toBe(true);
    expect(items).toHaveLength(4);
    expect(Object.keys(items[0]).sort()).toStrictEqual(MESSAGE_KEYS);
    expect(items[0]).toMatchObject({ To: "+447700900127", Text: "one" });
    expect(Object.keys(items[1])).toStrictEqual(["ErrorCode", "Message", "From", "To", "Text"]);
    expect(items[1]).toMatchObject({ From: "Acme", To: "not a number", Text: "two" });
    expect(items[1].ErrorCode).not.toBe("");
    expect(items[2]).toStrictEqual({ ErrorCode: expect.any(String), Message: expect.any(String), From: "", To: "", Text: "three" });
    expect(items[3]).toMatchObject({ To: "+447700900128", Text: "four", MessageSid: expect.any(String) });

    // An idempotent replay answers in the same format, every item included, and stores nothing.
    const keyed = { ...body, Messages: body.Messages.slice(0, 2) };
    const first = await t.app.inject({ method: "POST", url, headers: { authorization: fone.auth, "idempotency-key": "fone-batch-1" }, payload: keyed });
    expect(first.statusCode).toBe(200);
    const before = await dbDigest(t.db.orm);
    const again = await t.app.inject({ method: "POST", url, headers: { authorization: fone.auth, "idempotency-key": "fone-batch-1" }, payload: keyed });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toStrictEqual(first.json());
    expect(Array.isArray(again.json())).toBe(true);
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
  });

  it('errors keep {"ResponseStatus"}; 401 keeps its Basic challenge; list, addresses and numbers are unchanged', async () => {
    const bad = await send(fone, { From: "Acme", To: "+447700900129" });
    expect(bad.statusCode).toBe(400);
    expect(Object.keys(bad.json())).toStrictEqual(["ResponseStatus"]);
    const anon = await t.app.inject({ method: "POST", url: `/v2/Properties/${fone.propertySid}/Messages`, payload: { To: "+447700900129", Text: "x" } });
    expect(anon.statusCode).toBe(401);
    expect(anon.headers["www-authenticate"]).toBe('Basic realm="switchboard"');
    const list = (await call(fone, "GET", `/v2/Properties/${fone.propertySid}/Messages`)).json();
    expect(Object.keys(list).sort()).toStrictEqual(["Messages", "TotalCount"]);
    for (const record of list.Messages) expect(record.Scheduled).toBe(record.Schedule);
    const numbers = await call(fone, "GET", `/v2/Accounts/${fone.accountSid}/Numbers`);
    const plainNumbers = await call(plain, "GET", `/v2/Accounts/${plain.accountSid}/Numbers`);
    expect(Object.keys(numbers.json())).toStrictEqual(Object.keys(plainNumbers.json()));
  });

  it("RPC is unchanged for a FoneDynamics account", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: "/switchboard.v2.MessagingService/SendMessage",
      headers: { authorization: fone.auth, "content-type": "application/json" },
      payload: { PropertySid: fone.propertySid, From: "Acme", To: "+447700900130", Text: "rpc" },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(Object.keys(res.json()).sort()).toStrictEqual(MESSAGE_KEYS);
  });
});

describe("body charsets", () => {
  const latin1Body = (to: string) => Buffer.from(`{"From":"Acme","To":"${to}","Text":"caf\u00e9"}`, "latin1"); // é as the single byte E9
  const textOf = async (tenant: Tenant, sid: string) => (await call(tenant, "GET", `/v2/Messages/${sid}`)).json();

  it("a FoneDynamics account: a body without a charset that is not UTF-8 is read as ISO-8859-1", async () => {
    const res = await call(fone, "POST", `/v2/Properties/${fone.propertySid}/Messages`, latin1Body("+447700900131"));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().Message.Text).toBe("café");
    const record = (await textOf(fone, res.json().Message.MessageSid)).Message;
    expect(record).toMatchObject({ Text: "café", Encoding: "GSM7" });
    // Valid UTF-8 is always UTF-8: "cafÃ©" is not what a client sending é as C3 A9 meant.
    const utf8 = await call(
      fone,
      "POST",
      `/v2/Properties/${fone.propertySid}/Messages`,
      Buffer.from('{"From":"Acme","To":"+447700900132","Text":"café"}', "utf8"),
    );
    expect(utf8.json().Message.Text).toBe("café");
  });

  it("an ordinary account: the same bytes are 400 MalformedRequest and nothing is stored", async () => {
    const before = await dbDigest(t.db.orm);
    const res = await call(plain, "POST", `/v2/Properties/${plain.propertySid}/Messages`, latin1Body("+447700900133"));
    expect(res.statusCode).toBe(400);
    expect(res.json().ResponseStatus.ErrorCode).toBe("MalformedRequest");
    expect(res.json().ResponseStatus.Message).toContain("not valid UTF-8 at byte offset");
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
  });

  it("charset=iso-8859-1 (or latin1) is honoured for every account; charset=utf-8 with Latin-1 bytes is still a 400", async () => {
    for (const tenant of [plain, fone]) {
      for (const ct of ["application/json; charset=iso-8859-1", 'application/json; charset="latin1"']) {
        const res = await call(tenant, "POST", `/v2/Properties/${tenant.propertySid}/Messages`, latin1Body("+447700900134"), ct);
        expect(res.statusCode, res.body).toBe(200);
        const sent = tenant === fone ? res.json().Message : res.json();
        expect(sent.Text).toBe("café");
      }
      const strict = await call(
        tenant,
        "POST",
        `/v2/Properties/${tenant.propertySid}/Messages`,
        latin1Body("+447700900135"),
        "application/json; charset=utf-8",
      );
      expect(strict.statusCode).toBe(400);
      expect(strict.json().ResponseStatus.ErrorCode).toBe("MalformedRequest");
    }
  });
});

/** What Fone Dynamics' SDK models: a send answer with a Message inside, and a batch as a list. */
interface SdkMessage {
  MessageSid: string;
  AccountSid: string;
  PropertySid: string;
  From: string;
  To: string;
  Text: string;
  Scheduled?: number;
  Status?: string;
}
interface SdkMessageResponse {
  Message?: SdkMessage;
}
interface SdkBatchItem extends Partial<SdkMessage> {
  ErrorCode?: string;
  Message?: string;
}

/** A client that reads responses the way the SDK does: anything else reads as "nothing sent". */
class SdkLikeClient {
  constructor(
    private readonly base: string,
    private readonly auth: string,
  ) {}

  private async post(path: string, body: object): Promise<unknown> {
    // The SDK encodes its JSON as ISO-8859-1 under a bare application/json.
    const res = await fetch(this.base + path, {
      method: "POST",
      headers: { authorization: this.auth, "content-type": "application/json" },
      body: Buffer.from(JSON.stringify(body), "latin1"),
    });
    return res.json();
  }

  async sendMessage(propertySid: string, to: string, text: string, schedule?: number): Promise<SdkMessage | null> {
    const res = (await this.post(`/v2/Properties/${propertySid}/Messages`, {
      From: "Acme",
      To: to,
      Text: text,
      ...(schedule ? { Schedule: schedule } : {}),
    })) as SdkMessageResponse;
    return res.Message ?? null;
  }

  async getMessage(sid: string): Promise<SdkMessage | null> {
    const res = await fetch(`${this.base}/v2/Messages/${sid}`, { headers: { authorization: this.auth } });
    return ((await res.json()) as SdkMessageResponse).Message ?? null;
  }

  async sendBatch(propertySid: string, items: { To: string; Text: string }[]): Promise<{ sent: SdkMessage[]; failed: SdkBatchItem[] }> {
    const res = await this.post(`/v2/Properties/${propertySid}/BatchMessages`, { Messages: items.map((i) => ({ From: "Acme", ...i })) });
    const list = Array.isArray(res) ? (res as SdkBatchItem[]) : [];
    // An item counts as sent when it has a MessageSid.
    return { sent: list.filter((i) => i.MessageSid) as SdkMessage[], failed: list.filter((i) => !i.MessageSid) };
  }
}

describe("a client written the way the SDK reads responses, against a listening server", () => {
  let base: string;
  beforeAll(async () => {
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });

  it("sends, reads back and batch-sends through the compatible shapes", async () => {
    const client = new SdkLikeClient(base, fone.auth);
    const sent = await client.sendMessage(fone.propertySid, "+447700900136", "Grüße aus Köln", now + 600);
    expect(sent).not.toBeNull();
    expect(sent!.Text).toBe("Grüße aus Köln");
    const read = await client.getMessage(sent!.MessageSid);
    expect(read).toMatchObject({ MessageSid: sent!.MessageSid, Scheduled: now + 600, Status: "Scheduled", Text: "Grüße aus Köln" });
    const batch = await client.sendBatch(fone.propertySid, [
      { To: "+447700900137", Text: "a" },
      { To: "bogus", Text: "b" },
      { To: "+447700900138", Text: "c" },
    ]);
    expect(batch.sent.map((m) => m.To)).toStrictEqual(["+447700900137", "+447700900138"]);
    expect(batch.failed).toHaveLength(1);
    expect(batch.failed[0]).toMatchObject({ To: "bogus", Text: "b", ErrorCode: expect.any(String) });

    // The same client against an ordinary account finds nothing where it looks: the format is per account.
    const ordinary = new SdkLikeClient(base, plain.auth);
    expect(await ordinary.sendMessage(plain.propertySid, "+447700900139", "plain")).toBeNull();
  });
});
