/**
 * Per-account send rate limits at their exact boundaries, on the injectable clock: 5 per second
 * with bursts of 5, the 429 with Retry-After, refill, per-account buckets, batch cost (N items
 * cost N, a batch over the burst goes on a full bucket and leaves a debt), nothing written on a
 * 429 (no message, no Idempotency-Key), the same refusal over Connect and gRPC, and the config.
 */
import type { AddressInfo } from "node:net";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { loadConfig } from "../../src/config.js";
import { IdempotencyKey } from "../../src/messaging/idempotency-key.entity.js";
import { Message } from "../../src/messaging/message.entity.js";
import { dbKind } from "../support/db.js";
import { createTenant, createTestApp, type Tenant, type TestApp, rpcRefusal } from "../support/harness.js";

let recipientSeq = 0;
const recipient = () => `+447911${String(++recipientSeq).padStart(6, "0")}`;
const body = (text = "hi") => ({ From: "Acme", To: recipient(), Text: text });

let t: TestApp;

function send(tenant: Tenant, headers: Record<string, string> = {}, payload: object = body()) {
  return t.app.inject({ method: "POST", url: `/v2/Properties/${tenant.propertySid}/Messages`, headers: { authorization: tenant.auth, ...headers }, payload });
}

function batch(tenant: Tenant, items: object[]) {
  return t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/BatchMessages`,
    headers: { authorization: tenant.auth },
    payload: { Messages: items },
  });
}

/** Sends n messages one by one and expects each to pass. */
async function sendOk(tenant: Tenant, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await send(tenant);
    expect(res.statusCode, res.body).toBe(200);
  }
}

/** The 429 of the documented shape, with its Retry-After (whole seconds) and Message. */
function expectLimited(res: LightMyRequestResponse, tenant: Tenant, retryAfter: number, asks?: number): void {
  expect(res.statusCode, res.body).toBe(429);
  expect(res.headers["retry-after"]).toBe(String(retryAfter));
  expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
  const asking = asks === undefined ? "" : ` This request asks for ${asks}.`;
  expect(res.json()).toStrictEqual({
    ResponseStatus: {
      ErrorCode: "RateLimited",
      Message: `Too many messages: account ${tenant.accountSid} may send 5 per second, in bursts of up to 5.${asking} Retry after ${retryAfter} second${retryAfter === 1 ? "" : "s"}.`,
      Errors: [],
    },
  });
}

async function messagesOf(tenant: Tenant): Promise<number> {
  return t.db.orm.em.fork().count(Message, { accountSid: tenant.accountSid });
}

beforeAll(async () => {
  t = await createTestApp({ config: { sendRateLimit: 5, sendRateBurst: 5 } });
});

afterAll(async () => {
  await t?.close();
});

describe(`send rate limit, 5 per second with bursts of 5 (${dbKind()})`, () => {
  it("5 sends pass; the 6th is 429 RateLimited with Retry-After: 1, and writes nothing", async () => {
    const a = await createTenant(t.app);
    await sendOk(a, 5);
    expectLimited(await send(a), a, 1);
    expectLimited(await send(a), a, 1);
    expect(await messagesOf(a)).toBe(5);
  });

  it("refills at the rate, to the burst and no further", async () => {
    const a = await createTenant(t.app);
    await sendOk(a, 5);
    t.clock.advance(199); // 0.995 of a token
    expectLimited(await send(a), a, 1);
    t.clock.advance(1); // 200 ms at 5 per second: one token
    await sendOk(a, 1);
    expectLimited(await send(a), a, 1);
    t.clock.advance(1000);
    await sendOk(a, 5);
    expectLimited(await send(a), a, 1);
    t.clock.advance(60_000); // a minute idle still holds only the burst
    await sendOk(a, 5);
    expectLimited(await send(a), a, 1);
    expect(await messagesOf(a)).toBe(16);
  });

  it("each account has its own bucket: B is unaffected by A", async () => {
    const a = await createTenant(t.app);
    const b = await createTenant(t.app);
    await sendOk(a, 5);
    expectLimited(await send(a), a, 1);
    await sendOk(b, 5);
    expectLimited(await send(b), b, 1);
    expectLimited(await send(a), a, 1);
  });

  it("a batch of N costs N; a refused batch is refused whole and charges nothing", async () => {
    const a = await createTenant(t.app);
    const three = [body(), body(), body()];
    const first = await batch(a, three);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json().Messages.map((m: any) => typeof m.MessageSid)).toEqual(["string", "string", "string"]);
    // Two tokens left, three asked: one more token is 200 ms away.
    expectLimited(await batch(a, [body(), body(), body()]), a, 1, 3);
    await sendOk(a, 2); // the refused batch took nothing
    expectLimited(await send(a), a, 1);
    t.clock.advance(600); // three tokens
    expect((await batch(a, [body(), body(), body()])).statusCode).toBe(200);
    expectLimited(await send(a), a, 1);
    expect(await messagesOf(a)).toBe(8);
  });

  it("a batch item refused for its content still counts; a batch refused for its size does not", async () => {
    const a = await createTenant(t.app);
    const res = await batch(a, [body(), { To: "not-a-number", Text: "x" }]);
    expect(res.statusCode).toBe(200);
    expect(res.json().Messages[1].ResponseStatus.ErrorCode).toBe("InvalidRecipient");
    await sendOk(a, 3);
    expectLimited(await send(a), a, 1);
    // Empty and over-100 batches are 400s whatever the bucket holds.
    expect((await batch(a, [])).json().ResponseStatus.ErrorCode).toBe("MissingParameter");
    expect(
      (
        await batch(
          a,
          Array.from({ length: 101 }, () => body()),
        )
      ).json().ResponseStatus.ErrorCode,
    ).toBe("InvalidParameter");
    t.clock.advance(1000);
    await sendOk(a, 5);
  });

  it("a batch larger than the burst goes through on a full bucket and leaves a debt", async () => {
    const a = await createTenant(t.app);
    const eight = Array.from({ length: 8 }, () => body());
    const res = await batch(a, eight);
    expect(res.statusCode).toBe(200);
    expect(res.json().Messages.every((m: any) => typeof m.MessageSid === "string")).toBe(true);
    // Three tokens in debt: one send needs four more, 800 ms.
    expectLimited(await send(a), a, 1);
    expectLimited(await batch(a, eight), a, 2, 8); // the batch waits for a full bucket: 8 tokens, 1.6 s
    t.clock.advance(799);
    expectLimited(await send(a), a, 1);
    t.clock.advance(1);
    await sendOk(a, 1);
    expectLimited(await send(a), a, 1);
    expect(await messagesOf(a)).toBe(9);
  });

  it("a refused send does not use up its Idempotency-Key; a replay is a send like any other", async () => {
    const a = await createTenant(t.app);
    await sendOk(a, 5);
    const key = { "idempotency-key": "order-42" };
    // A replay is the same request under the same key (another request would be 422 IdempotencyKeyReused).
    const order = body("order 42");
    expectLimited(await send(a, key, order), a, 1);
    const em = t.db.orm.em.fork();
    expect(await em.count(IdempotencyKey, { accountSid: a.accountSid })).toBe(0);
    expect(await messagesOf(a)).toBe(5);

    t.clock.advance(1000);
    const created = await send(a, key, order);
    expect(created.statusCode).toBe(200);
    const replay = await send(a, key, order);
    expect(replay.json().MessageSid).toBe(created.json().MessageSid);
    expect(await messagesOf(a)).toBe(6);
    await sendOk(a, 3); // 5 tokens: the first send with the key, its replay, and these three
    expectLimited(await send(a, key, order), a, 1);
  });

  it("other calls are not limited", async () => {
    const a = await createTenant(t.app);
    await sendOk(a, 5);
    for (let i = 0; i < 10; i++) {
      const res = await t.app.inject({ method: "GET", url: `/v2/Properties/${a.propertySid}/Messages`, headers: { authorization: a.auth } });
      expect(res.statusCode).toBe(200);
    }
  });
});

describe(`send rate limit over Connect and gRPC (${dbKind()})`, () => {
  let sessions: Http2SessionManager;
  const clients = {} as Record<"connect" | "grpc", Client<typeof MessagingService>>;
  let baseUrl: string;

  beforeAll(async () => {
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    sessions = new Http2SessionManager(baseUrl);
    clients.connect = createClient(MessagingService, createConnectTransport({ baseUrl, httpVersion: "1.1" }));
    clients.grpc = createClient(MessagingService, createGrpcTransport({ baseUrl, sessionManager: sessions }));
  });

  afterAll(() => {
    sessions?.abort();
  });

  const rpcBody = (tenant: Tenant) => ({ propertySid: tenant.propertySid, from: "Acme", to: recipient(), text: "hi" });
  const headers = (tenant: Tenant) => ({ authorization: tenant.auth });

  for (const name of ["connect", "grpc"] as const) {
    it(`${name}: ResourceExhausted with ErrorInfo RateLimited and retry-after; the bucket is the same as REST's`, async () => {
      const a = await createTenant(t.app);
      await sendOk(a, 3); // REST
      const client = clients[name];
      await client.sendMessage(rpcBody(a), { headers: headers(a) });
      await client.sendBatch({ propertySid: a.propertySid, messages: [rpcBody(a)] }, { headers: headers(a) });
      const err = await rpcRefusal(() => client.sendMessage(rpcBody(a), { headers: headers(a) }));
      expect(err.code).toBe(Code.ResourceExhausted);
      expect(err.rawMessage).toBe(`Too many messages: account ${a.accountSid} may send 5 per second, in bursts of up to 5. Retry after 1 second.`);
      expect(err.findDetails(ErrorInfoSchema).map((d) => [d.reason, d.domain])).toEqual([["RateLimited", "switchboard"]]);
      expect(err.metadata.get("retry-after")).toBe("1");

      t.clock.advance(400); // two tokens; a batch of three is refused whole
      const batchErr = await rpcRefusal(() =>
        client.sendBatch({ propertySid: a.propertySid, messages: [rpcBody(a), rpcBody(a), rpcBody(a)] }, { headers: headers(a) }),
      );
      expect(batchErr.code).toBe(Code.ResourceExhausted);
      expect(batchErr.rawMessage).toContain("This request asks for 3.");
      expect(batchErr.metadata.get("retry-after")).toBe("1");
      expect(await messagesOf(a)).toBe(5);
    });
  }

  it("connect over HTTP: status 429, Retry-After header and the JSON error with its detail", async () => {
    const a = await createTenant(t.app);
    await sendOk(a, 5);
    const res = await fetch(`${baseUrl}/switchboard.v2.MessagingService/SendMessage`, {
      method: "POST",
      headers: { authorization: a.auth, "content-type": "application/json" },
      body: JSON.stringify({ PropertySid: a.propertySid, From: "Acme", To: recipient(), Text: "hi" }),
    });
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("1");
    const json = (await res.json()) as any;
    expect(json.code).toBe("resource_exhausted");
    expect(json.message).toMatch(/^Too many messages: .* Retry after 1 second\.$/);
    expect(json.details.map((d: any) => d.type)).toEqual(["google.rpc.ErrorInfo"]);
  });
});

