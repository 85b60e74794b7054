/**
 * No request, however malformed, gets a 5xx: every POST route of /v2 and /admin/v1 is fed
 * a deterministic set of broken bodies (not JSON, not an object, deep nesting, wrong types in
 * every field, huge strings, too large, wrong content type, NUL characters, duplicate keys) and
 * the GET list routes junk query strings. Every answer must be a 4xx with the documented JSON
 * error body, and the database must be exactly as before (every row of every table).
 */
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, addPoolNumbers, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

let t: TestApp;
let a: Tenant;
/** The account, property and number the operator routes work on. */
let victim: Tenant;
let activeAddressSid: string;
let pendingAddressSid: string;
const BEARER = `Bearer ${ADMIN_TOKEN}`;

beforeAll(async () => {
  t = await createTestApp();
  a = await createTenant(t.app);
  victim = await createTenant(t.app);
  await addPoolNumbers(t.app, 2);
  const add = async (body: object) => {
    const res = await t.app.inject({ method: "POST", url: `/v2/Accounts/${a.accountSid}/Addresses`, headers: { authorization: a.auth }, payload: body });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().AddressSid as string;
  };
  activeAddressSid = await add({ Line1: "1 Market St", City: "San Francisco", CountryCode: "US", PostalCode: "94103" });
  pendingAddressSid = await add({ Line1: "1 Market St", City: "San Francisco", CountryCode: "US" });
  // Some history to list.
  const sent = await t.app.inject({
    method: "POST",
    url: `/v2/Properties/${a.propertySid}/Messages`,
    headers: { authorization: a.auth },
    payload: { From: "Acme", To: "+447700900123", Text: "seed" },
  });
  expect(sent.statusCode, sent.body).toBe(200);
});
afterAll(async () => {
  await t?.close();
});

// ---------------------------------------------------------------------------------------------
// The database before and after: every row of every table.

