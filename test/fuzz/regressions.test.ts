/**
 * Bugs the fuzz tests found, pinned down one by one (each was a 5xx or an undocumented body):
 * - a path Fastify cannot percent-decode got Fastify's own 400 body, any unknown path outside
 *   /v2 and /admin/v1 Fastify's own 404 body;
 * - a REST request string with an unpaired UTF-16 surrogate (JSON "\udc00") was a 500 on PGlite,
 *   whose wire encoder miscounts such strings and truncates the query, and was stored as U+FFFD
 *   on PostgreSQL while the answer echoed the surrogate;
 * - an inbound SMS holding U+0000 or an unpaired surrogate (any UCS-2 unit can come from the
 *   network) failed the insert: a 500 to Kannel and the SMS lost;
 * - errors outside the REST routes (Fastify's own 415 on an RPC path with an unparsable
 *   Content-Type, a failing carrier callback) got Fastify's default body, whose 500 showed the
 *   cause (a database message) to the caller;
 * - an RPC request Connect could not read (broken protobuf, a compressed frame without an
 *   encoding, an unknown Content-Encoding, no or two messages for a unary method) was
 *   `internal` / `unimplemented` (HTTP 500 / 501) instead of `invalid_argument`;
 * - a gRPC / gRPC-Web JSON request whose bad value Connect quotes in its error held an unpaired
 *   surrogate escape: Connect's status writer threw (encodeURIComponent) and the call ended with
 *   no status at all.
 */
import { type AddressInfo, connect } from "node:net";
import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AddressService, ListAddressesRequestSchema } from "../../gen/switchboard/v2/addresses_pb.js";
import type { Carrier } from "../../src/delivery/carrier.js";
import { createKannelCarrier } from "../../src/carriers/kannel.js";
import { ManualClock } from "../../src/common/clock.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { changedTables, dbDigest, rpcTransports, switchboardReason } from "../support/surface.js";
import { frame } from "./arbitraries.js";
import { h2Session, rawOutcome, sendHttp1, sendHttp2, type RawProtocol } from "./raw-rpc.js";

let t: TestApp;
let a: Tenant;
let baseUrl: string;

beforeAll(async () => {
  t = await createTestApp({ engine: { loops: false } });
  a = await createTenant(t.app);
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await t?.close();
});

const notFoundBody = (path: string) => ({ ResponseStatus: { ErrorCode: "NotFound", Message: `The requested resource ${path} was not found.`, Errors: [] } });

describe("paths Fastify refuses itself", () => {
  it("a path that cannot be percent-decoded is a 404 NotFound in the documented body", async () => {
    for (const path of ["/v2/Messages/%zz", "/v2/Properties/%E0%A4%A/Messages", "/admin/v1/Accounts/%", "/v2/Numbers/%C0"]) {
      const res = await t.app.inject({ method: "GET", url: path, headers: { authorization: a.auth } });
      expect(res.statusCode, path).toBe(404);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.json(), path).toStrictEqual(notFoundBody(path));
    }
  });

  it("an unknown path outside the API prefixes is a 404 NotFound in the documented body", async () => {
    for (const path of ["/nope", "//v2/Messages", "/switchboard.v2.MessagingService/Nope"]) {
      const res = await t.app.inject({ method: "POST", url: path, headers: { authorization: a.auth } });
      expect(res.statusCode, path).toBe(404);
      expect(res.json(), path).toStrictEqual(notFoundBody(path));
    }
  });
});

