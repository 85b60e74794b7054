/**
 * Property-based fuzzing of every RPC method (enumerated from the generated service descriptors)
 * through a real listening server:
 * - typed: the generated clients over Connect JSON, Connect binary, gRPC (h2c) and gRPC-Web send
 *   random and hostile messages with random credentials;
 * - raw: hand-made requests over HTTP/1.1 and h2c with broken protobuf, lying or extra frames,
 *   odd flags, content types, encodings, timeouts and HTTP methods.
 * Whatever comes in: an answer within 20 s, never a server-side code (internal, unknown,
 * unimplemented, data_loss, unavailable, deadline) nor an HTTP 5xx, errors in the protocol's
 * proper form, Switchboard errors with a documented ErrorInfo whose documented Connect code is
 * the one sent, nothing written when the answer is an error, nothing of tenant B's shown to anyone
 * but B and the operator.
 *
 * FUZZ_RUNS sets the runs per method and kind, FUZZ_SEED the seed (FUZZ_RANDOM=1 for a new one).
 */
import type { AddressInfo } from "node:net";
import type { ClientHttp2Session } from "node:http2";
import { gzipSync } from "node:zlib";
import { create, toBinary, toJsonString, type DescMessage } from "@bufbuild/protobuf";
import { ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "../support/harness.js";
import {
  apiServices,
  changedTables,
  dbDigest,
  isOperatorService,
  restAnswerProblems,
  RPC_PROTOCOLS,
  rpcErrorProblems,
  rpcMethods,
  rpcTransports,
  withTimeout,
  type RpcMethod,
  type RpcProtocol,
} from "../support/surface.js";
import {
  authorization,
  bodyText,
  brokenBinary,
  framedBody,
  FuzzTally,
  fuzzRuns,
  idempotencyKey,
  jsonObjectFor,
  propertyParams,
  typedInitFor,
  type Hints,
  isOperatorAuthOf,
} from "./arbitraries.js";
import { h2Session, rawOutcome, sendHttp1, sendHttp2, type RawProtocol, type RawRequest } from "./raw-rpc.js";
import { createFuzzWorld, type FuzzWorld } from "./world-hints.js";

const isOperatorAuth = (auth: string | undefined) => isOperatorAuthOf(ADMIN_TOKEN, auth);

/** Methods the descriptors give today; a new one raises this count (and is fuzzed like the others). */
const EXPECTED_METHODS = 63;
const RUNS = fuzzRuns(20);
const ANSWER_WITHIN_MS = 20_000;

const services = await apiServices();
const methods = rpcMethods(services);
const tally = new FuzzTally("RPC methods");

let t: TestApp;
let world: FuzzWorld;
let baseUrl: string;
let digest: Record<string, string>;
let closeTransports: () => void;
let transports: Record<RpcProtocol, Transport>;
let session: ClientHttp2Session;

beforeAll(async () => {
  // Wrong credentials by the hundred from one address: without this, the limit on guessing would answer most cases 429 unchecked.
  t = await createTestApp({ engine: { loops: false }, config: { authFailures: { perAddress: 0, perAccount: 0, windowMs: 60_000 } } });
  world = await createFuzzWorld(t.app, Math.floor(t.clock.now().getTime() / 1000));
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  ({ transports, close: closeTransports } = rpcTransports(baseUrl));
  session = h2Session(baseUrl);
  digest = await dbDigest(t.db.orm);
}, 120_000);

/**
 * The h2c session, opened again when the server closed it: it closes a session idle for
 * HTTP2_IDLE_TIMEOUT_MS (5 s), which the typed-client tests before the raw ones can outlast.
 */
function liveSession(): ClientHttp2Session {
  if (session.closed || session.destroyed) session = h2Session(baseUrl);
  return session;
}

afterAll(async () => {
  if (tally.cases > 0) tally.report(RUNS);
  closeTransports?.();
  session?.close();
  await t?.close();
});

it(`the enumeration finds every method of every generated service (${EXPECTED_METHODS})`, () => {
  expect(methods).toHaveLength(EXPECTED_METHODS);
  expect(new Set(methods.map((m) => m.service.typeName)).size).toBe(services.length);
});

// ---------------------------------------------------------------------------------------------

/** The world's hints, plus the caller's and others' Sids for the method's identifier fields. */
function hintsFor(m: RpcMethod): Hints {
  const operator = isOperatorService(m.service);
  const hints: Hints = { ...world.hints };
  for (const f of m.method.input.fields) {
    const own = world.own(f, operator);
    const others = world.others(f, operator);
    if (own.length + others.length === 0) continue;
    // Numbers travel with their "+" over RPC; the REST path carries the digits only.
    const values = f.name === "number" ? [...own, ...others].flatMap((n) => [n, `+${n}`]) : [...own, ...others];
    hints[f.name] = [...values, ...(world.hints[f.name] ?? [])];
  }
  return hints;
}

function authFor(m: RpcMethod): fc.Arbitrary<string | undefined> {
  const { a, b } = world;
  return isOperatorService(m.service)
    ? authorization([`Bearer ${ADMIN_TOKEN}`], [a.auth], [a.accountSid])
    : authorization([a.auth], [b.auth], [a.accountSid, b.accountSid]);
}

/** Whether a value (deeply) holds a string that is not well-formed UTF-16. */
function hasUnpairedSurrogate(value: unknown): boolean {
  if (typeof value === "string") return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(value);
  if (Array.isArray(value)) return value.some(hasUnpairedSurrogate);
  if (value && typeof value === "object" && !(value instanceof Uint8Array)) return Object.values(value).some(hasUnpairedSurrogate);
  return false;
}

/** After an answer: writes on an error, B's data shown to someone else. */
async function afterAnswer(failed: boolean, auth: string | undefined, shown: string, problems: string[]): Promise<void> {
  const after = await dbDigest(t.db.orm);
  if (failed) {
    const changed = changedTables(digest, after);
    if (changed.length > 0) problems.push(`an error, but ${changed.join(", ")} changed`);
  }
  digest = after;
  // B itself and the operator may see B's data; nobody else.
  if (auth !== world.b.auth && !isOperatorAuth(auth)) {
    const leaked = world.b.secrets.filter((s) => shown.includes(s));
    if (leaked.length > 0) problems.push(`B's data in the answer: ${leaked.join(", ")}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Typed clients

const clients = new Map<string, Client<any>>();
function clientFor(m: RpcMethod, protocol: RpcProtocol): Client<any> {
  const key = `${protocol} ${m.service.typeName}`;
  let client = clients.get(key);
  if (!client) clients.set(key, (client = createClient(m.service, transports[protocol])));
  return client;
}

describe("every method, through the generated clients", () => {
  it.each(methods.map((m, i) => [m.name, m, i] as const))(
    "%s",
    async (_name, m, _index) => {
      const arb = fc.record({
        protocol: fc.constantFrom(...RPC_PROTOCOLS),
        init: typedInitFor(m.method.input, hintsFor(m)),
        auth: authFor(m),
        idem: idempotencyKey,
      });
      await fc.assert(
        fc.asyncProperty(arb, async ({ protocol, init, auth, idem }) => {
          const headers: Record<string, string> = {};
          if (auth !== undefined) headers.authorization = auth;
          if (idem !== undefined) headers["idempotency-key"] = idem;
          const call = clientFor(m, protocol)[m.method.localName] as (req: unknown, opts: object) => Promise<unknown>;
          const problems: string[] = [];
          let shown = "";
          let failed = false;
          try {
            const res = await withTimeout(call(init, { headers, timeoutMs: ANSWER_WITHIN_MS }), ANSWER_WITHIN_MS + 5000, `${protocol} ${m.name}`);
            shown = toJsonString(m.method.output, create(m.method.output, res as never));
            tally.add("ok");
          } catch (e) {
            failed = true;
            const err = ConnectError.from(e);
            tally.add(codeToString(err.code));
            shown = `${err.rawMessage} ${JSON.stringify(err.details)}`;
            // protobuf-es refuses a JSON string that is not well-formed UTF-16 before the method runs.
            const framework = protocol === "connect-json" && hasUnpairedSurrogate(init);
            problems.push(...rpcErrorProblems(e, { switchboard: !framework }));
          }
          await afterAnswer(failed, auth, shown, problems);
          if (problems.length > 0) throw new Error(`${protocol} ${m.name}: ${problems.join("; ")}`);
        }),
        propertyParams(`typed ${m.name}`, RUNS),
      );
    },
    300_000,
  );
});

// ---------------------------------------------------------------------------------------------
// Raw requests

const CONNECT_TYPES = { proto: "application/proto", json: "application/json" };
const ODD_CONTENT_TYPES = [
  "application/connect+proto",
  "application/connect+json",
  "application/x-protobuf",
  "application/protobuf",
  "text/plain",
  "application/grpc-web-text",
  "application/grpc-web-text+proto",
  "application/grpc+xml",
  "application/grpc-web+thrift",
  "",
];

/** A raw request for one method: protocol, content type, encoding, framing and payload all free. */
function rawRequest(m: RpcMethod): fc.Arbitrary<RawRequest> {
  const input: DescMessage = m.method.input;
  const hints = hintsFor(m);
  const typed = typedInitFor(input, hints).map((init) => create(input, init));
  const binary = brokenBinary(typed.map((msg) => toBinary(input, msg)));
  const json = fc
    .oneof({ weight: 3, arbitrary: typed.map((msg) => toJsonString(input, msg)) }, { weight: 2, arbitrary: bodyText(jsonObjectFor(input, hints)) })
    .map((body) => (body === undefined ? new Uint8Array(0) : typeof body === "string" ? new TextEncoder().encode(body) : new Uint8Array(body)));

  return fc
    .record({
      protocol: fc.constantFrom<RawProtocol>("connect", "connect", "grpc", "grpc-web"),
      format: fc.constantFrom<"proto" | "json">("proto", "proto", "json"),
      oddType: fc.oneof({ weight: 8, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom(...ODD_CONTENT_TYPES) }),
      compression: fc.constantFrom("none", "none", "none", "none", "none", "gzip", "gzip-lie", "br-lie", "zstd"),
      httpMethod: fc.constantFrom("POST", "POST", "POST", "POST", "POST", "POST", "POST", "POST", "GET", "PUT"),
      binary,
      json,
      auth: authFor(m),
      protocolVersion: fc.constantFrom(undefined, undefined, undefined, "1", "2", "junk"),
      timeout: fc.constantFrom(undefined, undefined, undefined, undefined, "abc", "-1", "99999999999", "30000", "30S", "1H", "zzz"),
    })
    .chain((r) => {
      const payload = r.format === "proto" ? r.binary : r.json;
      const compressed = r.compression === "gzip" ? gzipSync(payload) : payload;
      if (r.protocol === "connect") return fc.constant({ ...r, body: new Uint8Array(compressed) });
      // A well-framed compressed message carries the compressed flag.
      return framedBody(fc.constant(new Uint8Array(compressed))).map((body) => {
        if (r.compression === "gzip" && body.length >= 5 && body[0] === 0) body[0] = 1;
        return { ...r, body };
      });
    })
    .map((r) => {
      const headers: Record<string, string> = {};
      const contentType =
        r.oddType ??
        (r.protocol === "connect"
          ? CONNECT_TYPES[r.format]
          : r.protocol === "grpc"
            ? `application/grpc${r.format === "json" ? "+json" : ""}`
            : `application/grpc-web+${r.format}`);
      if (contentType !== "") headers["content-type"] = contentType;
      if (r.auth !== undefined) headers.authorization = r.auth;
      const encoding = { none: undefined, gzip: "gzip", "gzip-lie": "gzip", "br-lie": "br", zstd: "zstd" }[r.compression];
      if (r.protocol === "connect") {
        if (encoding) headers["content-encoding"] = encoding;
        if (r.protocolVersion) headers["connect-protocol-version"] = r.protocolVersion;
        if (r.timeout) headers["connect-timeout-ms"] = r.timeout;
      } else {
        if (encoding) headers["grpc-encoding"] = encoding;
        if (r.timeout) headers["grpc-timeout"] = r.timeout;
        headers.te = "trailers";
      }
      return { protocol: r.protocol, httpMethod: r.httpMethod, path: `/${m.service.typeName}/${m.method.name}`, headers, body: r.body };
    });
}

describe("every method, through raw requests", () => {
  it.each(methods.map((m, i) => [m.name, m, i] as const))(
    "%s",
    async (_name, m, _index) => {
      await fc.assert(
        fc.asyncProperty(rawRequest(m), async (req) => {
          const what = `${req.protocol} ${req.httpMethod} ${m.name} ${JSON.stringify(req.headers["content-type"])}`;
          const answer = await (req.protocol === "grpc" ? sendHttp2(liveSession(), req, ANSWER_WITHIN_MS) : sendHttp1(baseUrl, req, ANSWER_WITHIN_MS));
          const problems: string[] = [];
          if (answer.status >= 500) problems.push(`HTTP ${answer.status}`);
          const outcome = rawOutcome(req.protocol, answer);
          let shown = answer.body.toString("latin1");
          switch (outcome.kind) {
            case "ok":
              tally.add("ok");
              break;
            case "http":
              tally.add(`http-${outcome.status}`);
              if (outcome.status < 400) problems.push(`HTTP ${outcome.status} without an answer`);
              // Refused before any RPC protocol spoke (a method or Content-Type no protocol takes, an unknown path): the documented body, never an empty one.
              if (outcome.body === "") problems.push(`HTTP ${outcome.status} with an empty body`);
              else
                problems.push(
                  ...restAnswerProblems({ statusCode: answer.status, headers: Object.fromEntries(answer.headers), body: outcome.body }, req.httpMethod),
                );
              break;
            case "broken":
              tally.add("broken");
              problems.push(outcome.problem);
              break;
            case "error":
              tally.add(codeToString(outcome.error.code));
              shown += ` ${outcome.error.rawMessage}`;
              problems.push(...rpcErrorProblems(outcome.error, { switchboard: false }));
              break;
          }
          await afterAnswer(outcome.kind !== "ok", req.headers.authorization, shown, problems);
          if (problems.length > 0) throw new Error(`${what}: ${problems.join("; ")}\nHTTP ${answer.status} ${shown.slice(0, 300)}`);
        }),
        propertyParams(`raw ${m.name}`, RUNS),
      );
    },
    300_000,
  );
});