/** Every table but limit_buckets (the shared limits' counters, charged by every send request: test/support/surface.ts). */
async function snapshot(): Promise<Record<string, unknown[]>> {
  const em = t.db.orm.em.fork();
  const tables = await em.execute<{ table_name: string }[]>(
    `select table_name from information_schema.tables
      where table_schema = current_schema() and table_type = 'BASE TABLE' and table_name not like 'mikro_orm%'
          and table_name <> 'limit_buckets'
      order by table_name`,
  );
  const out: Record<string, unknown[]> = {};
  for (const { table_name } of tables) out[table_name] = await em.execute(`select * from "${table_name}" as r order by r::text`);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Routes and their request fields.

type Kind = "string" | "bool" | "int64" | "messages";

interface PostRoute {
  name: string;
  url: () => string;
  auth: () => string;
  /** Request fields as clients write them; path-bound ones are listed in `path`. */
  fields: Record<string, Kind>;
  path: string[];
  /** A valid body: every case breaks it in one way. */
  base: () => Record<string, unknown>;
}

const SEND_BASE = { From: "Acme", To: "+447700900123", Text: "hi" };
const SEND_FIELDS: Record<string, Kind> = {
  PropertySid: "string",
  From: "string",
  To: "string",
  Text: "string",
  Schedule: "int64",
  DeliveryReceipt: "bool",
  DeliveryReceiptWebhookUri: "string",
  DeliveryReceiptWebhookMethod: "string",
  ForwardToSms: "string",
  ForwardFromSms: "string",
  ForwardToEmail: "string",
  ForwardFromEmail: "string",
  WebhookUri: "string",
  WebhookMethod: "string",
};

const ROUTES: PostRoute[] = [
  {
    name: "send",
    url: () => `/v2/Properties/${a.propertySid}/Messages`,
    auth: () => a.auth,
    fields: SEND_FIELDS,
    path: ["PropertySid"],
    base: () => ({ ...SEND_BASE }),
  },
  {
    name: "batch",
    url: () => `/v2/Properties/${a.propertySid}/BatchMessages`,
    auth: () => a.auth,
    fields: { PropertySid: "string", Messages: "messages" },
    path: ["PropertySid"],
    base: () => ({ Messages: [{ ...SEND_BASE }] }),
  },
  {
    name: "add address",
    url: () => `/v2/Accounts/${a.accountSid}/Addresses`,
    auth: () => a.auth,
    fields: {
      AccountSid: "string",
      Friendly: "string",
      Reference: "string",
      Line1: "string",
      Line2: "string",
      City: "string",
      Region: "string",
      CountryCode: "string",
      PostalCode: "string",
    },
    path: ["AccountSid"],
    base: () => ({ Line1: "1 Market St", City: "San Francisco", CountryCode: "US", PostalCode: "94103" }),
  },
  {
    name: "configure number",
    url: () => `/v2/Numbers/${a.ownedNumber.slice(1)}`,
    auth: () => a.auth,
    fields: { Number: "string", Friendly: "string", AddressSid: "string" },
    path: ["Number"],
    base: () => ({ Friendly: "Desk", AddressSid: activeAddressSid }),
  },
  {
    name: "create account",
    url: () => "/admin/v1/Accounts",
    auth: () => BEARER,
    fields: { Name: "string", SmsEnabled: "bool" },
    path: [],
    base: () => ({ Name: "Acme", SmsEnabled: true }),
  },
  {
    name: "update account",
    url: () => `/admin/v1/Accounts/${victim.accountSid}`,
    auth: () => BEARER,
    fields: { AccountSid: "string", Name: "string", SmsEnabled: "bool" },
    path: ["AccountSid"],
    base: () => ({ Name: "Renamed", SmsEnabled: false }),
  },
  {
    name: "rotate token",
    url: () => `/admin/v1/Accounts/${victim.accountSid}/Token`,
    auth: () => BEARER,
    fields: { AccountSid: "string" },
    path: ["AccountSid"],
    base: () => ({}),
  },
  {
    name: "create property",
    url: () => `/admin/v1/Accounts/${victim.accountSid}/Properties`,
    auth: () => BEARER,
    fields: { AccountSid: "string", Name: "string", SmsEnabled: "bool" },
    path: ["AccountSid"],
    base: () => ({ Name: "Site", SmsEnabled: true }),
  },
  {
    name: "update property",
    url: () => `/admin/v1/Properties/${victim.propertySid}`,
    auth: () => BEARER,
    fields: { PropertySid: "string", Name: "string", SmsEnabled: "bool" },
    path: ["PropertySid"],
    base: () => ({ Name: "Renamed", SmsEnabled: false }),
  },
  {
    name: "create number",
    url: () => "/admin/v1/Numbers",
    auth: () => BEARER,
    fields: { Number: "string", AccountSid: "string" },
    path: [],
    base: () => ({ Number: "+14155550199", AccountSid: victim.accountSid }),
  },
  {
    name: "review address",
    url: () => `/admin/v1/Addresses/${pendingAddressSid}/Review`,
    auth: () => BEARER,
    fields: { AddressSid: "string", Status: "string" },
    path: ["AddressSid"],
    base: () => ({ Status: "Active" }),
  },
];

// ---------------------------------------------------------------------------------------------
// The deterministic case generator.

interface Case {
  label: string;
  payload: string | Buffer;
  contentType?: string;
  /** Exact status, or undefined for "some 4xx". */
  status?: number;
  errorCode?: string;
  /** A field the Errors list must name (exactly, or as a prefix ending in `[` or `.`). */
  field?: string;
}

const deepArray = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
const deepObject = (depth: number) => '{"a":'.repeat(depth) + "1" + "}".repeat(depth);

const WRONG: Record<Kind, unknown[]> = {
  string: [0, -1.5, true, false, {}, { a: "b" }, [], ["x"]],
  bool: ["true", 0, 1, "yes", {}, [true]],
  int64: ["abc", 1.5, true, {}, [1], "1e3", "", 1e300, "99999999999999999999999", "0x10"],
  messages: ["x", 5, true, {}, [5], [null], ["x"], [[]], [{ To: 5 }], [{ Text: ["hi"] }]],
};

const NOT_JSON = [
  "{",
  "}",
  "not json",
  "{'Name':'x'}",
  '{"Name":"x",}',
  '{"Name":}',
  "[1,",
  "NaN",
  "undefined",
  "{} {}",
  "{}garbage",
  '"unterminated',
  "tru",
  "01",
  '{"Name":"\\x41"}',
  '{"Name":"a\u0000b"}', // a raw control character inside a JSON string
  "\u0000",
  "<xml/>",
  "Name=x&Text=y",
];
const NOT_OBJECT = ["[]", "[{}]", '"string"', '""', "42", "-0", "1e999", "true", "false", "null", '[{"Name":"x"}]'];

/** 100 kB of text that is valid for no field (not a number, not an e-mail, not a URI...). */
const HUGE = "x".repeat(100_000);

function casesFor(route: PostRoute): Case[] {
  const cases: Case[] = [];
  const own = Object.keys(route.fields).filter((f) => !route.path.includes(f));
  const ownStrings = own.filter((f) => route.fields[f] === "string");
  const base = route.base();
  const json = (body: unknown) => JSON.stringify(body);

  for (const text of NOT_JSON) cases.push({ label: `not JSON ${json(text.slice(0, 20))}`, payload: text, status: 400, errorCode: "MalformedRequest" });
  cases.push({ label: "invalid UTF-8 bytes", payload: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), status: 400, errorCode: "MalformedRequest" });
  for (const text of NOT_OBJECT) cases.push({ label: `not an object ${text}`, payload: text, status: 400, errorCode: "MalformedRequest" });
  cases.push({ label: "the valid body inside an array", payload: json([base]), status: 400, errorCode: "MalformedRequest" });

  for (const depth of [1000, 10_000, 100_000]) {
    cases.push({ label: `array nested ${depth} deep`, payload: deepArray(depth), status: 400, errorCode: "MalformedRequest" });
  }
  for (const field of Object.keys(route.fields)) {
    const head = json({ ...base, [field]: 0 }).replace(`"${field}":0`, `"${field}":${deepObject(1000)}`);
    cases.push({ label: `${field} an object nested 1000 deep`, payload: head, status: 400, errorCode: "InvalidParameter", field });
  }
  const first = Object.keys(route.fields)[0];
  cases.push({
    label: `${first} an array nested 10000 deep`,
    payload: json({ ...base, [first]: 0 }).replace(`"${first}":0`, `"${first}":${deepArray(10_000)}`),
    status: 400,
    errorCode: "InvalidParameter",
    field: first,
  });

  for (const [field, kind] of Object.entries(route.fields)) {
    for (const value of WRONG[kind]) {
      cases.push({ label: `${field} = ${json(value)}`, payload: json({ ...base, [field]: value }), status: 400, errorCode: "InvalidParameter", field });
    }
  }
  const allWrong = Object.fromEntries(Object.entries(route.fields).map(([f, k], i) => [f, WRONG[k][i % WRONG[k].length]]));
  cases.push({
    label: "every field of a wrong type",
    payload: json(allWrong),
    status: 400,
    errorCode: "InvalidParameter",
    field: Object.keys(route.fields).join("|"),
  });

  for (const field of ownStrings) {
    cases.push({ label: `${field} of 100 kB`, payload: json({ ...base, [field]: HUGE }), status: 400 });
    cases.push({ label: `${field} holding NUL`, payload: json({ ...base, [field]: "a\u0000b" }), status: 400, errorCode: "InvalidParameter", field });
    cases.push({ label: `${field} only NUL`, payload: json({ ...base, [field]: "\u0000" }), status: 400, errorCode: "InvalidParameter", field });
  }
  if (ownStrings.length > 0) {
    const each = Math.min(100_000, Math.floor(900_000 / ownStrings.length));
    cases.push({ label: "every string field huge", payload: json(Object.fromEntries(ownStrings.map((f) => [f, "x".repeat(each)]))), status: 400 });
  }

  for (const field of Object.keys(route.fields)) {
    const wrong = WRONG[route.fields[field]][0];
    // JSON.parse keeps the last of duplicate keys: a valid value first, then a wrong one.
    const text = `{"${field}":${json(base[field] ?? "ok")},${json(base).slice(1, -1)}${Object.keys(base).length ? "," : ""}"${field}":${json(wrong)}}`;
    cases.push({ label: `duplicate key ${field}, last of a wrong type`, payload: text, status: 400, errorCode: "InvalidParameter", field });
  }

  const big = json({ ...base, Padding: "x".repeat(1024 * 1024 + 10) });
  cases.push({ label: "body over 1 MiB", payload: big, status: 413, errorCode: "PayloadTooLarge" });
  cases.push({ label: "body over 1 MiB without a content type", payload: big, contentType: "", status: 413, errorCode: "PayloadTooLarge" });
  cases.push({ label: "text/plain body over 1 MiB", payload: big, contentType: "text/plain" });
  cases.push({ label: "array over 1 MiB", payload: json(new Array(600_000).fill(1)), status: 413, errorCode: "PayloadTooLarge" });

  for (const contentType of [
    "text/plain",
    "text/plain; charset=utf-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/xml",
    "text/json",
    "application/jsonx",
    "application/octet-stream",
  ]) {
    cases.push({ label: `valid body as ${contentType}`, payload: json(base), contentType, status: 415, errorCode: "UnsupportedMediaType" });
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Checking an answer.

/** Problems with an error answer (empty when it is a 4xx with the documented body). */
function errorProblems(res: LightMyRequestResponse, c: Pick<Case, "status" | "errorCode" | "field">): string[] {
  const problems: string[] = [];
  if (res.statusCode < 400 || res.statusCode > 499) problems.push(`status ${res.statusCode}`);
  if (c.status !== undefined && res.statusCode !== c.status) problems.push(`status ${res.statusCode}, expected ${c.status}`);
  if (!/^application\/json/.test(String(res.headers["content-type"]))) problems.push(`content-type ${res.headers["content-type"]}`);
  let body: any;
  try {
    body = JSON.parse(res.body);
  } catch {
    return [...problems, `body is not JSON: ${res.body.slice(0, 100)}`];
  }
  const rs = body?.ResponseStatus;
  if (!rs || Object.keys(body).length !== 1) return [...problems, `no ResponseStatus: ${res.body.slice(0, 200)}`];
  if (typeof rs.ErrorCode !== "string" || !/^[A-Z][A-Za-z]+$/.test(rs.ErrorCode)) problems.push(`ErrorCode ${rs.ErrorCode}`);
  if (typeof rs.Message !== "string" || rs.Message === "") problems.push("no Message");
  if (!Array.isArray(rs.Errors)) problems.push("Errors is not a list");
  if (rs.ErrorCode === "InternalError") problems.push("InternalError");
  if (c.errorCode !== undefined && rs.ErrorCode !== c.errorCode)
    problems.push(`ErrorCode ${rs.ErrorCode}, expected ${c.errorCode}: ${rs.Message.slice(0, 200)}`);
  if (c.field !== undefined && Array.isArray(rs.Errors)) {
    const named: string[] = rs.Errors.map((e: any) => e.FieldName);
    for (const field of c.field.split("|")) {
      const ok = named.some((n) => n === field || n.startsWith(`${field}[`) || n.startsWith(`${field}.`));
      if (!ok) problems.push(`Errors do not name ${field}: ${named.join(", ")}`);
    }
  }
  return problems;
}

async function send(method: "POST" | "GET", url: string, auth: string, payload?: string | Buffer, contentType = "application/json") {
  const headers: Record<string, string> = { authorization: auth };
  if (contentType !== "") headers["content-type"] = contentType;
  return t.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) });
}

