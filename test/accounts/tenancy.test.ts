/**
 * Tenant isolation as a matrix generated from the descriptors, so no route or method is left
 * out: for every account-facing method, every request field that names a resource (a Sid, a
 * number, a sender) is given each of the other tenant's resources of that kind in every state
 * (properties, messages incl. a leased one and a reply, addresses, owned and leased numbers),
 * over REST and the four RPC protocols, in both directions (A attacks B, B attacks A). Every
 * operator method is tried with an account's credentials. Every cell must be refused exactly as
 * documented (a path Sid: 404 NotFound, never 403; a body reference: its 400), show none of the
 * other tenant's data, and write nothing: the database is byte-for-byte the same afterwards.
 * Authentication and malformed Sids are checked over the same generated routes.
 */
import type { AddressInfo } from "node:net";
import { create, toJson, type DescField, type JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RestRoute } from "../../src/rest/rest-routes.js";
import { dbKind } from "../support/db.js";
import { basic, createTestApp, type TestApp } from "../support/harness.js";
import {
  apiRestRoutes,
  apiServices,
  changedTables,
  dbDigest,
  dbRows,
  isOperatorService,
  RPC_PROTOCOLS,
  rpcMethods,
  rpcTransports,
  switchboardReason,
  type RpcMethod,
  type RpcProtocol,
} from "../support/surface.js";
import { createRichTenant, type RichTenant } from "../support/world.js";

let t: TestApp;
let a: RichTenant;
let b: RichTenant;
let baseUrl: string;
let closeTransports: () => void;
const clients = new Map<string, Client<any>>();

const services = await apiServices();
const methods = rpcMethods(services);
const routes = apiRestRoutes(services);

beforeAll(async () => {
  // Hundreds of deliberately wrong credentials from one address: the limit on guessing has its own tests (credential-guessing.test.ts).
  t = await createTestApp({ engine: { loops: false }, config: { authFailures: { perAddress: 0, perAccount: 0, windowMs: 60_000 } } });
  const now = Math.floor(t.clock.now().getTime() / 1000);
  a = await createRichTenant(t.app, "tenantA", now);
  b = await createRichTenant(t.app, "tenantB", now);
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const { transports, close } = rpcTransports(baseUrl);
  closeTransports = close;
  for (const m of methods) for (const p of RPC_PROTOCOLS) clients.set(`${p} ${m.service.typeName}`, createClient(m.service, transports[p]));
}, 120_000);
afterAll(async () => {
  closeTransports?.();
  await t?.close();
});

// ---------------------------------------------------------------------------------------------
// The matrix

/** The kinds of resource a request field can name, by field name. */
type Kind = "account" | "property" | "message" | "address" | "number" | "sender" | "senderId";
const KIND_OF_FIELD: Record<string, Kind> = {
  account_sid: "account",
  property_sid: "property",
  message_sid: "message",
  address_sid: "address",
  number: "number",
  from: "sender",
  sender_id_sid: "senderId",
};
/** Fields named like a resource that are not one: an opt-out's Number is any recipient's phone number, not something an account owns. */
const NOT_RESOURCES = new Set(["OptOutService.CreateOptOut.number", "OptOutService.DeleteOptOut.number"]);
const WHAT: Record<Kind, string> = {
  account: "Account",
  property: "Property",
  message: "Message",
  address: "Address",
  number: "Number",
  sender: "Number",
  senderId: "SenderId",
};

const digits = (e164: string) => e164.slice(1);

/**
 * Every resource of a kind the tenant has, in every state: [label, value as the request carries
 * it, whether its owner may use it there]. The pool number leased to the tenant is not its own.
 */
function resources(kind: Kind, v: RichTenant): [string, string, boolean][] {
  switch (kind) {
    case "account":
      return [["account", v.accountSid, true]];
    case "property":
      return [
        ["property", v.properties.main, true],
        ["SMS-disabled property", v.properties.disabled, true],
      ];
    case "message":
      return Object.entries(v.messages).map(([state, sid]) => [`${state} message`, sid, true]);
    case "address":
      return Object.entries(v.addresses).map(([state, sid]) => [`${state} address`, sid, true]);
    case "number":
      return [
        ["number with an address", digits(v.numbers[0]), true],
        ["second number", digits(v.numbers[1]), true],
        ["pool number leased to it", digits(v.leasedNumber), false],
      ];
    case "senderId":
      return Object.entries(v.senderIds).map(([state, sid]) => [`${state} sender ID`, sid, true]);
    case "sender":
      return [
        ["number with an address", v.numbers[0], true],
        ["second number", v.numbers[1], true],
        ["pool number leased to it", v.leasedNumber, false],
      ];
  }
}

