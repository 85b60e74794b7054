/**
 * Every byte of a JSON request, on REST and on Connect JSON alike (issue 16):
 * - a body that is not valid UTF-8 is 400 MalformedRequest naming the byte offset, and nothing is
 *   stored (it used to be decoded with U+FFFD, which also switched the message to UCS-2);
 * - a Content-Type charset other than UTF-8 or (REST only) ISO-8859-1 is 415 naming what is supported;
 * - 64-bit integers may be JSON numbers or decimal strings, nothing else ("12a", "1e3", " 1"),
 *   and 32-bit ones are JSON numbers; answers carry numbers.
 */
import { gzipSync } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { invalidUtf8Offset, jsonBodyCharset } from "../../src/http/body-charset.js";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { changedTables, dbDigest } from "../support/surface.js";

let t: TestApp;
let a: Tenant;
let now: number;

beforeAll(async () => {
  t = await createTestApp();
  a = await createTenant(t.app);
  now = Math.floor(t.clock.now().getTime() / 1000);
});
afterAll(async () => {
  await t?.close();
});

const SEND_RPC = "/switchboard.v2.MessagingService/SendMessage";
const sendUrl = () => `/v2/Properties/${a.propertySid}/Messages`;

/** A send body with raw bytes spliced into Text: `{"From":"Acme","To":"…","Text":"a<bytes>b"}`. */
function sendBytes(bytes: number[], withProperty = false): { body: Buffer; offset: number } {
  const head = Buffer.from(`{${withProperty ? `"PropertySid":"${a.propertySid}",` : ""}"From":"Acme","To":"+447700900123","Text":"a`);
  return { body: Buffer.concat([head, Buffer.from(bytes), Buffer.from('b"}')]), offset: head.length };
}

function rest(payload: string | Buffer, contentType = "application/json") {
  return t.app.inject({ method: "POST", url: sendUrl(), headers: { authorization: a.auth, "content-type": contentType }, payload });
}

function connect(url: string, payload: string | Buffer, headers: Record<string, string> = {}) {
  return t.app.inject({ method: "POST", url, headers: { authorization: a.auth, "content-type": "application/json", ...headers }, payload });
}

function connectError(res: { statusCode: number; rawPayload: Buffer }): ConnectError {
  return errorFromJsonBytes(res.rawPayload, undefined, new ConnectError(`not a Connect error: ${res.rawPayload.toString()}`, Code.Unknown));
}

function reason(err: ConnectError): string | undefined {
  return err.findDetails(ErrorInfoSchema).find((d) => d.domain === "switchboard")?.reason;
}

const notUtf8 = (offset: number, byte: string) =>
  `The request body is not valid UTF-8 at byte offset ${offset} (0x${byte}; offsets count from 0): send the JSON encoded as UTF-8.`;

describe("JSON bodies that are not valid UTF-8", () => {
  const cases: { label: string; bytes: number[]; at: number; byte: string }[] = [
    { label: "FF FE inside Text", bytes: [0xff, 0xfe], at: 0, byte: "FF" },
    { label: "a lone continuation byte", bytes: [0x41, 0x80], at: 1, byte: "80" },
    { label: "an overlong encoding of '/'", bytes: [0xc0, 0xaf], at: 0, byte: "C0" },
    { label: "a UTF-8-encoded surrogate (CESU)", bytes: [0xed, 0xa0, 0x80], at: 0, byte: "ED" },
    { label: "a sequence cut short", bytes: [0xe2, 0x82, 0x41], at: 0, byte: "E2" },
    { label: "a code point over U+10FFFF", bytes: [0xf4, 0x90, 0x80, 0x80], at: 0, byte: "F4" },
  ];

  it("are 400 MalformedRequest over REST, naming the byte offset; nothing is stored", async () => {
    const before = await dbDigest(t.db.orm);
    for (const c of cases) {
      const { body, offset } = sendBytes(c.bytes);
      const res = await rest(body);
      expect(res.statusCode, c.label).toBe(400);
      expect(res.json(), c.label).toStrictEqual({ ResponseStatus: { ErrorCode: "MalformedRequest", Message: notUtf8(offset + c.at, c.byte), Errors: [] } });
    }
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
  });

  it("are 400 MalformedRequest over Connect JSON too (offset in the decompressed body); nothing is stored", async () => {
    const before = await dbDigest(t.db.orm);
    for (const c of cases) {
      const { body, offset } = sendBytes(c.bytes, true);
      for (const [label, payload, headers] of [
        ["plain", body, {}],
        ["gzip", gzipSync(body), { "content-encoding": "gzip" }],
      ] as const) {
        const res = await connect(SEND_RPC, payload, headers);
        expect(res.statusCode, `${c.label} ${label}`).toBe(400);
        const err = connectError(res);
        expect(err.code).toBe(Code.InvalidArgument);
        expect(reason(err)).toBe("MalformedRequest");
        expect(err.rawMessage).toBe(notUtf8(offset + c.at, c.byte));
      }
    }
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
  });

  it("well-formed UTF-8 (with a BOM, too) is stored as sent, on both wires", async () => {
    const text = "é€😀";
    const viaRest = await rest(`\ufeff{"From":"Acme","To":"+447700900123","Text":"${text}"}`);
    expect(viaRest.statusCode, viaRest.body).toBe(200);
    expect(viaRest.json().Text).toBe(text);
    const viaConnect = await connect(SEND_RPC, `\ufeff{"PropertySid":"${a.propertySid}","From":"Acme","To":"+447700900123","Text":"${text}"}`);
    expect(viaConnect.statusCode, viaConnect.body).toBe(200);
    expect(viaConnect.json().Text).toBe(text);
    const record = await t.app.inject({ method: "GET", url: `/v2/Messages/${viaRest.json().MessageSid}`, headers: { authorization: a.auth } });
    expect(record.json()).toMatchObject({ Text: text, Encoding: "UCS2" });
  });

  it("the offset scanner agrees with a strict decoder on random bytes", () => {
    const strict = new TextDecoder("utf-8", { fatal: true });
    let seed = 16;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const wellFormed = (bytes: Uint8Array) => {
      try {
        strict.decode(bytes);
        return true;
      } catch {
        return false;
      }
    };
    const disagreements: string[] = [];
    for (let run = 0; run < 20_000; run++) {
      const bytes = Uint8Array.from({ length: Math.floor(random() * 8) }, () =>
        random() < 0.6 ? 0x80 + Math.floor(random() * 128) : Math.floor(random() * 256),
      );
      const offset = invalidUtf8Offset(bytes);
      const valid = wellFormed(bytes);
      // Well-formed exactly when no offset is named, and everything before the offset is well-formed.
      if (offset < 0 !== valid || (!valid && !wellFormed(bytes.subarray(0, offset)))) disagreements.push(Buffer.from(bytes).toString("hex"));
    }
    expect(disagreements).toStrictEqual([]);
  });
});