// ---------------------------------------------------------------------------------------------

describe("malformed POST bodies never give a 5xx and write nothing", () => {
  let total = 0;

  it.each(ROUTES.map((r) => [r.name, r] as const))("%s", async (_name, route) => {
    const cases = casesFor(route);
    expect(cases.length).toBeGreaterThan(40);
    const before = await snapshot();
    const failures: string[] = [];
    for (const c of cases) {
      const res = await send("POST", route.url(), route.auth(), c.payload, c.contentType);
      for (const p of errorProblems(res, c)) failures.push(`${c.label}: ${p}`);
    }
    expect(failures).toStrictEqual([]);
    expect(await snapshot()).toStrictEqual(before);
    total += cases.length;
  });

  it("covered a few hundred cases", () => {
    expect(total).toBeGreaterThan(500);
  });

  it("the base bodies are valid (so each case above broke exactly what it says)", async () => {
    // Run last: these do write. Each base body must succeed, or the cases would prove nothing.
    for (const route of ROUTES) {
      const res = await send("POST", route.url(), route.auth(), JSON.stringify(route.base()));
      expect(res.statusCode, `${route.name}: ${res.body.slice(0, 300)}`).toBe(200);
    }
  });
});

describe("batch items", () => {
  it("a bad field inside an item is a 400 naming the item; bad values are per-item errors", async () => {
    const url = `/v2/Properties/${a.propertySid}/BatchMessages`;
    const before = await snapshot();
    const typed = await send("POST", url, a.auth, JSON.stringify({ Messages: [SEND_BASE, { ...SEND_BASE, To: 5 }, { ...SEND_BASE, Schedule: "soon" }] }));
    expect(errorProblems(typed, { status: 400, errorCode: "InvalidParameter", field: "Messages[1].To|Messages[2].Schedule" })).toStrictEqual([]);
    const nul = await send("POST", url, a.auth, JSON.stringify({ Messages: [SEND_BASE, { ...SEND_BASE, Text: "a\u0000b" }] }));
    expect(errorProblems(nul, { status: 400, errorCode: "InvalidParameter", field: "Messages[1].Text" })).toStrictEqual([]);
    const tooMany = await send("POST", url, a.auth, JSON.stringify({ Messages: new Array(101).fill(SEND_BASE) }));
    expect(errorProblems(tooMany, { status: 400, errorCode: "InvalidParameter", field: "Messages" })).toStrictEqual([]);
    const none = await send("POST", url, a.auth, JSON.stringify({ Messages: [] }));
    expect(errorProblems(none, { status: 400, errorCode: "MissingParameter", field: "Messages" })).toStrictEqual([]);
    expect(await snapshot()).toStrictEqual(before);

    // Values that are well-typed but wrong are refused per item, in a 200.
    const items = [
      { ...SEND_BASE, To: HUGE },
      { ...SEND_BASE, Text: HUGE },
      { ...SEND_BASE, From: HUGE },
      { ...SEND_BASE, ForwardToEmail: HUGE },
      { ...SEND_BASE, WebhookUri: HUGE },
      { ...SEND_BASE, DeliveryReceiptWebhookMethod: HUGE },
      { To: "", Text: "" },
      {},
    ];
    const res = await send("POST", url, a.auth, JSON.stringify({ Messages: items }));
    expect(res.statusCode).toBe(200);
    const results = res.json().Messages;
    expect(results).toHaveLength(items.length);
    for (const r of results) {
      expect(Object.keys(r)).toStrictEqual(["ResponseStatus"]);
      expect(r.ResponseStatus.ErrorCode).toMatch(/^[A-Z][A-Za-z]+$/);
      expect(r.ResponseStatus.ErrorCode).not.toBe("InternalError");
      expect(r.ResponseStatus.Message).not.toBe("");
    }
    expect(await snapshot()).toStrictEqual(before);
  });
});