/** A valid request of the caller's own for each account-facing method (a new method needs one here). */
const BASELINES: Record<string, (own: RichTenant) => Record<string, unknown>> = {
  "MessagingService.SendMessage": (o) => ({ propertySid: o.properties.main, from: o.numbers[0], to: "+447700900123", text: "matrix" }),
  "MessagingService.SendBatch": (o) => ({ propertySid: o.properties.main, messages: [{ from: "Acme", to: "+447700900123", text: "matrix" }] }),
  "MessagingService.GetMessage": (o) => ({ messageSid: o.messages.scheduled }),
  "MessagingService.ListMessages": (o) => ({ propertySid: o.properties.main }),
  "MessagingService.CancelMessage": (o) => ({ messageSid: o.messages.scheduled }),
  "AddressService.CreateAddress": (o) => ({ accountSid: o.accountSid, line1: "1 Market St", city: "San Francisco", countryCode: "US", postalCode: "94103" }),
  "AddressService.GetAddress": (o) => ({ addressSid: o.addresses.active }),
  "AddressService.ListAddresses": (o) => ({ accountSid: o.accountSid }),
  "AddressService.DeleteAddress": (o) => ({ addressSid: o.addresses.pending }),
  "NumberService.ListNumbers": (o) => ({ accountSid: o.accountSid }),
  "NumberService.ConfigureNumber": (o) => ({ number: digits(o.numbers[1]), friendly: "matrix", addressSid: o.addresses.active }),
  "OptOutService.ListOptOuts": (o) => ({ accountSid: o.accountSid }),
  "OptOutService.CreateOptOut": (o) => ({ accountSid: o.accountSid, number: "+447700900124" }),
  "OptOutService.DeleteOptOut": (o) => ({ accountSid: o.accountSid, number: "447700900124" }),
  // A name of the tenant's own (M and its Sid's last 8 characters), so that each owner's application is its own.
  "SenderIdService.CreateSenderId": (o) => ({ accountSid: o.accountSid, senderId: `M${o.accountSid.slice(-8)}`, country: "NZ", useCase: "matrix" }),
  "SenderIdService.ListSenderIds": (o) => ({ accountSid: o.accountSid }),
  "SenderIdService.DeleteSenderId": (o) => ({ accountSid: o.accountSid, senderIdSid: o.spareSenderId }),
  "BillingService.ListBalanceEntries": (o) => ({ accountSid: o.accountSid }),
  "BillingService.GetUsage": (o) => ({ accountSid: o.accountSid, startDate: "2026-11-01", endDate: "2026-11-30" }),
  "BillingService.GetBalance": (o) => ({ accountSid: o.accountSid }),
};

/** How a reference in the body (not the path) to someone else's resource is refused (docs/api.md). */
const BODY_REFERENCES: Record<string, { errorCode: string; fieldName: string }> = {
  "MessagingService.SendMessage.from": { errorCode: "SenderNotOwned", fieldName: "From" },
  "NumberService.ConfigureNumber.address_sid": { errorCode: "InvalidParameter", fieldName: "AddressSid" },
};

/** What a cell must answer. */
interface Expected {
  status: number;
  code: Code;
  errorCode: string;
  /** The exact message, when it is fixed. */
  message?: string;
  /** The field the Errors list names. */
  fieldName?: string;
}

/** One attempt: a caller, a method, a request with someone else's resource in one field. */
interface Cell {
  label: string;
  method: RpcMethod;
  route: RestRoute;
  caller: RichTenant;
  victim: RichTenant;
  /** The request as a protobuf init (local names). */
  init: Record<string, unknown>;
  /** The victim's value put in the request ("" for the operator cells). */
  value: string;
  expected: Expected;
  /** The same request made by the owner (a control: the refusal is about ownership), or undefined. */
  ownerInit?: Record<string, unknown>;
}