describe("the charset of a JSON request", () => {
  const UTF16 =
    'The request body\'s Content-Type says charset="utf-16", which is not supported: send the JSON as UTF-8 (charset=utf-8 or no charset) or as ISO-8859-1 (charset=iso-8859-1).';
  const rpcOnlyUtf8 = (charset: string) =>
    `The request body must be UTF-8, but its Content-Type says charset="${charset}": Connect, gRPC and gRPC-Web carry JSON as UTF-8 (with charset=utf-8 or no charset).`;

  it("UTF-8 and ISO-8859-1 in their usual spellings are known, no charset is none; any other charset is 415", () => {
    for (const ct of [undefined, "application/json"]) expect(jsonBodyCharset(ct), ct).toBeUndefined();
    for (const ct of ["application/json; charset=utf-8", "application/json;charset=UTF-8", 'application/json; charset="utf8"']) {
      expect(jsonBodyCharset(ct), ct).toBe("utf-8");
    }
    for (const ct of ["application/json; charset=iso-8859-1", "application/json; charset=ISO-8859-1", 'application/json; charset="latin1"']) {
      expect(jsonBodyCharset(ct), ct).toBe("iso-8859-1");
    }
    for (const ct of ["application/json; charset=utf-16", "application/json; charset=windows-1252", "application/json; charset=us-ascii"]) {
      expect(() => jsonBodyCharset(ct), ct).toThrow(/not supported/);
    }
  });

  it("over REST: 415 UnsupportedMediaType naming the supported charsets; nothing is stored", async () => {
    const before = await dbDigest(t.db.orm);
    const res = await rest('{"From":"Acme","To":"+447700900123","Text":"caf\u00e9"}', "application/json; charset=utf-16");
    expect(res.statusCode).toBe(415);
    expect(res.json()).toStrictEqual({ ResponseStatus: { ErrorCode: "UnsupportedMediaType", Message: UTF16, Errors: [] } });
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
    const quoted = await rest('{"From":"Acme","To":"+447700900123","Text":"x"}', 'application/json; charset="UTF-8"');
    expect(quoted.statusCode, quoted.body).toBe(200);
  });

  it("over Connect: JSON is UTF-8 only, a 415 with a message (Connect alone answered a bare 415), and quoted UTF-8 is served", async () => {
    const body = `{"PropertySid":"${a.propertySid}","From":"Acme","To":"+447700900123","Text":"x"}`;
    const res = await connect(SEND_RPC, body, { "content-type": "application/json; charset=iso-8859-1" });
    expect(res.statusCode).toBe(415);
    const err = connectError(res);
    expect(err.rawMessage).toBe(rpcOnlyUtf8("iso-8859-1"));
    expect(reason(err)).toBe("UnsupportedMediaType");
    const utf16 = await connect(SEND_RPC, body, { "content-type": "application/json; charset=utf-16" });
    expect(utf16.statusCode).toBe(415);
    expect(connectError(utf16).rawMessage).toBe(rpcOnlyUtf8("utf-16"));
    const quoted = await connect(SEND_RPC, body, { "content-type": 'application/json; charset="UTF-8"' });
    expect(quoted.statusCode, quoted.body).toBe(200);
  });
});

