/**
 * GET /openapi.json and GET /docs: the document covers every REST route the transcoder serves,
 * as the transcoder reads and writes it (checked against real responses of the running app),
 * passes `redocly lint`, and the Swagger UI page renders it in a real headless Chromium with
 * every asset served by the app itself.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import type { LightMyRequestResponse } from "fastify";
import type { Browser } from "playwright-core";
import { launchChromium } from "../support/chromium.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServices } from "../../src/app.js";
import type { OpenApiDocument, OpenApiObject, OpenApiOperation } from "../../src/openapi/openapi.js";
import { loadProtoComments } from "../../src/openapi/proto-comments.js";
import { restRoutes, type RestRoute } from "../../src/rest/rest-routes.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { without } from "../support/system-packages.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

let t: TestApp;
let doc: OpenApiDocument;
let routes: RestRoute[];

beforeAll(async () => {
  // With the delivery engine (loops off): the simulator carrier serves the /admin/v1/Simulator routes.
  t = await createTestApp({ engine: true });
  const services = createServices({
    orm: t.db.orm,
    config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: false, noAlphaCountries: new Set(), bodyLimit: 1024 },
  });
  routes = restRoutes(services.map((s) => s.service));
  const res = await t.app.inject({ method: "GET", url: "/openapi.json" });
  expect(res.statusCode).toBe(200);
  doc = res.json();
});

afterAll(async () => {
  await t?.close();
});

// ---------------------------------------------------------------------------------------------
// Helpers: JSON pointers, schema resolution, and a small validator for the schema subset the
// generator emits (type, properties, required, items, enum, additionalProperties, $ref).

function resolve(ref: string): OpenApiObject {
  expect(ref.startsWith("#/"), ref).toBe(true);
  let node: unknown = doc;
  for (const part of ref.slice(2).split("/")) {
    const key = part.replaceAll("~1", "/").replaceAll("~0", "~");
    expect(node !== null && typeof node === "object" && key in node, `${ref} resolves`).toBe(true);
    node = (node as Record<string, unknown>)[key];
  }
  return node as OpenApiObject;
}

function deref(schema: OpenApiObject): OpenApiObject {
  let s = schema;
  while (typeof s.$ref === "string") s = resolve(s.$ref);
  return s;
}

/** Problems of a value against a schema; `strict` also reports properties the schema does not list. */
function validate(value: unknown, schema: OpenApiObject, at = "$", strict = true): string[] {
  const s = deref(schema);
  const problems: string[] = [];
  const type = s.type as string | undefined;
  const typeOk =
    type === undefined ||
    (type === "string" && typeof value === "string") ||
    (type === "boolean" && typeof value === "boolean") ||
    (type === "integer" && typeof value === "number" && Number.isInteger(value)) ||
    (type === "number" && typeof value === "number") ||
    (type === "array" && Array.isArray(value)) ||
    (type === "object" && value !== null && typeof value === "object" && !Array.isArray(value));
  if (!typeOk) return [`${at}: ${JSON.stringify(value)} is not ${type}`];
  if (Array.isArray(s.enum) && !s.enum.includes(value)) problems.push(`${at}: ${JSON.stringify(value)} not in enum`);
  if (type === "array") {
    (value as unknown[]).forEach((v, i) => problems.push(...validate(v, s.items as OpenApiObject, `${at}[${i}]`, strict)));
  }
  if (type === "object") {
    const obj = value as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, OpenApiObject>;
    for (const r of (s.required ?? []) as string[]) if (!(r in obj)) problems.push(`${at}.${r} is missing`);
    for (const [k, v] of Object.entries(obj)) {
      if (props[k]) problems.push(...validate(v, props[k], `${at}.${k}`, strict));
      else if (typeof s.additionalProperties === "object") {
        problems.push(...validate(v, s.additionalProperties as OpenApiObject, `${at}.${k}`, strict));
      } else if (strict && s.additionalProperties !== true) problems.push(`${at}.${k} is not documented`);
    }
  }
  return problems;
}