function routeOf(m: RpcMethod): RestRoute {
  const found = routes.filter((r) => r.rpc === m.method);
  expect(found, m.name).toHaveLength(1);
  return found[0];
}

/** The cells of one direction: `caller` attacks `victim`. */
function matrix(caller: RichTenant, victim: RichTenant): Cell[] {
  const cells: Cell[] = [];
  for (const m of methods) {
    const route = routeOf(m);
    const refs = m.method.input.fields.filter((f) => KIND_OF_FIELD[f.name] !== undefined && !NOT_RESOURCES.has(`${m.name}.${f.name}`));
    if (isOperatorService(m.service)) {
      // An account's credentials on the operator API: 401, whatever the request names.
      const init: Record<string, unknown> = {};
      for (const f of refs) init[f.localName] = resources(KIND_OF_FIELD[f.name], victim)[0][1];
      cells.push({
        label: `${m.name} with an account's credentials`,
        method: m,
        route,
        caller,
        victim,
        init,
        value: "",
        expected: {
          status: 401,
          code: Code.Unauthenticated,
          errorCode: "Unauthorized",
          message: "Operator calls need `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`.",
        },
      });
      continue;
    }
    const baseline = BASELINES[m.name];
    expect(baseline, `no baseline request for ${m.name}: add one to BASELINES`).toBeDefined();
    expect(refs.length, `${m.name} names no resource`).toBeGreaterThan(0);
    const pathFields = new Set(route.pathFields.map((f) => f.name));
    for (const f of refs) {
      const kind = KIND_OF_FIELD[f.name];
      for (const [what, value, ownerCan] of resources(kind, victim)) {
        let expected: Expected;
        if (pathFields.has(f.name)) {
          expected = { status: 404, code: Code.NotFound, errorCode: "NotFound", message: `${WHAT[kind]} ${value} was not found.` };
        } else {
          const body = BODY_REFERENCES[`${m.name}.${f.name}`];
          expect(body, `how is ${m.name}.${f.name} refused? add it to BODY_REFERENCES`).toBeDefined();
          expected = { status: 400, code: Code.InvalidArgument, errorCode: body.errorCode, fieldName: body.fieldName };
        }
        cells.push({
          label: `${m.name}: ${f.jsonName} = the other tenant's ${what}`,
          method: m,
          route,
          caller,
          victim,
          init: { ...baseline(caller), [f.localName]: value },
          value,
          expected,
          ownerInit: ownerCan ? { ...baseline(victim), [f.localName]: value } : undefined,
        });
      }
    }
  }
  return cells;
}

/** The REST request of a cell: path fields into the template, the rest as the JSON body. */
function restRequest(route: RestRoute, init: Record<string, unknown>): { method: RestRoute["method"]; url: string; payload?: JsonObject } {
  const input = route.rpc.input;
  const msg = create(input, init as never) as unknown as Record<string, unknown>;
  const byName = new Map<string, DescField>(input.fields.map((f) => [f.name, f]));
  const url = route.template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)(?:=\*)?\}/g, (_, name: string) =>
    encodeURIComponent(String(msg[byName.get(name)!.localName])),
  );
  if (route.body === "") return { method: route.method, url };
  const json = toJson(input, msg as never) as JsonObject;
  for (const f of route.pathFields) delete json[f.jsonName];
  return { method: route.method, url, payload: json };
}

/** Strings of the victim's that may not appear in an answer to the caller (the supplied value aside). */
function leaks(text: string, cell: Cell): string[] {
  const v = cell.victim;
  const sids = [
    v.accountSid,
    ...Object.values(v.properties),
    ...Object.values(v.messages),
    ...Object.values(v.addresses),
    ...Object.values(v.senderIds),
    v.spareSenderId,
    ...v.numbers.map(digits),
    digits(v.leasedNumber),
    v.leasedRecipient,
  ];
  return [...v.secrets, ...sids.filter((s) => s !== cell.value && `+${s}` !== cell.value)].filter((s) => text.includes(s));
}