describe("errors outside the REST routes", () => {
  it("an RPC path with a Content-Type Fastify cannot parse gets the documented 415 body", async () => {
    for (const contentType of ["", ";;", "/"]) {
      const res = await t.app.inject({
        method: "POST",
        url: "/switchboard.v2.AddressService/ListAddresses",
        headers: { authorization: a.auth, "content-type": contentType },
        payload: "{}",
      });
      expect(res.statusCode, contentType).toBe(415);
      expect(res.json().ResponseStatus.ErrorCode, contentType).toBe("UnsupportedMediaType");
    }
  });

  it("a failing carrier callback is a 500 InternalError that does not show its cause", async () => {
    // A carrier whose callback route fails as a database error would: the app's own error handling is under test.
    const carrier: Carrier = {
      name: "failing",
      submit: async () => ({ carrierRef: "x" }),
      start: async () => undefined,
      stop: async () => undefined,
      routes: async (app) => {
        app.get("/carriers/failing/dlr", async () => {
          throw new Error('relation "secret_table" does not exist');
        });
      },
    };
    const f = await createTestApp({ carrier, db: t.db });
    try {
      const res = await f.app.inject({ method: "GET", url: "/carriers/failing/dlr" });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "InternalError", Message: "An internal error occurred.", Errors: [] } });
    } finally {
      await f.close();
    }
  });
});