describe("integers in request JSON", () => {
  const BAD = ["12a", "1e3", " 1", "1 ", "0x10", "", "1.5", "+", "١٢"];
  const mustBe = (field: string) => `${field} must be an integer (Unix seconds).`;

  it("REST: a 64-bit integer as a decimal string is accepted; the answer carries a number", async () => {
    const schedule = now + 600;
    const res = await rest(`{"From":"Acme","To":"+447700900123","Text":"later","Schedule":"${schedule}"}`);
    expect(res.statusCode, res.body).toBe(200);
    const record = await t.app.inject({ method: "GET", url: `/v2/Messages/${res.json().MessageSid}`, headers: { authorization: a.auth } });
    expect(record.json().Schedule).toBe(schedule);
    expect(record.body).toContain(`"Schedule":${schedule},`);
  });

  it("REST: anything else in a string is 400 InvalidParameter naming the field, in a batch item too", async () => {
    const before = await dbDigest(t.db.orm);
    for (const bad of BAD) {
      const res = await rest(JSON.stringify({ From: "Acme", To: "+447700900123", Text: "x", Schedule: bad }));
      expect(res.statusCode, bad).toBe(400);
      expect(res.json(), bad).toStrictEqual({
        ResponseStatus: {
          ErrorCode: "InvalidParameter",
          Message: mustBe("Schedule"),
          Errors: [{ FieldName: "Schedule", ErrorCode: "InvalidParameter", Message: mustBe("Schedule") }],
        },
      });
    }
    const batch = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/BatchMessages`,
      headers: { authorization: a.auth },
      payload: {
        Messages: [
          { From: "Acme", To: "+447700900123", Text: "x", Schedule: String(now + 60) },
          { From: "Acme", To: "+447700900123", Text: "x", Schedule: "1e3" },
        ],
      },
    });
    expect(batch.statusCode).toBe(400);
    expect(batch.json().ResponseStatus.Errors).toStrictEqual([
      { FieldName: "Messages[1].Schedule", ErrorCode: "InvalidParameter", Message: mustBe("Messages[1].Schedule") },
    ]);
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
  });

  it("Connect JSON: a decimal string is accepted, anything else is invalid_argument naming the field", async () => {
    const schedule = now + 900;
    const body = (s: unknown) => JSON.stringify({ PropertySid: a.propertySid, From: "Acme", To: "+447700900123", Text: "x", Schedule: s });
    const ok = await connect(SEND_RPC, body(String(schedule)));
    expect(ok.statusCode, ok.body).toBe(200);
    const record = await connect("/switchboard.v2.MessagingService/GetMessage", JSON.stringify({ MessageSid: ok.json().MessageSid }));
    expect(record.json().Schedule).toBe(String(schedule)); // Connect JSON writes int64 as the protobuf JSON mapping does

    const before = await dbDigest(t.db.orm);
    for (const bad of BAD) {
      const res = await connect(SEND_RPC, body(bad));
      expect(res.statusCode, bad).toBe(400);
      const err = connectError(res);
      expect(err.code, bad).toBe(Code.InvalidArgument);
      expect(reason(err), bad).toBe("InvalidParameter");
      expect(err.rawMessage, bad).toBe(mustBe("Schedule"));
      expect(
        err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations.map((v) => v.field)),
        bad,
      ).toStrictEqual(["Schedule"]);
    }
    const batch = await connect(
      "/switchboard.v2.MessagingService/SendBatch",
      JSON.stringify({
        PropertySid: a.propertySid,
        Messages: [
          { To: "+447700900123", Text: "x" },
          { To: "+447700900123", Text: "x", schedule: " 1" },
        ],
      }),
    );
    expect(batch.statusCode).toBe(400);
    expect(connectError(batch).rawMessage).toBe(mustBe("Messages[1].schedule"));
    expect(changedTables(before, await dbDigest(t.db.orm))).toStrictEqual([]);
  });

  it("Connect JSON: a 32-bit integer must be a JSON number; 64-bit filters may be strings", async () => {
    const list = (extra: object) => connect("/switchboard.v2.MessagingService/ListMessages", JSON.stringify({ PropertySid: a.propertySid, ...extra }));
    const ok = await list({ Results_Count: 2, Date_From: String(now - 60), Date_To: now + 60 });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json().Messages.length).toBeGreaterThan(0);
    const text = await list({ Results_Count: "2" });
    expect(text.statusCode).toBe(400);
    expect(connectError(text).rawMessage).toBe("Results_Count must be an integer as a JSON number, not a string.");
    const huge = await list({ Date_From: "9223372036854775808" });
    expect(connectError(huge).rawMessage).toBe("Date_From must be an integer (Unix seconds) between -9223372036854775808 and 9223372036854775807.");
  });
});