describe("junk query strings on the GET list routes", () => {
  const list = () => [
    { url: `/v2/Properties/${a.propertySid}/Messages`, params: ["Results_Count", "Results_Skip", "Date_From", "Date_To", "Status", "Direction"] },
    {
      url: `/v2/Accounts/${a.accountSid}/Addresses`,
      params: ["Results_Count", "Results_Skip", "Friendly", "Reference", "City", "Region", "CountryCode", "PostalCode"],
    },
    { url: `/v2/Accounts/${a.accountSid}/Numbers`, params: ["Results_Count", "Results_Skip"] },
  ];
  const JUNK: Record<string, string[]> = {
    Results_Count: ["abc", "-1", "1e99", "0", "1001", "1.5", "", "99999999999", "0x10", "%00", "1%002", "NaN", "Infinity", "%F0%9F%98%80"],
    Results_Skip: ["abc", "-1", "1e99", "1.5", "99999999999", "%00", "-0x1"],
    Date_From: [
      "xyz",
      "1e99",
      "1.5",
      "",
      "9223372036854775807",
      "-9223372036854775808",
      "99999999999999999999",
      "8640000000001",
      "-62135596801",
      "253402300800",
      "%00",
    ],
    Date_To: ["xyz", "-1e3", "9223372036854775807", "-9223372036854775808", "8640000000000", "253402300800"],
    Status: ["Bogus", "scheduled", "%00", "Scheduled%00"],
    Direction: ["x", "transmit", "%00"],
    Friendly: ["%00", "a%00b"],
    Reference: ["%00"],
    City: ["x%00"],
    Region: ["%00"],
    CountryCode: ["%00", "U%00"],
    PostalCode: ["%00"],
  };

  it("every junk value is a 400 InvalidParameter naming the parameter", async () => {
    const before = await snapshot();
    const failures: string[] = [];
    let n = 0;
    for (const route of list()) {
      for (const param of route.params) {
        for (const value of JUNK[param]) {
          const res = await send("GET", `${route.url}?${param}=${value}`, a.auth);
          for (const p of errorProblems(res, { status: 400, errorCode: "InvalidParameter", field: param }))
            failures.push(`${route.url}?${param}=${value}: ${p}`);
          n++;
        }
      }
      // Everything wrong at once.
      const all = route.params.map((p) => `${p}=${JUNK[p][0]}`).join("&");
      const res = await send("GET", `${route.url}?${all}`, a.auth);
      // The integer parameters are read (and reported together) before the service sees the rest.
      const integers = route.params.filter((p) => p.startsWith("Results_") || p.startsWith("Date_"));
      for (const p of errorProblems(res, { status: 400, errorCode: "InvalidParameter", field: integers.join("|") })) failures.push(`${route.url}?${all}: ${p}`);
    }
    expect(failures).toStrictEqual([]);
    expect(n).toBeGreaterThan(90);
    expect(await snapshot()).toStrictEqual(before);
  });

  it("the extremes that are allowed answer 200", async () => {
    for (const url of [
      `/v2/Properties/${a.propertySid}/Messages?Date_From=-62135596800&Date_To=253402300799`,
      `/v2/Properties/${a.propertySid}/Messages?Date_From=0&Results_Count=1000&Results_Skip=2147483647`,
      `/v2/Properties/${a.propertySid}/Messages?Results_Count=1&Results_Count=2`,
      `/v2/Properties/${a.propertySid}/Messages?Unknown=%00&Results_Count[]=abc`,
      `/v2/Accounts/${a.accountSid}/Addresses?Friendly=${"x".repeat(10_000)}&CountryCode=%F0%9F%98%80&Results_Skip=2147483647`,
      `/v2/Accounts/${a.accountSid}/Numbers?Results_Count=1000`,
    ]) {
      const res = await send("GET", url, a.auth);
      expect(res.statusCode, `${url.slice(0, 120)}: ${res.body.slice(0, 200)}`).toBe(200);
    }
  });
});