describe("send rate configuration", () => {
  it("defaults: 50 per second, bursts of 500", () => {
    const c = loadConfig({});
    expect([c.sendRateLimit, c.sendRateBurst]).toEqual([50, 500]);
  });

  it("the burst defaults to ten seconds' worth, at least 100; 0 or off turns the limit off", () => {
    expect(loadConfig({ SEND_RATE_LIMIT: "2" }).sendRateBurst).toBe(100);
    expect(loadConfig({ SEND_RATE_LIMIT: "25.5" }).sendRateBurst).toBe(255);
    expect(loadConfig({ SEND_RATE_LIMIT: "5", SEND_RATE_BURST: "5" }).sendRateBurst).toBe(5);
    expect(loadConfig({ SEND_RATE_LIMIT: "0" }).sendRateLimit).toBe(0);
    expect(loadConfig({ SEND_RATE_LIMIT: "OFF" }).sendRateLimit).toBe(0);
  });

  it("refuses values that cannot work", () => {
    expect(() => loadConfig({ SEND_RATE_LIMIT: "fast" })).toThrow(/SEND_RATE_LIMIT/);
    expect(() => loadConfig({ SEND_RATE_LIMIT: "-1" })).toThrow(/SEND_RATE_LIMIT/);
    expect(() => loadConfig({ SEND_RATE_BURST: "0" })).toThrow(/SEND_RATE_BURST/);
    expect(() => loadConfig({ SEND_RATE_BURST: "2.5" })).toThrow(/SEND_RATE_BURST/);
  });

  it("with the limit off, sends are not counted", async () => {
    const off = await createTestApp({ config: { sendRateLimit: 0 } });
    try {
      const a = await createTenant(off.app);
      for (let i = 0; i < 12; i++) {
        const res = await off.app.inject({
          method: "POST",
          url: `/v2/Properties/${a.propertySid}/Messages`,
          headers: { authorization: a.auth },
          payload: body(),
        });
        expect(res.statusCode).toBe(200);
      }
    } finally {
      await off.close();
    }
  });
});
