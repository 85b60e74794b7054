/**
 * One real listening port, every protocol (docs/api.md#calling-over-grpc-and-connect, docs/errors.md#errors): REST /v2, Connect (JSON and binary,
 * HTTP/1.1), gRPC (h2c, prior knowledge) and gRPC-Web reach the same SendMessage/GetMessage and
 * report the same errors; plain curl and curl --http2-prior-knowledge work on that port too.
 */
import { execFile } from "node:child_process";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { MessageRecordSchema, MessageSchema, MessagingService, SendMessageRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { buildApp } from "../../src/app.js";
import { ManualClock } from "../../src/common/clock.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { ADMIN_TOKEN, basic } from "../support/harness.js";

const run = promisify(execFile);
const NOW = new Date("2026-11-22T12:00:00Z");
const NOW_S = Math.floor(NOW.getTime() / 1000);
const TO = "+447700900123";
const SID_RE = (prefix: string) => new RegExp(`^${prefix}[A-Z0-9]{30}$`);
const UNKNOWN_PROPERTY = `PR${"0".repeat(30)}`;
type SendInit = MessageInitShape<typeof SendMessageRequestSchema>;

let db: TestOrm;
let app: FastifyInstance;
let baseUrl: string;
let tenant: { accountSid: string; token: string; propertySid: string; ownedNumber: string; auth: string };
let grpcSessions: Http2SessionManager;

/** The RPC protocols under test, each with its own client over the one port. */
type RpcName = "connect-json" | "connect-binary" | "grpc" | "grpc-web";
const RPC_NAMES: RpcName[] = ["connect-json", "connect-binary", "grpc", "grpc-web"];
const clients = {} as Record<RpcName, Client<typeof MessagingService>>;

function transportFor(name: RpcName): Transport {
  switch (name) {
    case "connect-json":
      return createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false });
    case "connect-binary":
      return createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true });
    case "grpc":
      // HTTP/2 with prior knowledge (h2c): the session manager lets the test see the session stay open.
      return createGrpcTransport({ baseUrl, sessionManager: grpcSessions });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl, httpVersion: "1.1" });
  }
}

/** A protobuf message as the REST JSON shape: JSON names, int64 (bigint) as JSON numbers. */
function asRestJson(schema: DescMessage, msg: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of schema.fields) {
    const v = msg[f.localName];
    out[f.jsonName] = typeof v === "bigint" ? Number(v) : v;
  }
  return out;
}

async function rest(method: string, path: string, body?: unknown, auth: string | null = tenant.auth): Promise<{ status: number; headers: Headers; json: any }> {
  const headers: Record<string, string> = {};
  if (auth) headers.authorization = auth;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : undefined };
}

async function operator(path: string, body: object): Promise<any> {
  const res = await rest("POST", path, body, `Bearer ${ADMIN_TOKEN}`);
  if (res.status !== 200) throw new Error(`${path} → ${res.status} ${JSON.stringify(res.json)}`);
  return res.json;
}

async function rpcError(call: () => Promise<unknown>): Promise<ConnectError> {
  try {
    await call();
  } catch (e) {
    expect(e).toBeInstanceOf(ConnectError);
    return e as ConnectError;
  }
  throw new Error("the call succeeded but an error was expected");
}