/** Problems with one cell on one transport (empty when it is refused as expected). */
async function attempt(cell: Cell, transport: "rest" | RpcProtocol): Promise<string[]> {
  const e = cell.expected;
  const authorization = cell.caller.auth;
  const problems: string[] = [];
  if (transport === "rest") {
    const req = restRequest(cell.route, cell.init);
    const res = await t.app.inject({ method: req.method, url: req.url, headers: { authorization }, ...(req.payload ? { payload: req.payload } : {}) });
    if (res.statusCode !== e.status) problems.push(`HTTP ${res.statusCode}, expected ${e.status}: ${res.body.slice(0, 200)}`);
    const rs = (JSON.parse(res.body) as { ResponseStatus?: { ErrorCode: string; Message: string; Errors: { FieldName: string; ErrorCode: string }[] } })
      .ResponseStatus;
    if (rs?.ErrorCode !== e.errorCode) problems.push(`ErrorCode ${rs?.ErrorCode}, expected ${e.errorCode}`);
    if (e.message !== undefined && rs?.Message !== e.message) problems.push(`Message ${JSON.stringify(rs?.Message)}, expected ${JSON.stringify(e.message)}`);
    if (e.fieldName !== undefined && !rs?.Errors.some((x) => x.FieldName === e.fieldName && x.ErrorCode === e.errorCode))
      problems.push(`Errors do not name ${e.fieldName}: ${JSON.stringify(rs?.Errors)}`);
    problems.push(...leaks(res.body, cell).map((s) => `shows ${s}`));
    return problems;
  }
  const client = clients.get(`${transport} ${cell.method.service.typeName}`)!;
  const call = client[cell.method.method.localName] as (req: unknown, opts: object) => Promise<unknown>;
  try {
    await call(create(cell.method.method.input, cell.init as never), { headers: { authorization }, timeoutMs: 20_000 });
    problems.push("succeeded");
  } catch (reason) {
    const err = ConnectError.from(reason);
    if (err.code !== e.code) problems.push(`code ${Code[err.code]}, expected ${Code[e.code]}: ${err.rawMessage}`);
    if (switchboardReason(err) !== e.errorCode) problems.push(`ErrorInfo ${switchboardReason(err)}, expected ${e.errorCode}`);
    if (e.message !== undefined && err.rawMessage !== e.message)
      problems.push(`message ${JSON.stringify(err.rawMessage)}, expected ${JSON.stringify(e.message)}`);
    problems.push(...leaks(`${err.rawMessage} ${JSON.stringify(err.details)}`, cell).map((s) => `shows ${s}`));
  }
  return problems;
}

const TRANSPORTS = ["rest", ...RPC_PROTOCOLS] as const;