describe("unpaired UTF-16 surrogates in request strings", () => {
  const MESSAGE = "must be well-formed Unicode: it contains an unpaired UTF-16 surrogate (U+D800 to U+DFFF).";
  const cases: { url: () => string; auth: () => string; body: string; field: string }[] = [
    {
      url: () => `/v2/Accounts/${a.accountSid}/Addresses`,
      auth: () => a.auth,
      body: '{"Line1":"\\u00c0\\udc00","City":"x","CountryCode":"US"}',
      field: "Line1",
    },
    {
      url: () => `/v2/Properties/${a.propertySid}/Messages`,
      auth: () => a.auth,
      body: '{"From":"Acme","To":"+447700900123","Text":"\\u00e9\\ud800"}',
      field: "Text",
    },
    {
      url: () => `/v2/Properties/${a.propertySid}/BatchMessages`,
      auth: () => a.auth,
      body: '{"Messages":[{"To":"+447700900123","Text":"ok"},{"To":"+447700900123","Text":"x\\ude00"}]}',
      field: "Messages[1].Text",
    },
    { url: () => `/v2/Numbers/${a.ownedNumber.slice(1)}`, auth: () => a.auth, body: '{"Friendly":"\\u20ac\\udc00\\udc00"}', field: "Friendly" },
    { url: () => `/admin/v1/Accounts/${a.accountSid}`, auth: () => `Bearer ${ADMIN_TOKEN}`, body: '{"Name":"\\u00c0\\udc00"}', field: "Name" },
    { url: () => "/admin/v1/Accounts", auth: () => `Bearer ${ADMIN_TOKEN}`, body: '{"Name":"\\udbff"}', field: "Name" },
  ];

  it("are a 400 InvalidParameter naming the field over REST, and nothing is written", async () => {
    const before = await dbDigest(t.db.orm);
    for (const c of cases) {
      const res = await t.app.inject({
        method: "POST",
        url: c.url(),
        headers: { authorization: c.auth(), "content-type": "application/json" },
        payload: c.body,
      });
      expect(res.statusCode, c.body).toBe(400);
      const message = `${c.field} ${MESSAGE}`;
      expect(res.json(), c.body).toStrictEqual({
        ResponseStatus: { ErrorCode: "InvalidParameter", Message: message, Errors: [{ FieldName: c.field, ErrorCode: "InvalidParameter", Message: message }] },
      });
    }
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
  });

  it("are refused over Connect JSON as well (protobuf-es checks UTF-8 before the method runs)", async () => {
    const { transports, close } = rpcTransports(baseUrl);
    try {
      const client = createClient(AddressService, transports["connect-json"]);
      const err = await client.listAddresses({ accountSid: a.accountSid, city: "\u00e9\udc00" }, { headers: { authorization: a.auth } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code, String(err)).toBe(Code.InvalidArgument);
      expect((err as ConnectError).rawMessage).toMatch(/invalid UTF8/);
    } finally {
      close();
    }
  });
});

describe("inbound SMS text the database cannot store as it is", () => {
  it("U+0000 and unpaired surrogates from the network are kept as U+FFFD, not a 500", async () => {
    const clock = new ManualClock(new Date("2026-11-22T12:00:00Z"));
    const carrier = createKannelCarrier({
      clock,
      sendsmsUrl: "http://127.0.0.1:9/cgi-bin/sendsms",
      username: "u",
      password: "p",
      callbackBaseUrl: "http://127.0.0.1:9",
      callbackSecret: "s3cret",
    });
    const k = await createTestApp({ clock, carrier, engine: { loops: false } });
    try {
      // UTF-16BE units, as Kannel's %b passes a UCS-2 SMS: "A\0B", "é" + lone low surrogate, "€" + two lone low surrogates.
      for (const units of ["0041 0000 0042", "00e9 dc00", "20ac dc00 dc00"]) {
        const hex = units
          .replaceAll(" ", "")
          .match(/../g)!
          .map((b) => `%${b}`)
          .join("");
        const res = await k.app.inject({
          method: "GET",
          url: `/carriers/kannel/inbound?secret=s3cret&from=%2B447700900123&to=%2B12025550101&charset=UTF-16BE&coding=2&text=${hex}`,
        });
        expect(res.statusCode, units).toBe(200);
      }
      const rows = await k.db.orm.em.fork().execute<{ text: string }[]>("select text from unmatched_inbound order by id");
      expect(rows.map((r) => r.text)).toStrictEqual(["A\uFFFDB", "é\uFFFD", "€\uFFFD\uFFFD"]);
    } finally {
      await k.close();
    }
  });
});

describe("requests that name no authority", () => {
  /** One raw HTTP/1.0 exchange (no Host header, which HTTP/1.1 would require). */
  const http10 = (raw: string) =>
    new Promise<string>((resolve, reject) => {
      const port = Number(new URL(baseUrl).port);
      const s = connect(port, "127.0.0.1");
      let out = "";
      s.setEncoding("utf8").on("data", (d: string) => (out += d));
      s.on("close", () => resolve(out));
      s.on("error", reject);
      s.setTimeout(10_000, () => s.destroy(new Error(`no answer; got ${JSON.stringify(out)}`)));
      s.write(raw);
    });

  it("an RPC over HTTP/1.0 without Host is served (here: refused as unauthenticated), not an empty 200", async () => {
    const body = JSON.stringify({ propertySid: "PR1", to: "+447700900123", text: "x" });
    const res = await http10(
      `POST /switchboard.v2.MessagingService/SendMessage HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    const [head, json] = res.split("\r\n\r\n");
    expect(head.split("\r\n")[0]).toBe("HTTP/1.1 401 Unauthorized");
    expect(JSON.parse(json)).toMatchObject({ code: "unauthenticated" });
  });

  it("a REST call over HTTP/1.0 without Host gets its documented answer", async () => {
    const res = await http10(`GET /v2/Properties/PR1/Messages HTTP/1.0\r\n\r\n`);
    expect(res.split("\r\n")[0]).toBe("HTTP/1.1 401 Unauthorized");
    expect(JSON.parse(res.split("\r\n\r\n")[1])).toMatchObject({ ResponseStatus: { ErrorCode: "Unauthorized" } });
  });
});

describe("RPC requests Connect cannot read", () => {
  const PATH = "/switchboard.v2.AddressService/ListAddresses";
  const valid = () => toBinary(ListAddressesRequestSchema, create(ListAddressesRequestSchema, { accountSid: a.accountSid }));
  const TRUNCATED = new Uint8Array([0x0a, 0x20, 0x41]); // field 1 claims 32 bytes, has 1
  const NOT_UTF8 = new Uint8Array([0x0a, 0x02, 0xff, 0xfe]);

  async function outcome(protocol: RawProtocol, headers: Record<string, string>, body: Uint8Array, path = PATH) {
    const req = { protocol, httpMethod: "POST", path, headers: { authorization: a.auth, ...headers }, body };
    if (protocol !== "grpc") return rawOutcome(protocol, await sendHttp1(baseUrl, req, 10_000));
    const session = h2Session(baseUrl);
    try {
      return rawOutcome(protocol, await sendHttp2(session, req, 10_000));
    } finally {
      session.close();
    }
  }

  function expectInvalidArgument(o: Awaited<ReturnType<typeof outcome>>, message: RegExp) {
    expect(o.kind).toBe("error");
    const err = (o as { error: ConnectError }).error;
    expect(err.code, err.rawMessage).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toMatch(message);
  }

  it("are invalid_argument (HTTP 400 over Connect, grpc-status 3) instead of internal or unimplemented, and write nothing", async () => {
    const before = await dbDigest(t.db.orm);
    const proto = { "content-type": "application/proto" };
    expectInvalidArgument(await outcome("connect", proto, TRUNCATED), /^parse binary: /);
    expectInvalidArgument(await outcome("connect", proto, NOT_UTF8), /^parse binary: .*utf-8/);
    expectInvalidArgument(
      await outcome("connect", { "content-type": "application/json", "content-encoding": "zstd" }, new TextEncoder().encode("{}")),
      /unknown compression "zstd"/,
    );
    for (const protocol of ["grpc", "grpc-web"] as const) {
      const ct = { "content-type": protocol === "grpc" ? "application/grpc" : "application/grpc-web+proto", te: "trailers" };
      expectInvalidArgument(await outcome(protocol, ct, frame(0, TRUNCATED)), /^parse binary: /);
      expectInvalidArgument(await outcome(protocol, ct, frame(1, valid())), /compressed envelope/);
      expectInvalidArgument(await outcome(protocol, ct, new Uint8Array(0)), /missing input message/);
      expectInvalidArgument(await outcome(protocol, ct, Buffer.concat([frame(0, valid()), frame(0, valid())])), /extra input message/);
      expectInvalidArgument(await outcome(protocol, { ...ct, "grpc-encoding": "zstd" }, frame(1, valid())), /unknown compression "zstd"/);
    }
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
  });

  it("a call whose error Connect cannot write (a quoted unpaired surrogate) still ends with a status", async () => {
    const before = await dbDigest(t.db.orm);
    // Pool is a bool: protobuf-es quotes the string it got in its message, lone surrogate and all.
    const json = new TextEncoder().encode(`{"AccountSid":"${a.accountSid}","Pool":"x\\ud800"}`);
    // An integer given so is refused by the integer rule first (src/rest/json-integers.ts), in words Connect can write.
    const integer = new TextEncoder().encode(`{"AccountSid":"${a.accountSid}","Results_Count":"x\\ud800"}`);
    for (const protocol of ["grpc", "grpc-web"] as const) {
      const ct = { "content-type": protocol === "grpc" ? "application/grpc+json" : "application/grpc-web+json", te: "trailers" };
      expectInvalidArgument(await outcome(protocol, ct, frame(0, json), "/switchboard.admin.v1.AdminService/ListNumbers"), /^The request could not be read\.$/);
      expectInvalidArgument(await outcome(protocol, ct, frame(0, integer)), /^Results_Count must be an integer\.$/);
    }
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
  });

  it("a well-framed request still reaches the method, whose own errors keep their codes", async () => {
    // A compressed frame with its encoding is read fine, and the method answers NotFound for an unknown Sid.
    const body = toBinary(ListAddressesRequestSchema, create(ListAddressesRequestSchema, { accountSid: `AC${"0".repeat(30)}` }));
    for (const protocol of ["grpc", "grpc-web"] as const) {
      const ct = { "content-type": protocol === "grpc" ? "application/grpc" : "application/grpc-web+proto", te: "trailers", "grpc-encoding": "gzip" };
      const o = await outcome(protocol, ct, frame(1, gzipSync(body)));
      expect(o.kind).toBe("error");
      expect((o as { error: ConnectError }).error.code).toBe(Code.NotFound);
      expect(switchboardReason((o as { error: ConnectError }).error)).toBe("NotFound");
    }
    const ok = await outcome("connect", { "content-type": "application/proto" }, valid());
    expect(ok.kind).toBe("ok");
  });
});