beforeAll(async () => {
  db = await createTestOrm();
  app = await buildApp({
    orm: db.orm,
    clock: new ManualClock(NOW),
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: false, noAlphaCountries: new Set(["US", "CA"]), bodyLimit: 1024 * 1024 },
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  grpcSessions = new Http2SessionManager(baseUrl);
  for (const name of RPC_NAMES) clients[name] = createClient(MessagingService, transportFor(name));

  // The tenant comes from the operator API over the network, as an operator would create it.
  const acc = await operator("/admin/v1/Accounts", { Name: "Protocols" });
  const prop = await operator(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Site" });
  const ownedNumber = "+447700960901";
  await operator("/admin/v1/Numbers", { Number: ownedNumber, AccountSid: acc.AccountSid });
  tenant = { accountSid: acc.AccountSid, token: acc.Token, propertySid: prop.PropertySid, ownedNumber, auth: basic(acc.AccountSid, acc.Token) };
});

afterAll(async () => {
  if (!app) return;
  try {
    // The gRPC client's HTTP/2 session is still open here, as a real client's would be on shutdown.
    if (grpcSessions) expect(["open", "idle"]).toContain(grpcSessions.state());
    const started = Date.now();
    const closed = app.close().then(() => "closed" as const);
    const outcome = await Promise.race([closed, new Promise<"hung">((done) => setTimeout(done, 5000, "hung"))]);
    expect(outcome, "app.close() must not wait for open HTTP/2 sessions").toBe("closed");
    expect(Date.now() - started).toBeLessThan(5000);
  } finally {
    grpcSessions?.abort();
    await db?.close();
  }
});

describe(`SendMessage and GetMessage on every protocol (${dbKind()})`, () => {
  const sent: Record<string, Record<string, unknown>> = {};
  const body = () => ({ From: tenant.ownedNumber, To: TO, Text: "Hello on every protocol" });
  const rpcRequest = (): SendInit => ({ propertySid: tenant.propertySid, from: tenant.ownedNumber, to: TO, text: "Hello on every protocol" });

  function expectSixFields(msg: Record<string, unknown>) {
    expect(Object.keys(msg).sort()).toEqual(["AccountSid", "From", "MessageSid", "PropertySid", "Text", "To"]);
    expect(msg.MessageSid).toMatch(SID_RE("MG"));
    expect(msg).toMatchObject({
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: tenant.ownedNumber,
      To: TO,
      Text: "Hello on every protocol",
    });
  }

  it("REST: POST /v2/Properties/{sid}/Messages", async () => {
    const res = await rest("POST", `/v2/Properties/${tenant.propertySid}/Messages`, body());
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expectSixFields(res.json);
    sent.rest = res.json;
  });

  for (const name of RPC_NAMES) {
    it(`${name}: SendMessage`, async () => {
      const msg = await clients[name].sendMessage(rpcRequest(), { headers: { authorization: tenant.auth } });
      const json = asRestJson(MessageSchema, msg as unknown as Record<string, unknown>);
      expectSixFields(json);
      sent[name] = json;
    });
  }

  it("every protocol answered with the same fields, each its own message", () => {
    const names = ["rest", ...RPC_NAMES];
    expect(Object.keys(sent).sort()).toEqual([...names].sort());
    const withoutSid = (m: Record<string, unknown>) => ({ ...m, MessageSid: undefined });
    for (const n of names) expect(withoutSid(sent[n])).toEqual(withoutSid(sent.rest));
    expect(new Set(names.map((n) => sent[n].MessageSid)).size).toBe(names.length);
  });

  it("GetMessage of one sid gives equal records on every protocol", async () => {
    const sid = sent.grpc.MessageSid as string;
    const res = await rest("GET", `/v2/Messages/${sid}`);
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json).toMatchObject({ MessageSid: sid, AccountSid: tenant.accountSid, From: tenant.ownedNumber, To: TO, Direction: "Transmit", Created: NOW_S });
    // Every field but SenderIdRegistered, which is there only where SENDER_ID_REGISTRATION checked an alphanumeric sender (this one is E164).
    expect(Object.keys(res.json).sort()).toEqual(
      MessageRecordSchema.fields
        .map((f) => f.jsonName)
        .filter((n) => n !== "SenderIdRegistered")
        .sort(),
    );
    for (const name of RPC_NAMES) {
      const rec = await clients[name].getMessage({ messageSid: sid }, { headers: { authorization: tenant.auth } });
      expect(asRestJson(MessageRecordSchema, rec as unknown as Record<string, unknown>), name).toEqual(res.json);
    }
  });
});

describe("the same error on every protocol", () => {
  interface Case {
    title: string;
    errorCode: string;
    httpStatus: number;
    code: Code;
    fields: string[];
    auth: boolean;
    propertySid?: string;
    rest: () => Record<string, unknown>;
    rpc: () => SendInit;
  }
  const cases: Case[] = [
    {
      title: "Schedule more than 14 days ahead",
      errorCode: "InvalidSchedule",
      httpStatus: 400,
      code: Code.InvalidArgument,
      fields: ["Schedule"],
      auth: true,
      rest: () => ({ To: TO, Text: "later", Schedule: NOW_S + 14 * 86400 + 1 }),
      rpc: () => ({ to: TO, text: "later", schedule: BigInt(NOW_S + 14 * 86400 + 1) }),
    },
    {
      title: "a To that is not a phone number",
      errorCode: "InvalidRecipient",
      httpStatus: 400,
      code: Code.InvalidArgument,
      fields: ["To"],
      auth: true,
      rest: () => ({ To: "12345", Text: "hi" }),
      rpc: () => ({ to: "12345", text: "hi" }),
    },
    {
      title: "missing authorization",
      errorCode: "Unauthorized",
      httpStatus: 401,
      code: Code.Unauthenticated,
      fields: [],
      auth: false,
      rest: () => ({ To: TO, Text: "hi" }),
      rpc: () => ({ to: TO, text: "hi" }),
    },
    {
      title: "an unknown property",
      errorCode: "NotFound",
      httpStatus: 404,
      code: Code.NotFound,
      fields: [],
      auth: true,
      propertySid: UNKNOWN_PROPERTY,
      rest: () => ({ To: TO, Text: "hi" }),
      rpc: () => ({ to: TO, text: "hi" }),
    },
  ];

  for (const c of cases) {
    it(`${c.title}: ${c.errorCode} on REST and every RPC protocol`, async () => {
      const propertySid = c.propertySid ?? tenant.propertySid;
      const res = await rest("POST", `/v2/Properties/${propertySid}/Messages`, c.rest(), c.auth ? tenant.auth : null);
      expect(res.status, JSON.stringify(res.json)).toBe(c.httpStatus);
      const status = res.json.ResponseStatus;
      expect(status.ErrorCode).toBe(c.errorCode);
      expect(status.Message).toEqual(expect.any(String));
      expect(status.Message.length).toBeGreaterThan(0);
      expect((status.Errors ?? []).map((e: { FieldName: string }) => e.FieldName)).toEqual(c.fields);
      if (c.httpStatus === 401) expect(res.headers.get("www-authenticate")).toBe('Basic realm="switchboard"');

      for (const name of RPC_NAMES) {
        const err = await rpcError(() => clients[name].sendMessage({ propertySid, ...c.rpc() }, c.auth ? { headers: { authorization: tenant.auth } } : {}));
        expect(Code[err.code], `${name}: ${err.message}`).toBe(Code[c.code]);
        expect(err.rawMessage, name).toBe(status.Message);
        const infos = err.findDetails(ErrorInfoSchema);
        expect(
          infos.map((i) => ({ reason: i.reason, domain: i.domain })),
          name,
        ).toEqual([{ reason: c.errorCode, domain: "switchboard" }]);
        const violations = err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations);
        expect(
          violations.map((v) => v.field),
          name,
        ).toEqual(c.fields);
        for (const v of violations) expect(v.reason, name).toBe(c.errorCode);
      }
    });
  }
});