/** The documented operation a concrete request path matches. */
function operationFor(method: string, url: string): { path: string; op: OpenApiOperation } {
  const path = url.split("?", 1)[0];
  for (const [template, item] of Object.entries(doc.paths)) {
    const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`);
    const op = item[method.toLowerCase()];
    if (re.test(path) && op) return { path: template, op };
  }
  throw new Error(`no documented operation for ${method} ${path}`);
}

/** Asserts the response body is what the document says this operation answers with this status. */
function expectDocumented(method: string, url: string, res: LightMyRequestResponse): void {
  const { op } = operationFor(method, url);
  const documented = op.responses[String(res.statusCode)] ?? op.responses.default;
  expect(documented, `${method} ${url} documents status ${res.statusCode}`).toBeDefined();
  const response = deref(documented as OpenApiObject);
  const content = response.content as Record<string, { schema: OpenApiObject }>;
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  expect(validate(res.json(), content["application/json"].schema), `${method} ${url} → ${res.statusCode}: ${res.body}`).toEqual([]);
}

function operationOf(route: RestRoute): OpenApiOperation {
  const path = route.template.replace(/\{([a-z_0-9]+)(=\*)?\}/g, (_, name: string) => {
    const field = route.pathFields.find((f) => f.name === name)!;
    return `{${field.jsonName}}`;
  });
  const op = doc.paths[path]?.[route.method.toLowerCase()];
  expect(op, `${route.method} ${path}`).toBeDefined();
  return op!;
}

/** The JSON type a scalar field has on the wire (64-bit integers are numbers in this API). */
function jsonType(f: DescField): string {
  if (f.fieldKind === "list") return "array";
  if (f.fieldKind === "enum") return "string";
  switch (f.scalar) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return "string";
    case ScalarType.BOOL:
      return "boolean";
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return "number";
    default:
      return "integer";
  }
}

const isTopLevelScalar = (f: DescField) => f.fieldKind === "scalar" || f.fieldKind === "enum" || (f.fieldKind === "list" && f.listKind !== "message");

// ---------------------------------------------------------------------------------------------

describe("GET /openapi.json", () => {
  it("is public JSON, an OpenAPI 3.1 document named after the package", async () => {
    const res = await t.app.inject({ method: "GET", url: "/openapi.json" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info.title).toBe("Switchboard API");
    expect(doc.info.version).toBe("0.1.0");
    expect(doc.servers).toEqual([{ url: "/", description: "This server" }]);
    // Built once: the same bytes every time.
    const again = await t.app.inject({ method: "GET", url: "/openapi.json" });
    expect(again.body).toBe(res.body);
  });

  it("documents every REST route with its method, operationId, tag and security", () => {
    expect(routes.length).toBe(63); // 27 + GET /admin/v1/Carrier (SMPP link state) + POST /admin/v1/Accounts/{AccountSid}/CancelQueued + the six carrier and route methods + the three OptOuts routes + the console's five operator views (issue 34) + GET /admin/v1/Leases + the five rate card methods (issue 43) + the three SenderIds routes and the operator's two (issue 45) + the ledger's two: GET /v2/Accounts/{AccountSid}/BalanceEntries and the operator's POST (issue 43) + GetBalance, GetUsage and the operator's GetUsage (issue 43) + the operator's read of an account's ledger, GET /admin/v1/Accounts/{AccountSid}/BalanceEntries (issue 43, the console) + the SMPP server's PUT and GET /admin/v1/Accounts/{AccountSid}/Smpp and GET /admin/v1/SmppBinds (issue 44)
    let documented = 0;
    for (const item of Object.values(doc.paths)) documented += Object.keys(item).length;
    expect(documented).toBe(routes.length);
    const ids = new Set<string>();
    for (const route of routes) {
      const op = operationOf(route);
      // The operator's ListNumbers, ListAddresses, ListSenderIds, ListBalanceEntries and GetUsage share their names with /v2 methods, which keep theirs.
      const shared =
        route.service.name === "AdminService" && ["ListNumbers", "ListAddresses", "ListSenderIds", "ListBalanceEntries", "GetUsage"].includes(route.rpc.name);
      expect(op.operationId).toBe(shared ? `AdminService_${route.rpc.name}` : route.rpc.name);
      ids.add(op.operationId);
      expect(op.tags).toEqual([route.service.name.replace(/Service$/, "")]);
      const admin = route.template.startsWith("/admin/v1/");
      expect(op.security).toEqual([{ [admin ? "operatorBearer" : "accountBasic"]: [] }]);
      expect(op.summary.length).toBeGreaterThan(0);
    }
    expect(ids.size).toBe(routes.length);
    // Public schema names stay put too: the operator's ListNumbersResponse is the one qualified.
    const listNumbers = (path: string) =>
      (doc.paths[path].get.responses["200"] as { content: Record<string, { schema: OpenApiObject }> }).content["application/json"].schema;
    expect(listNumbers("/v2/Accounts/{AccountSid}/Numbers")).toEqual({ $ref: "#/components/schemas/ListNumbersResponse" });
    expect(listNumbers("/admin/v1/Numbers")).toEqual({ $ref: "#/components/schemas/switchboard.admin.v1.ListNumbersResponse" });
    expect(doc.components.securitySchemes.accountBasic).toMatchObject({ type: "http", scheme: "basic" });
    expect(doc.components.securitySchemes.operatorBearer).toMatchObject({ type: "http", scheme: "bearer" });
  });

  it("uses the spec's names for its operations and the proto comments as descriptions", () => {
    const summaries = Object.fromEntries(routes.map((r) => [operationOf(r).operationId, operationOf(r).summary]));
    expect(summaries).toMatchObject({
      SendMessage: "Send SMS",
      CreateAddress: "Add an address",
      DeleteAddress: "Remove an address",
      ListAddresses: "Get Addresses",
      ConfigureNumber: "Configure Numbers",
      ListHandsetMessages: "List handset messages",
    });
    const send = operationOf(routes.find((r) => r.rpc.name === "SendMessage")!);
    expect(send.description).toBe("Sends an SMS now or at the Schedule time.");
    expect(deref(resolve("#/components/schemas/SendMessageBody")).description).toMatch(/^Send SMS body/);
    expect(doc.tags.find((tag) => tag.name === "Messaging")?.description).toBe("Sends, schedules, lists and cancels SMS messages of a property.");
    // gen/descriptors.binpb is what `npm run generate` writes; without it there are no descriptions.
    expect(loadProtoComments().get("switchboard.v2.ListMessagesRequest.date_from")).toBe("Inclusive lower bound on Created, Unix seconds.");
  });

  it("gives each route its path parameters, query parameters and request body as the transcoder reads them", () => {
    for (const route of routes) {
      const op = operationOf(route);
      const where = `${route.method} ${route.template}`;
      const params = op.parameters ?? [];
      const pathParams = params.filter((p) => p.in === "path");
      expect(
        pathParams.map((p) => p.name),
        where,
      ).toEqual(route.pathFields.map((f) => f.jsonName));
      for (const p of pathParams) expect(p.required).toBe(true);

      // google.api.http: body "*" leaves nothing for the query; otherwise every top-level scalar.
      const pathNames = new Set(route.pathFields.map((f) => f.name));
      const expectedQuery = route.body === "*" ? [] : route.rpc.input.fields.filter((f) => !pathNames.has(f.name) && isTopLevelScalar(f));
      const query = params.filter((p) => p.in === "query");
      expect(
        query.map((p) => p.name),
        where,
      ).toEqual(expectedQuery.map((f) => f.jsonName));
      for (const [i, f] of expectedQuery.entries()) {
        expect(query[i].required).toBe(false);
        expect(query[i].schema.type, `${where} ${f.jsonName}`).toBe(jsonType(f));
      }

      const bodyFields = route.rpc.input.fields.filter((f) => !pathNames.has(f.name));
      if (route.body === "" || bodyFields.length === 0) {
        expect(op.requestBody, where).toBeUndefined();
      } else {
        expect(op.requestBody?.required).toBe(false);
        const schema = deref(op.requestBody!.content["application/json"].schema);
        expect(schema.type).toBe("object");
        expect(Object.keys(schema.properties as object), where).toEqual(bodyFields.map((f) => f.jsonName));
        expect(schema.required, `${where}: nothing is required by the schema`).toBeUndefined();
      }
    }
  });

  it("gives each route its 200 schema: every response field by JSON name, implicit ones required", () => {
    for (const route of routes) {
      const op = operationOf(route);
      const ok = op.responses["200"] as { content: Record<string, { schema: OpenApiObject }> };
      // Where a FoneDynamics account gets another shape, the ordinary one is the first of the two.
      const both = ok.content["application/json"].schema.anyOf as OpenApiObject[] | undefined;
      const schema = deref(both ? both[0] : ok.content["application/json"].schema);
      expect(schema.type).toBe("object");
      const fields = route.rpc.output.fields;
      expect(Object.keys(schema.properties as object)).toEqual(fields.map((f) => f.jsonName));
      const implicit = fields.filter((f) => f.fieldKind === "list" || (f.fieldKind === "scalar" && f.presence === FeatureSet_FieldPresence.IMPLICIT));
      expect(schema.required ?? []).toEqual(implicit.map((f) => f.jsonName));
    }
    // 64-bit integers are Unix seconds as JSON numbers; repeated fields are arrays.
    const record = deref(resolve("#/components/schemas/MessageRecord"));
    expect((record.properties as Record<string, OpenApiObject>).Created).toMatchObject({ type: "integer", format: "int64" });
    const list = deref(resolve("#/components/schemas/ListMessagesResponse"));
    expect((list.properties as Record<string, OpenApiObject>).Messages).toMatchObject({
      type: "array",
      items: { $ref: "#/components/schemas/MessageRecord" },
    });
  });

  it("the FoneDynamics shapes come from the same proto options the writer reads: wrapped, aliased, the bare batch list", () => {
    const compatOf = (route: RestRoute) => {
      const schema = (operationOf(route).responses["200"] as { content: Record<string, { schema: OpenApiObject }> }).content["application/json"].schema;
      const both = schema.anyOf as OpenApiObject[] | undefined;
      if (!both) return undefined;
      expect(both.map((b) => b.title)).toEqual(["RestCompatibility None", "RestCompatibility FoneDynamics"]);
      return both[1];
    };
    const byName = (name: string) => routes.find((r) => r.rpc.name === name)!;
    expect(compatOf(byName("SendMessage"))).toMatchObject({
      type: "object",
      required: ["Message"],
      properties: { Message: { $ref: "#/components/schemas/Message" } },
    });
    for (const name of ["GetMessage", "CancelMessage"]) {
      expect(compatOf(byName(name))).toMatchObject({
        required: ["Message"],
        properties: { Message: { $ref: "#/components/schemas/MessageRecordFoneDynamics" } },
      });
    }
    const record = deref(resolve("#/components/schemas/MessageRecordFoneDynamics"));
    // Every MessageRecord field but SmartEncoded and SenderIdRegistered (compat_omit), and Scheduled beside Schedule.
    const full = deref(resolve("#/components/schemas/MessageRecord")) as { properties: object; required: string[] };
    const [base, extra] = record.allOf as { properties: object; required: string[] }[];
    const omitted = ["SmartEncoded", "SenderIdRegistered", "Price", "PriceUnit"];
    expect(Object.keys(full.properties)).toEqual(expect.arrayContaining(omitted));
    expect(Object.keys(base.properties)).toEqual(Object.keys(full.properties).filter((k) => !omitted.includes(k)));
    expect(base.required).toEqual(full.required.filter((k) => !omitted.includes(k)));
    expect(extra).toEqual({
      type: "object",
      properties: { Scheduled: expect.objectContaining({ type: "integer", description: "The same value as Schedule." }) },
    });
    expect(compatOf(byName("ListMessages"))).toMatchObject({ $ref: "#/components/schemas/ListMessagesResponseFoneDynamics" });
    const batch = compatOf(byName("SendBatch"))!;
    expect(batch).toMatchObject({
      type: "array",
      items: { anyOf: [{ $ref: "#/components/schemas/BatchResultSent" }, { $ref: "#/components/schemas/BatchResultFailed" }] },
    });
    const failed = deref(resolve("#/components/schemas/BatchResultFailed"));
    expect(failed.required).toEqual(["ErrorCode", "Message", "From", "To", "Text"]);
    const sent = deref(resolve("#/components/schemas/BatchResultSent"));
    expect(Object.keys(sent.properties as object)).toEqual(["MessageSid", "AccountSid", "PropertySid", "From", "To", "Text"]);
    // Nothing else changes shape.
    for (const route of routes.filter((r) => !["SendMessage", "GetMessage", "CancelMessage", "ListMessages", "SendBatch"].includes(r.rpc.name))) {
      expect(compatOf(route), route.rpc.name).toBeUndefined();
    }
  });

  it("64-bit integers in request bodies are an integer or a decimal string (oneOf), from the descriptors; answers and parameters have integers", () => {
    const is64 = (f: DescField) =>
      f.scalar !== undefined && [ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64].includes(f.scalar);
    let checked = 0;
    const seen = new Set<string>();
    const walk = (schema: OpenApiObject, desc: DescMessage, where: string) => {
      const s = deref(schema);
      if (seen.has(where)) return;
      seen.add(where);
      const props = s.properties as Record<string, OpenApiObject>;
      for (const f of desc.fields) {
        const p = props[f.jsonName];
        if (p === undefined) continue; // bound by the path
        if (f.fieldKind === "scalar" && is64(f)) {
          const [number, text] = p.oneOf as OpenApiObject[];
          expect(number, `${where}.${f.jsonName}`).toMatchObject({ type: "integer" });
          expect(text, `${where}.${f.jsonName}`).toMatchObject({ type: "string" });
          const pattern = new RegExp(text.pattern as string);
          expect(["1795480000", "-5", "+5"].every((v) => pattern.test(v))).toBe(true);
          expect(["12a", "1e3", " 1", "1 ", "0x10", "", "1.5"].some((v) => pattern.test(v))).toBe(false);
          expect(validate("1795480000", text)).toEqual([]);
          checked++;
        } else if (f.fieldKind === "scalar") {
          expect(p.oneOf, `${where}.${f.jsonName}`).toBeUndefined();
        } else if (f.fieldKind === "message" && !f.message.typeName.startsWith("google.protobuf.")) {
          walk(p, f.message, `${where}.${f.jsonName}`);
        } else if (f.fieldKind === "list" && f.listKind === "message") {
          walk(p.items as OpenApiObject, f.message, `${where}.${f.jsonName}[]`);
        }
      }
    };
    for (const route of routes) {
      const op = operationOf(route);
      if (op.requestBody) walk(op.requestBody.content["application/json"].schema, route.rpc.input, `${route.method} ${route.template}`);
      for (const q of op.parameters ?? []) if (q.in === "query" || q.in === "path") expect(q.schema.oneOf, q.name).toBeUndefined();
    }
    expect(checked).toBeGreaterThanOrEqual(2); // Schedule of a send and of each batch item
    const record = deref(resolve("#/components/schemas/MessageRecord"));
    expect((record.properties as Record<string, OpenApiObject>).Schedule).toMatchObject({ type: "integer", format: "int64" });
  });

  it("documents the error responses with the ResponseStatus body", () => {
    const error = deref(resolve("#/components/schemas/Error"));
    expect(error.required).toEqual(["ResponseStatus"]);
    const status = deref((error.properties as Record<string, OpenApiObject>).ResponseStatus);
    expect(Object.keys(status.properties as object)).toEqual(["ErrorCode", "Message", "Errors"]);
    const item = deref(((status.properties as Record<string, OpenApiObject>).Errors as { items: OpenApiObject }).items);
    expect(Object.keys(item.properties as object)).toEqual(["FieldName", "ErrorCode", "Message"]);

    for (const route of routes) {
      const codes = Object.keys(operationOf(route).responses);
      const expected = ["200", "400", "401"];
      if (route.pathFields.length > 0) expected.push("404");
      if (route.body !== "") expected.push("413", "415");
      expected.push("429", "503", "default");
      expect(codes, `${route.method} ${route.template}`).toEqual(expected);
      for (const code of codes.filter((c) => c !== "200")) {
        const response = deref(operationOf(route).responses[code] as OpenApiObject);
        const content = response.content as Record<string, { schema: OpenApiObject; example: unknown }>;
        expect(content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Error" });
        expect(validate(content["application/json"].example, content["application/json"].schema)).toEqual([]);
      }
    }
  });

  it("has no $ref that does not resolve", () => {
    const refs: string[] = [];
    const walk = (node: unknown) => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node !== null && typeof node === "object") {
        for (const [k, v] of Object.entries(node)) {
          if (k === "$ref" && typeof v === "string") refs.push(v);
          else walk(v);
        }
      }
    };
    walk(doc);
    expect(refs.length).toBeGreaterThan(50);
    for (const ref of refs) resolve(ref);
  });

  it("passes `redocly lint` (recommended-strict rules) and the lint does catch a broken document", async () => {
    const dir = await mkdtemp(join(tmpdir(), "openapi-"));
    try {
      const good = join(dir, "openapi.json");
      await writeFile(good, JSON.stringify(doc, null, 2));
      const ok = await redoclyLint(good);
      expect(ok.code, ok.output).toBe(0);
      expect(ok.output).toContain("Your API description is valid");

      // A control: a path parameter left undeclared and a dangling $ref must fail.
      const broken = structuredClone(doc);
      const get = broken.paths["/v2/Messages/{MessageSid}"].get;
      get.parameters = [];
      (get.responses["200"] as { content: Record<string, { schema: OpenApiObject }> }).content["application/json"].schema = {
        $ref: "#/components/schemas/Nothing",
      };
      const bad = join(dir, "broken.json");
      await writeFile(bad, JSON.stringify(broken));
      const failed = await redoclyLint(bad);
      expect(failed.code).not.toBe(0);
      expect(failed.output).toContain("no-unresolved-refs");
      expect(failed.output).toContain("path-parameters-defined");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

function redoclyLint(file: string): Promise<{ code: number; output: string }> {
  return new Promise((done) => {
    execFile(
      "npx",
      ["redocly", "lint", file, "--config", join(ROOT, "redocly.yaml"), "--format", "summary"],
      {
        cwd: ROOT,
        timeout: 120_000,
        // No telemetry or update check (the network is closed here), no colour codes in the output.
        env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        done({ code, output: `${stdout}${stderr}` });
      },
    );
  });
}

describe("the document matches what the API really answers", () => {
  let tenant: Tenant;

  beforeAll(async () => {
    tenant = await createTenant(t.app);
    await t.app.inject({
      method: "POST",
      url: "/admin/v1/Numbers",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { Number: "+447700900999" },
    });
  });

  async function call(method: string, url: string, payload?: object, headers: Record<string, string> = {}) {
    const admin = url.startsWith("/admin/");
    const res = await t.app.inject({
      method: method as "GET",
      url,
      headers: { authorization: admin ? `Bearer ${ADMIN_TOKEN}` : tenant.auth, ...headers },
      ...(payload ? { payload } : {}),
    });
    expectDocumented(method, url, res);
    return res;
  }

  it("messages: send, batch, read, list, cancel, and their errors", async () => {
    const p = tenant.propertySid;
    const now = Math.floor(t.clock.now().getTime() / 1000);
    const sent = await call("POST", `/v2/Properties/${p}/Messages`, { From: "Acme", To: "+447700900123", Text: "hi" });
    expect(sent.statusCode).toBe(200);
    const scheduled = await call("POST", `/v2/Properties/${p}/Messages`, { To: "+447700900124", Text: "later", Schedule: now + 600 });
    expect(scheduled.statusCode).toBe(200);
    const batch = await call("POST", `/v2/Properties/${p}/BatchMessages`, {
      Messages: [
        { To: "+447700900125", Text: "ok" },
        { To: "nope", Text: "bad" },
      ],
    });
    expect(batch.json().Messages[1].ResponseStatus.ErrorCode).toBe("InvalidRecipient");
    const record = await call("GET", `/v2/Messages/${scheduled.json().MessageSid}`);
    expect(record.json().Schedule).toBe(now + 600);
    await call("GET", `/v2/Properties/${p}/Messages?Results_Count=10&Direction=Transmit`);
    const canceled = await call("DELETE", `/v2/Messages/${scheduled.json().MessageSid}`);
    expect(canceled.json().Status).toBe("Canceled");

    expect((await call("POST", `/v2/Properties/${p}/Messages`, { To: "+447700900123", Text: "x", Schedule: now + 30 * 86400 })).statusCode).toBe(400);
    expect((await call("GET", `/v2/Properties/${p}/Messages?Results_Count=lots`)).json().ResponseStatus.Errors[0].FieldName).toBe("Results_Count");
    expect((await call("GET", `/v2/Messages/MG${"0".repeat(30)}`)).statusCode).toBe(404);
    expect((await call("GET", `/v2/Messages/MG${"0".repeat(30)}`, undefined, { authorization: "Basic eDp5" })).statusCode).toBe(401);
    const text = await call("POST", `/v2/Properties/${p}/Messages`, "To=x" as unknown as object, { "content-type": "text/plain" });
    expect(text.statusCode).toBe(415);
  });

  it("every documented integer query parameter is read by the transcoder under its documented name", async () => {
    const ids: Record<string, string> = {
      PropertySid: tenant.propertySid,
      AccountSid: tenant.accountSid,
      MessageSid: `MG${"0".repeat(30)}`,
      AddressSid: `AD${"0".repeat(30)}`,
      Number: "447700900999",
    };
    let checked = 0;
    for (const [template, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        for (const q of (op.parameters ?? []).filter((x) => x.in === "query" && x.schema.type === "integer")) {
          const url = template.replace(/\{([^}]+)\}/g, (_, n: string) => ids[n]);
          const res = await call(method.toUpperCase(), `${url}?${q.name}=not-a-number`);
          expect(res.statusCode, `${method} ${url} ${q.name}`).toBe(400);
          expect(res.json().ResponseStatus.Errors.map((e: { FieldName: string }) => e.FieldName)).toEqual([q.name]);
          checked++;
        }
      }
    }
    // 20, and the operator's message search (CreatedFrom, CreatedTo, Results_Count, Results_Skip)
    // an account's opt-outs, the lease list, the rate card list and a rate card's rates (Results_Count, Results_Skip each),
    // a rate card's AfterEffectiveFrom; the account's and the operator's sender ID lists, the account's and the operator's ledger (Results_Count, Results_Skip each).
    expect(checked).toBe(41);
  });

  it("addresses, numbers and the operator API", async () => {
    const a = tenant.accountSid;
    const added = await call("POST", `/v2/Accounts/${a}/Addresses`, { Line1: "1 Main St", City: "London", CountryCode: "gb", PostalCode: "SW1A 1AA" });
    expect(added.statusCode).toBe(200);
    const sid = added.json().AddressSid;
    await call("GET", `/v2/Addresses/${sid}`);
    await call("GET", `/v2/Accounts/${a}/Addresses?City=London`);
    await call("GET", `/v2/Accounts/${a}/Numbers`);
    const configured = await call("POST", `/v2/Numbers/${tenant.ownedNumber.slice(1)}`, { Friendly: "Main", AddressSid: sid });
    expect(configured.statusCode).toBe(200);
    expect((await call("DELETE", `/v2/Addresses/${sid}`)).json().ResponseStatus.ErrorCode).toBe("AddressInUse");
    await call("POST", `/v2/Numbers/${tenant.ownedNumber.slice(1)}`, { AddressSid: "" });
    expect((await call("DELETE", `/v2/Addresses/${sid}`)).json()).toEqual({ AddressSid: sid });

    const acc = await call("POST", "/admin/v1/Accounts", { Name: "Docs" });
    await call("POST", `/admin/v1/Accounts/${acc.json().AccountSid}`, { SmsEnabled: false });
    await call("POST", `/admin/v1/Accounts/${acc.json().AccountSid}/Token`);
    const prop = await call("POST", `/admin/v1/Accounts/${acc.json().AccountSid}/Properties`, { Name: "Site" });
    await call("POST", `/admin/v1/Properties/${prop.json().PropertySid}`, { Name: "Renamed" });
    await call("POST", "/admin/v1/Numbers", { Number: "+447700900998", AccountSid: acc.json().AccountSid });
    expect((await call("POST", "/admin/v1/Numbers", { Number: "+447700900998" })).statusCode).toBe(409); // the default response
    const pending = await call("POST", `/v2/Accounts/${a}/Addresses`, { Line1: "2 Main St", City: "London", CountryCode: "GB" });
    expect(pending.json().Status).toBe("Pending");
    const reviewed = await call("POST", `/admin/v1/Addresses/${pending.json().AddressSid}/Review`, { Status: "Active" });
    expect(reviewed.json().Status).toBe("Active");
    const inbound = await call("POST", "/admin/v1/Simulator/Inbound", { From: "+447700900555", To: "+447700900999", Text: "hello" });
    expect(inbound.json()).toEqual({ MessageSid: "", InReplyTo: "" });
    await call("GET", "/admin/v1/Simulator/Handsets/447700900123/Messages");
    await call("GET", "/admin/v1/Emails");
    const accounts = await call("GET", "/admin/v1/Accounts?Results_Count=2");
    expect(accounts.json().Accounts).toHaveLength(2);
    expect((await call("GET", `/admin/v1/Accounts/${a}`)).json().AccountSid).toBe(a);
    expect((await call("GET", `/admin/v1/Accounts/AC${"0".repeat(30)}`)).statusCode).toBe(404);
    expect((await call("GET", `/admin/v1/Accounts/${acc.json().AccountSid}/Properties`)).json().TotalCount).toBe(1);
    const numbers = await call("GET", "/admin/v1/Numbers?Pool=true");
    const [pooled] = numbers.json().Numbers;
    expect(pooled).toMatchObject({ Number: "+447700900999", AccountSid: "", Pool: true });
    expect(pooled.Leased).toBe(pooled.LiveLeases > 0);
    await call("GET", `/admin/v1/Numbers?AccountSid=${a}`);
    expect((await call("GET", "/admin/v1/Numbers?AccountSid=AC1")).statusCode).toBe(400);
    expect((await call("GET", "/admin/v1/Addresses?Status=All")).json().Addresses.map((x: { AddressSid: string }) => x.AddressSid)).toEqual([
      pending.json().AddressSid,
    ]);
    expect((await call("GET", `/admin/v1/Addresses?AccountSid=${a}`)).json()).toEqual({ Addresses: [], TotalCount: 0 });
    expect((await call("GET", "/admin/v1/Addresses?Status=Nope")).statusCode).toBe(400);
    await call("GET", `/admin/v1/Messages/MG${"0".repeat(30)}/Webhooks`);
    expect((await call("POST", "/admin/v1/Accounts", {}, { authorization: "Bearer wrong" })).statusCode).toBe(401);
  });

  it("billing: the account's balance and its low-balance settings (docs/billing.md#low-balance)", async () => {
    const a = tenant.accountSid;
    const set = await call("POST", `/admin/v1/Accounts/${a}`, {
      LowBalanceThreshold: "5",
      LowBalanceWebhookUri: "https://hooks.example.com/low",
      CreditLimit: "1",
    });
    expect(set.json()).toMatchObject({ LowBalanceThreshold: "5.00", LowBalanceWebhookUri: "https://hooks.example.com/low" });
    expect((await call("POST", `/admin/v1/Accounts/${a}`, { LowBalanceThreshold: "five" })).statusCode).toBe(400);
    expect((await call("GET", `/v2/Accounts/${a}/Balance`)).json()).toStrictEqual({
      AccountSid: a,
      Balance: "0.00",
      BillingMode: "Postpaid",
      CreditLimit: "1.00",
      PriceUnit: "AUD",
    });
    expect((await call("GET", `/v2/Accounts/AC${"0".repeat(30)}/Balance`)).statusCode).toBe(404);
  });
});

describe("GET /docs", () => {
  it("serves the page and its swagger-ui-dist assets without authentication", async () => {
    const page = await t.app.inject({ method: "GET", url: "/docs" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    const assets = [...page.body.matchAll(/(?:src|href)="(docs\/assets\/[^"]+)"/g)].map((m) => `/${m[1]}`);
    expect(assets).toContain("/docs/assets/swagger-ui-bundle.js");
    for (const url of assets) {
      const res = await t.app.inject({ method: "GET", url });
      expect(res.statusCode, url).toBe(200);
    }
    const js = await t.app.inject({ method: "GET", url: "/docs/assets/swagger-ui-bundle.js" });
    expect(js.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect((await t.app.inject({ method: "GET", url: "/docs/assets/package.json" })).statusCode).toBe(404);
    expect((await t.app.inject({ method: "GET", url: "/docs/assets/..%2Fpackage.json" })).statusCode).toBe(404);
  });

  describe.skipIf(without("chromium"))("in headless Chromium", () => {
    let browser: Browser | undefined;
    let base: string;

    beforeAll(async () => {
      await t.app.listen({ port: 0, host: "127.0.0.1" });
      base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
      browser = await launchChromium();
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
    });

    it("renders the Send SMS operation from /openapi.json, loading nothing from elsewhere", async () => {
      const page = await browser!.newPage();
      const requested: string[] = [];
      const errors: string[] = [];
      page.on("request", (r) => requested.push(r.url()));
      page.on("pageerror", (e) => errors.push(String(e)));
      await page.goto(`${base}/docs`, { waitUntil: "load", timeout: 60_000 });

      const send = page.locator("#operations-Messaging-SendMessage");
      await send.waitFor({ state: "visible", timeout: 60_000 });
      await expect(send.locator(".opblock-summary-description").innerText()).resolves.toBe("Send SMS");
      await expect(send.locator(".opblock-summary-path").innerText()).resolves.toContain("/v2/Properties/{PropertySid}/Messages");
      // Opening it renders the parameters from the document.
      await send.locator(".opblock-summary").click();
      await send.locator("text=Idempotency-Key").first().waitFor({ timeout: 30_000 });
      expect(await page.locator(".opblock").count()).toBe(routes.length);

      expect(errors).toEqual([]);
      expect(requested.length).toBeGreaterThan(2);
      expect(requested.filter((u) => !u.startsWith(`${base}/`))).toEqual([]);
      expect(requested).toContain(`${base}/openapi.json`);
      await page.close();
    }, 120_000);
  });
});