describe("unicode that is valid text", () => {
  const UNICODE = [
    "héllo wörld",
    "日本語のテキスト",
    "😀🎉👍🏽",
    "\u202eRTL override",
    "e\u0301\u0301\u0301 combining",
    "\u200b\u200c\u200d\ufeff zero-width",
    "\ud800 lone high surrogate",
    "lone low \udfff",
    "\uffff\ufffe noncharacters",
    "\u0001\u001f\u007f control",
    "\u0085\u009f C1",
    "𝕳𝖊𝖑𝖑𝖔",
    "\t\r\n  whitespace ",
  ];

  it("is either accepted (2xx) or refused with a 4xx that writes nothing; never a 5xx", async () => {
    const failures: string[] = [];
    let n = 0;
    for (const route of ROUTES) {
      if (route.name === "rotate token") continue; // its body has no field of its own
      const strings = Object.keys(route.fields).filter((f) => !route.path.includes(f) && route.fields[f] === "string");
      const targets = route.name === "batch" ? ["Messages[0].From", "Messages[0].Text", "Messages[0].To", "Messages[0].ForwardToEmail"] : strings;
      for (const [i, field] of targets.entries()) {
        for (let k = 0; k < 3; k++) {
          const value = UNICODE[(i * 3 + k) % UNICODE.length];
          const body = route.base();
          if (route.name === "batch") (body.Messages as Record<string, unknown>[])[0][field.split(".")[1]] = value;
          else body[field] = value;
          const before = await snapshot();
          const res = await send("POST", route.url(), route.auth(), JSON.stringify(body));
          n++;
          const label = `${route.name} ${field}=${JSON.stringify(value)}`;
          if (res.statusCode >= 200 && res.statusCode < 300) {
            if (!/^application\/json/.test(String(res.headers["content-type"]))) failures.push(`${label}: content-type`);
            continue;
          }
          for (const p of errorProblems(res, {})) failures.push(`${label}: ${p}`);
          if (JSON.stringify(await snapshot()) !== JSON.stringify(before)) failures.push(`${label}: refused but wrote`);
        }
      }
    }
    expect(failures).toStrictEqual([]);
    expect(n).toBeGreaterThan(80);
  });
});