describe("curl on the same port", () => {
  it("plain curl (HTTP/1.1, no flags) reaches /healthz and /v2", async () => {
    const health = await run("curl", ["-s", `${baseUrl}/healthz`]);
    expect(JSON.parse(health.stdout)).toEqual({ Status: "ok" });

    const sid = (await rest("POST", `/v2/Properties/${tenant.propertySid}/Messages`, { From: tenant.ownedNumber, To: TO, Text: "for curl" })).json.MessageSid;
    const got = await run("curl", ["-s", "-u", `${tenant.accountSid}:${tenant.token}`, `${baseUrl}/v2/Messages/${sid}`]);
    expect(JSON.parse(got.stdout)).toMatchObject({ MessageSid: sid, Text: "for curl", AccountSid: tenant.accountSid });

    const sentByCurl = await run("curl", [
      "-s",
      "-u",
      `${tenant.accountSid}:${tenant.token}`,
      "-H",
      "Content-Type: application/json",
      "-d",
      JSON.stringify({ To: TO, From: tenant.ownedNumber, Text: "sent by curl" }),
      `${baseUrl}/v2/Properties/${tenant.propertySid}/Messages`,
    ]);
    expect(JSON.parse(sentByCurl.stdout)).toMatchObject({ Text: "sent by curl", From: tenant.ownedNumber, MessageSid: expect.stringMatching(SID_RE("MG")) });

    const version = await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", `${baseUrl}/healthz`]);
    expect(version.stdout).toBe("200 1.1");
  });

  it("curl --http2-prior-knowledge (h2c) reaches /healthz and /v2", async () => {
    const health = await run("curl", ["-s", "--http2-prior-knowledge", "-w", "\n%{http_code} %{http_version}", `${baseUrl}/healthz`]);
    const [healthBody, healthStatus] = health.stdout.split("\n");
    expect(JSON.parse(healthBody)).toEqual({ Status: "ok" });
    expect(healthStatus).toBe("200 2");

    const list = await run("curl", [
      "-s",
      "--http2-prior-knowledge",
      "-w",
      "\n%{http_code} %{http_version}",
      "-u",
      `${tenant.accountSid}:${tenant.token}`,
      `${baseUrl}/v2/Properties/${tenant.propertySid}/Messages`,
    ]);
    const [listBody, listStatus] = list.stdout.split("\n");
    expect(listStatus).toBe("200 2");
    expect(JSON.parse(listBody).TotalCount).toBeGreaterThanOrEqual(6);

    const denied = await run("curl", ["-s", "--http2-prior-knowledge", "-w", "\n%{http_code}", `${baseUrl}/v2/Properties/${tenant.propertySid}/Messages`]);
    const [deniedBody, deniedStatus] = denied.stdout.split("\n");
    expect(deniedStatus).toBe("401");
    expect(JSON.parse(deniedBody).ResponseStatus.ErrorCode).toBe("Unauthorized");
  });

  it("curl speaks the Connect protocol (JSON, HTTP/1.1) as docs/api.md shows", async () => {
    const res = await run("curl", [
      "-s",
      "-u",
      `${tenant.accountSid}:${tenant.token}`,
      "-H",
      "Content-Type: application/json",
      "-d",
      JSON.stringify({ PropertySid: tenant.propertySid, From: tenant.ownedNumber, To: TO, Text: "hi" }),
      `${baseUrl}/switchboard.v2.MessagingService/SendMessage`,
    ]);
    expect(JSON.parse(res.stdout)).toMatchObject({ PropertySid: tenant.propertySid, To: TO, Text: "hi", MessageSid: expect.stringMatching(SID_RE("MG")) });
  });
});