describe("tenant isolation matrix", () => {
  let memo: Cell[] | undefined;
  /** Both directions: A attacks B, B attacks A. */
  const allCells = () => (memo ??= [...matrix(a, b), ...matrix(b, a)]);

  it("is generated from every route and method: 45 cells per direction for the 20 account methods, 43 operator cells", () => {
    const ab = matrix(a, b);
    const ba = matrix(b, a);
    expect(methods).toHaveLength(63);
    expect(ab.filter((c) => !isOperatorService(c.method.service))).toHaveLength(45);
    expect(ab.filter((c) => isOperatorService(c.method.service))).toHaveLength(43);
    // Every method appears, each account method with each resource field it has.
    expect(new Set(ab.map((c) => c.method.name))).toStrictEqual(new Set(methods.map((m) => m.name)));
    expect(ba).toHaveLength(ab.length);
    expect(allCells().length * TRANSPORTS.length).toBe(880);
  });

  it("every cell on every transport is refused as documented, shows nothing of the other tenant's, and writes nothing", async () => {
    const cells = allCells();
    const rowsBefore = await dbRows(t.db.orm);
    const digestBefore = await dbDigest(t.db.orm);
    const failures: string[] = [];
    let attempts = 0;
    for (const cell of cells) {
      for (const transport of TRANSPORTS) {
        const caller = cell.caller === a ? "A" : "B";
        for (const p of await attempt(cell, transport)) failures.push(`${caller} ${transport} ${cell.label}: ${p}`);
        const changed = changedTables(digestBefore, await dbDigest(t.db.orm));
        if (changed.length > 0) failures.push(`${caller} ${transport} ${cell.label}: wrote to ${changed.join(", ")}`);
        attempts++;
      }
    }
    expect(failures).toStrictEqual([]);
    expect(attempts).toBe(880);
    expect(await dbRows(t.db.orm)).toStrictEqual(rowsBefore);
    console.log(
      `[tenancy] isolation matrix (${dbKind()}): ${cells.length} cells × ${TRANSPORTS.length} transports = ${attempts} attempts, all refused as documented, database unchanged`,
    );
  }, 180_000);

  it("the owner's own request with the same resource is not refused as someone else's (the refusals are about ownership)", async () => {
    // REST only; run last since these may write. DELETE routes last, so that nothing is deleted before it is read.
    const controls = allCells()
      .filter((c) => c.ownerInit)
      .sort((x, y) => Number(x.route.method === "DELETE") - Number(y.route.method === "DELETE"));
    expect(controls).toHaveLength(86); // 45 per direction, less the leased pool number as Number and as From
    for (const c of controls) {
      const req = restRequest(c.route, c.ownerInit!);
      const res = await t.app.inject({
        method: req.method,
        url: req.url,
        headers: { authorization: c.victim.auth },
        ...(req.payload ? { payload: req.payload } : {}),
      });
      const rs = res.statusCode === 200 ? undefined : (res.json() as { ResponseStatus: { ErrorCode: string } }).ResponseStatus;
      expect(res.statusCode, `${c.label}: ${res.body}`).not.toBe(404);
      expect(rs?.ErrorCode, `${c.label}: ${res.body}`).not.toBe(c.expected.errorCode);
    }
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------

/** The REST request of each account-facing route, aimed at B's resources. */
function restRoutesAtB(): { label: string; req: ReturnType<typeof restRequest> }[] {
  return methods
    .filter((m) => !isOperatorService(m.service))
    .map((m) => {
      const route = routeOf(m);
      return { label: `${route.method} ${route.template}`, req: restRequest(route, BASELINES[m.name](b)) };
    });
}

describe("authentication", () => {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const WRONG = { ResponseStatus: { ErrorCode: "Unauthorized", Message: "The AccountSid or token is wrong.", Errors: [] } };
  const MISSING = {
    ResponseStatus: {
      ErrorCode: "Unauthorized",
      Message: "Authentication required: use HTTP Basic with your AccountSid as user and your token as password.",
      Errors: [],
    },
  };

  /** [name, header, expected body] for every credential that must be refused. */
  function badCredentials(): [string, string | null, object][] {
    return [
      ["no Authorization header", null, MISSING],
      ["a wrong token", basic(a.accountSid, "x".repeat(40)), WRONG],
      ["B's token with A's Sid", basic(a.accountSid, b.token), WRONG],
      ["A's token with a one-character change", basic(a.accountSid, a.token.slice(0, -1) + (a.token.endsWith("A") ? "B" : "A")), WRONG],
      ["A's token with a suffix", basic(a.accountSid, a.token + "x"), WRONG],
      ["an empty token", basic(a.accountSid, ""), WRONG],
      ["an unknown AccountSid", basic("AC" + "0".repeat(30), a.token), WRONG],
      ["a lower-case AccountSid", basic(a.accountSid.toLowerCase(), a.token), WRONG],
      ["a property Sid as user", basic(a.propertySid, a.token), WRONG],
      ["an empty user", basic("", a.token), WRONG],
      ["Basic without credentials", "Basic", MISSING],
      ["Basic with a blank", "Basic   ", MISSING],
      ["credentials without a colon", `Basic ${b64(a.accountSid + a.token)}`, MISSING],
      ["bad Base64 characters", "Basic %%%%****", MISSING],
      ["Base64 with spaces inside", `Basic ${b64(`${a.accountSid}:${a.token}`).slice(0, 10)} ${b64(`${a.accountSid}:${a.token}`).slice(10)}`, MISSING],
      ["truncated Base64", `Basic ${b64(`${a.accountSid}:${a.token}`).slice(0, 7)}`, MISSING],
      ["a Bearer token", `Bearer ${a.token}`, MISSING],
      ["a Digest header", `Digest username="${a.accountSid}"`, MISSING],
      ["the raw credentials without Base64", `Basic ${a.accountSid}:${a.token}`, MISSING],
    ];
  }

  it('every refused credential is 401 Unauthorized with WWW-Authenticate: Basic realm="switchboard"', async () => {
    for (const [name, header, body] of badCredentials()) {
      const res = await t.app.inject({
        method: "GET",
        url: `/v2/Accounts/${a.accountSid}/Addresses`,
        headers: header === null ? {} : { authorization: header },
      });
      expect(res.statusCode, name).toBe(401);
      expect(res.headers["www-authenticate"], name).toBe('Basic realm="switchboard"');
      expect(res.headers["content-type"], name).toMatch(/^application\/json/);
      expect(res.json(), name).toStrictEqual(body);
    }
  });

  it("401 comes before 404 and before body validation on every account route", async () => {
    const before = await dbRows(t.db.orm);
    const routesAtB = restRoutesAtB();
    expect(routesAtB).toHaveLength(20);
    for (const { label, req } of routesAtB) {
      for (const header of [null, basic(b.accountSid, "wrong"), "Basic !!"]) {
        const res = await t.app.inject({
          method: req.method,
          url: req.url,
          headers: header === null ? {} : { authorization: header },
          ...(req.payload ? { payload: req.payload } : {}),
        });
        expect(res.statusCode, `${label} ${header}`).toBe(401);
        expect(res.headers["www-authenticate"]).toBe('Basic realm="switchboard"');
        expect(res.json().ResponseStatus.ErrorCode).toBe("Unauthorized");
      }
    }
    // Even a body that is not JSON is refused as 401, not 400.
    const junk = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${a.propertySid}/Messages`,
      headers: { "content-type": "application/json" },
      payload: "{nope",
    });
    expect(junk.statusCode).toBe(401);
    expect(await dbRows(t.db.orm)).toStrictEqual(before);
  });

  it("the correct credentials work, with any case of the Basic scheme", async () => {
    for (const scheme of ["Basic", "basic", "BASIC"]) {
      const header = `${scheme} ${b64(`${a.accountSid}:${a.token}`)}`;
      const res = await t.app.inject({ method: "GET", url: `/v2/Accounts/${a.accountSid}/Numbers`, headers: { authorization: header } });
      expect(res.statusCode, scheme).toBe(200);
    }
  });
});

describe("malformed Sids", () => {
  it("a path Sid with the wrong prefix, length, case or alphabet, or unknown, is 404 NotFound on every account route", async () => {
    const before = await dbRows(t.db.orm);
    const variants = (sid: string) => [
      sid.slice(0, -1), // 31 characters
      sid + "A", // 33 characters
      (sid.startsWith("AC") ? "PR" : "AC") + sid.slice(2), // wrong prefix
      sid.toLowerCase(),
      sid.slice(0, 2) + "-".repeat(30),
      sid.slice(0, 2),
      "%20" + sid,
      sid.slice(0, 2) + "0".repeat(30), // well formed, unknown
    ];
    let n = 0;
    for (const m of methods.filter((x) => !isOperatorService(x.service))) {
      const route = routeOf(m);
      for (const field of route.pathFields.filter((f) => f.name.endsWith("_sid"))) {
        const what = WHAT[KIND_OF_FIELD[field.name]];
        const init = BASELINES[m.name](a);
        for (const sid of variants(init[field.localName] as string)) {
          const req = restRequest(route, init);
          const url = req.url.replace(encodeURIComponent(init[field.localName] as string), sid);
          const res = await t.app.inject({ method: req.method, url, headers: { authorization: a.auth }, ...(req.payload ? { payload: req.payload } : {}) });
          expect(res.statusCode, `${req.method} ${url}`).toBe(404);
          expect(res.json().ResponseStatus.ErrorCode, `${req.method} ${url}`).toBe("NotFound");
          expect(res.json().ResponseStatus.Message, url).toMatch(new RegExp(`^${what} .* was not found\\.$`));
          n++;
        }
      }
    }
    expect(n).toBe(160); // 20 path Sids (13 routes, the SenderIds routes' AccountSid and SenderIdSid, the BalanceEntries, Balance and Usage routes' AccountSid) × 8 variants
    expect(await dbRows(t.db.orm)).toStrictEqual(before);
  });
});
