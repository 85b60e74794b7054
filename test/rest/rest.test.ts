import { request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { create, createFileRegistry, setExtension, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Label as Label, FieldDescriptorProto_Type as Type, FileDescriptorProtoSchema, MethodOptionsSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createContextKey, type HandlerContext, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { fastify, type FastifyInstance, type LightMyRequestResponse } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { http } from "../../gen/google/api/annotations_pb.js";
import { HttpRuleSchema } from "../../gen/google/api/http_pb.js";
import { AddressService } from "../../gen/switchboard/v2/addresses_pb.js";
import { MessagingService, type ListMessagesRequest, type SendBatchRequest, type SendMessageRequest } from "../../gen/switchboard/v2/messaging_pb.js";
import { apiError, fieldError } from "../../src/common/errors.js";
import { observeCall } from "../../src/ops/observability.js";
import { restPlugin, restService } from "../../src/rest/rest.js";
import { restRoutes } from "../../src/rest/rest-routes.js";

const AUTH = "Basic QUMxOnNlY3JldA==";
const kAccount = createContextKey<string>("", { description: "authenticated account" });

/** What the in-test implementations saw. */
interface Seen {
  send?: SendMessageRequest;
  batch?: SendBatchRequest;
  list?: ListMessagesRequest;
  ctx?: HandlerContext;
  abortReason?: unknown;
}

/** Small echoing implementations of the real generated services. */
function messagingImpl(seen: Seen): Partial<ServiceImpl<typeof MessagingService>> {
  return {
    sendMessage(req, ctx) {
      seen.send = req;
      seen.ctx = ctx;
      if (req.text === "field-error") throw fieldError("To", "InvalidRecipient", "To is not a valid phone number.");
      if (req.text === "bug") throw new Error("database password is hunter2");
      if (req.text === "internal") throw new ConnectError("secret detail", Code.Internal);
      if (req.text === "wait") {
        // Resolves only when the client goes away.
        return new Promise((_resolve, reject) => {
          ctx.signal.addEventListener("abort", () => {
            seen.abortReason = ctx.signal.reason;
            reject(ctx.signal.reason);
          });
        });
      }
      if (req.text === "rate") {
        const err = apiError("RateLimited", "Too many requests.");
        err.metadata.set("retry-after", "7");
        throw err;
      }
      ctx.responseHeader.set("x-echo-account", ctx.values.get(kAccount));
      return {
        messageSid: "MG1",
        accountSid: ctx.values.get(kAccount),
        propertySid: req.propertySid,
        from: req.from,
        to: req.to,
        text: req.text,
      };
    },
    sendBatch(req) {
      seen.batch = req;
      return {
        messages: req.messages.map((m, i) =>
          i === 0
            ? { messageSid: `MG${i}`, accountSid: "AC1", propertySid: req.propertySid, from: m.from, to: m.to, text: m.text }
            : { responseStatus: { errorCode: "InvalidRecipient", message: "To is not valid." } },
        ),
      };
    },
    getMessage(req) {
      return {
        messageSid: req.messageSid,
        schedule: 1767225600n,
        created: 1767225000n,
        numSegments: 1,
      };
    },
    listMessages(req) {
      seen.list = req;
      return {
        messages: [{ messageSid: "MG1", schedule: req.dateFrom ?? 0n, created: req.dateTo ?? 0n }],
        totalCount: req.resultsCount ?? 200,
      };
    },
    // cancelMessage left out on purpose.
  };
}

function addressImpl(): Partial<ServiceImpl<typeof AddressService>> {
  return {
    createAddress(req) {
      return { addressSid: "AD1", accountSid: req.accountSid, line1: req.line1, city: req.city, status: "Active" };
    },
    getAddress(req) {
      return { addressSid: req.addressSid };
    },
    listAddresses(req) {
      return {
        addresses: [{ addressSid: "AD1", accountSid: req.accountSid, city: req.city ?? "(unset)" }],
        totalCount: req.resultsSkip,
      };
    },
    deleteAddress(req) {
      return { addressSid: req.addressSid };
    },
  };
}

/** The app's failure reporting, then an authentication of the test's own. */
const interceptors: Interceptor[] = [
  observeCall,
  (next) => (req) => {
    if (!req.header.get("authorization")) {
      throw apiError("Unauthorized", "Authentication is required.");
    }
    req.contextValues.set(kAccount, "AC1");
    return next(req);
  },
];

interface Built {
  app: FastifyInstance;
  seen: Seen;
  logs: string[];
}

let current: FastifyInstance | undefined;
afterEach(async () => {
  await current?.close();
  current = undefined;
});

async function build(extra?: (app: FastifyInstance) => void | Promise<void>): Promise<Built> {
  const seen: Seen = {};
  const logs: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString());
      cb();
    },
  });
  const app = fastify({ logger: { level: "error", stream } });
  current = app;
  // Connect serves the same implementations; the REST plugin must not swallow its routes.
  const messaging = messagingImpl(seen);
  await app.register(fastifyConnectPlugin, {
    routes: (router) => router.service(MessagingService, messaging),
  });
  await app.register(restPlugin, {
    services: [restService(MessagingService, messaging), restService(AddressService, addressImpl())],
    interceptors,
    bodyLimit: 1024,
  });
  app.get("/healthz", async () => ({ Status: "ok" }));
  app.post("/outside", async (req) => ({ got: req.body }));
  app.get("/outside/boom", async () => {
    throw new Error("outside failure");
  });
  await extra?.(app);
  await app.ready();
  return { app, seen, logs };
}

function post(app: FastifyInstance, url: string, body: unknown, headers: Record<string, string> = {}) {
  return app.inject({
    method: "POST",
    url,
    headers: { authorization: AUTH, "content-type": "application/json", ...headers },
    payload: typeof body === "string" ? body : JSON.stringify(body),
  });
}

function get(app: FastifyInstance, url: string, headers: Record<string, string> = { authorization: AUTH }) {
  return app.inject({ method: "GET", url, headers });
}

function status(res: LightMyRequestResponse): unknown {
  return res.json();
}

const invalid = (...errors: [string, string][]) => ({
  ResponseStatus: {
    ErrorCode: "InvalidParameter",
    Message: errors.map(([, m]) => m).join(" "),
    Errors: errors.map(([f, m]) => ({ FieldName: f, ErrorCode: "InvalidParameter", Message: m })),
  },
});

describe("restRoutes", () => {
  it("finds every google.api.http binding with its Fastify path", () => {
    const routes = restRoutes([MessagingService]).map((r) => [r.method, r.path, r.template, r.body, r.rpc.name]);
    expect(routes).toEqual([
      ["POST", "/v2/Properties/:property_sid/Messages", "/v2/Properties/{property_sid}/Messages", "*", "SendMessage"],
      ["POST", "/v2/Properties/:property_sid/BatchMessages", "/v2/Properties/{property_sid}/BatchMessages", "*", "SendBatch"],
      ["GET", "/v2/Messages/:message_sid", "/v2/Messages/{message_sid}", "", "GetMessage"],
      ["GET", "/v2/Properties/:property_sid/Messages", "/v2/Properties/{property_sid}/Messages", "", "ListMessages"],
      ["DELETE", "/v2/Messages/:message_sid", "/v2/Messages/{message_sid}", "", "CancelMessage"],
    ]);
    expect(restRoutes([MessagingService])[0].pathFields.map((f) => f.jsonName)).toEqual(["PropertySid"]);
  });
});

describe("REST transcoder", () => {
  it("maps path and body into the request, and the response to JSON with every field", async () => {
    const { app, seen } = await build();
    const res = await post(app, "/v2/Properties/PR123/Messages", {
      PropertySid: "PRfromBody",
      From: "Acme",
      To: "+4915112345678",
      Text: "hello",
      Schedule: 1767225600,
      DeliveryReceipt: true,
      ForwardToSms: null,
      Unknown: { anything: 1 },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(res.headers["x-echo-account"]).toBe("AC1");
    expect(res.json()).toEqual({
      MessageSid: "MG1",
      AccountSid: "AC1",
      PropertySid: "PR123",
      From: "Acme",
      To: "+4915112345678",
      Text: "hello",
    });
    expect(seen.send?.propertySid).toBe("PR123"); // the path wins over the body
    expect(seen.send?.schedule).toBe(1767225600n);
    expect(seen.send?.deliveryReceipt).toBe(true);
    expect(seen.send?.forwardToSms).toBe("");
    expect(seen.ctx?.protocolName).toBe("rest");
    expect(seen.ctx?.requestMethod).toBe("POST");
    expect(seen.ctx?.url).toBe("http://localhost:80/v2/Properties/PR123/Messages");
    expect(seen.ctx?.requestHeader.get("authorization")).toBe(AUTH);
    expect(seen.ctx?.signal.aborted).toBe(true); // the call is over
  });

  it("accepts proto names, numeric strings for int64, and leaves omitted optionals unset", async () => {
    const { app, seen } = await build();
    const res = await post(app, "/v2/Properties/PR1/Messages", { to: "+4915112345678", text: "x", Schedule: "1767225600" });
    expect(res.statusCode).toBe(200);
    expect(seen.send?.to).toBe("+4915112345678");
    expect(seen.send?.schedule).toBe(1767225600n);
    expect(seen.send?.deliveryReceipt).toBeUndefined();

    await post(app, "/v2/Properties/PR1/Messages", { To: "+4915112345678", Text: "y", Schedule: null });
    expect(seen.send?.schedule).toBeUndefined();
  });

  it("treats an empty or missing POST body as {}", async () => {
    const { app, seen } = await build();
    const empty = await post(app, "/v2/Properties/PR1/Messages", "");
    expect(empty.statusCode).toBe(200);
    expect(seen.send?.text).toBe("");
    const none = await app.inject({ method: "POST", url: "/v2/Properties/PR2/Messages", headers: { authorization: AUTH } });
    expect(none.statusCode).toBe(200);
    expect(none.json()).toMatchObject({ PropertySid: "PR2", Text: "" });
  });

  it("writes int64 as JSON numbers and every default as '' / 0 / false", async () => {
    const { app } = await build();
    const res = await get(app, "/v2/Messages/MG42");
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe(
      JSON.stringify({
        MessageSid: "MG42",
        AccountSid: "",
        PropertySid: "",
        From: "",
        To: "",
        Text: "",
        Direction: "",
        Status: "",
        NumSegments: 1,
        Encoding: "",
        DeliveryReceipt: false,
        Schedule: 1767225600,
        Created: 1767225000,
        Submitted: 0,
        Delivered: 0,
        Received: 0,
        ErrorCode: "",
        CarrierError: "",
        Redacted: false,
        Carrier: "",
        SmartEncoded: false,
        Price: "",
        PriceUnit: "",
      }),
    );
  });

  it("maps query parameters by json_name and proto name, last value wins, unknown ignored", async () => {
    const { app, seen } = await build();
    const res = await get(
      app,
      "/v2/Properties/PR1/Messages?Results_Count=5&Date_From=1767225600&date_to=1767229200&Status=Failed&Status=Delivered&results_skip=3&Bogus=1&PropertySid=PRq",
    );
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      Messages: [
        {
          MessageSid: "MG1",
          AccountSid: "",
          PropertySid: "",
          From: "",
          To: "",
          Text: "",
          Direction: "",
          Status: "",
          NumSegments: 0,
          Encoding: "",
          DeliveryReceipt: false,
          Schedule: 1767225600,
          Created: 1767229200,
          Submitted: 0,
          Delivered: 0,
          Received: 0,
          ErrorCode: "",
          CarrierError: "",
          Redacted: false,
          Carrier: "",
          SmartEncoded: false,
          Price: "",
          PriceUnit: "",
        },
      ],
      TotalCount: 5,
    });
    expect(seen.list?.propertySid).toBe("PR1"); // path wins over the query
    expect(seen.list?.status).toBe("Delivered");
    expect(seen.list?.resultsSkip).toBe(3);
    expect(seen.list?.dateFrom).toBe(1767225600n);
  });

  it("leaves unset optional query filters absent", async () => {
    const { app } = await build();
    const res = await get(app, "/v2/Accounts/AC1/Addresses?Results_Skip=4");
    expect(res.json()).toEqual({
      Addresses: [
        {
          AddressSid: "AD1",
          AccountSid: "AC1",
          Friendly: "",
          Reference: "",
          Line1: "",
          Line2: "",
          City: "(unset)",
          Region: "",
          CountryCode: "",
          PostalCode: "",
          Status: "",
        },
      ],
      TotalCount: 4,
    });
    const city = await get(app, "/v2/Accounts/AC1/Addresses?City=Paris");
    expect(city.json().Addresses[0].City).toBe("Paris");
  });

  it("rejects query values of the wrong type, naming each parameter", async () => {
    const { app } = await build();
    const res = await get(app, "/v2/Properties/PR1/Messages?Results_Count=abc&Date_From=1.5&Results_Skip=99999999999");
    expect(res.statusCode).toBe(400);
    expect(status(res)).toEqual(
      invalid(
        ["Results_Count", "Results_Count must be an integer."],
        ["Date_From", "Date_From must be an integer (Unix seconds)."],
        ["Results_Skip", "Results_Skip must be an integer between -2147483648 and 2147483647."],
      ),
    );
  });

  it("serves the address routes, DELETE included", async () => {
    const { app } = await build();
    const created = await post(app, "/v2/Accounts/AC1/Addresses", { Line1: "1 Main St", City: "Paris", AccountSid: "AC9" });
    expect(created.statusCode).toBe(200);
    expect(created.json()).toEqual({
      AddressSid: "AD1",
      AccountSid: "AC1",
      Friendly: "",
      Reference: "",
      Line1: "1 Main St",
      Line2: "",
      City: "Paris",
      Region: "",
      CountryCode: "",
      PostalCode: "",
      Status: "Active",
    });
    const res = await app.inject({ method: "DELETE", url: "/v2/Addresses/AD9", headers: { authorization: AUTH } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ AddressSid: "AD9" });
  });

  it("reports every wrong JSON type in one 400 InvalidParameter, named as the client wrote it", async () => {
    const { app } = await build();
    const res = await post(app, "/v2/Properties/PR1/Messages", {
      Schedule: "abc",
      To: 5,
      Text: {},
      DeliveryReceipt: "yes",
      from: ["x"],
    });
    expect(res.statusCode).toBe(400);
    expect(status(res)).toEqual(
      invalid(
        ["Schedule", "Schedule must be an integer (Unix seconds)."],
        ["To", "To must be a string."],
        ["Text", "Text must be a string."],
        ["DeliveryReceipt", "DeliveryReceipt must be true or false."],
        ["from", "from must be a string."],
      ),
    );
  });

  it("refuses a fractional Schedule", async () => {
    const { app } = await build();
    const res = await post(app, "/v2/Properties/PR1/Messages", { To: "+4915112345678", Text: "x", Schedule: 1.5 });
    expect(res.statusCode).toBe(400);
    expect(status(res)).toEqual(invalid(["Schedule", "Schedule must be an integer (Unix seconds)."]));
  });

  it("converts batch items one by one and names nested problems", async () => {
    const { app } = await build();
    const bad = await post(app, "/v2/Properties/PR1/BatchMessages", {
      Messages: [{ To: "+4915112345678", Text: "ok" }, { Schedule: 1.5 }, { Schedule: "x", To: 1 }, "nope"],
    });
    expect(bad.statusCode).toBe(400);
    expect(status(bad)).toEqual(
      invalid(
        ["Messages[1].Schedule", "Messages[1].Schedule must be an integer (Unix seconds)."],
        ["Messages[2].Schedule", "Messages[2].Schedule must be an integer (Unix seconds)."],
        ["Messages[2].To", "Messages[2].To must be a string."],
        ["Messages[3]", "Messages[3] must be a JSON object."],
      ),
    );

    const notList = await post(app, "/v2/Properties/PR1/BatchMessages", { Messages: {} });
    expect(status(notList)).toEqual(invalid(["Messages", "Messages must be a JSON array."]));

    const ok = await post(app, "/v2/Properties/PR1/BatchMessages", {
      Messages: [
        { To: "+4915112345678", Text: "a", Schedule: 1767225600 },
        { To: "bad", Text: "b" },
      ],
    });
    expect(ok.statusCode).toBe(200);
    // Unset explicit-presence fields stay absent: an item is a Message or a ResponseStatus.
    expect(ok.json()).toEqual({
      Messages: [
        { MessageSid: "MG0", AccountSid: "AC1", PropertySid: "PR1", From: "", To: "+4915112345678", Text: "a" },
        { ResponseStatus: { ErrorCode: "InvalidRecipient", Message: "To is not valid.", Errors: [] } },
      ],
    });
  });

  it("answers 400 MalformedRequest for a body that is not JSON or not an object", async () => {
    const { app } = await build();
    const notJson = await post(app, "/v2/Properties/PR1/Messages", "{To:");
    expect(notJson.statusCode).toBe(400);
    expect(status(notJson)).toEqual({
      ResponseStatus: { ErrorCode: "MalformedRequest", Message: "The request body is not valid JSON.", Errors: [] },
    });
    for (const body of ["[1,2]", "null", "42", '"s"']) {
      const res = await post(app, "/v2/Properties/PR1/Messages", body);
      expect(res.statusCode).toBe(400);
      expect(status(res)).toEqual({
        ResponseStatus: { ErrorCode: "MalformedRequest", Message: "The request body must be a JSON object.", Errors: [] },
      });
    }
  });

  it("answers 415 for a body that is not JSON by its Content-Type", async () => {
    const { app } = await build();
    const res = await post(app, "/v2/Properties/PR1/Messages", "To=%2B49", { "content-type": "text/plain" });
    expect(res.statusCode).toBe(415);
    expect(status(res)).toEqual({
      ResponseStatus: {
        ErrorCode: "UnsupportedMediaType",
        Message: "The request body must be JSON, sent with Content-Type: application/json.",
        Errors: [],
      },
    });
    const form = await post(app, "/v2/Properties/PR1/Messages", "To=x", {
      "content-type": "application/x-www-form-urlencoded",
    });
    expect(form.statusCode).toBe(415);
    const charset = await post(
      app,
      "/v2/Properties/PR1/Messages",
      { Text: "x" },
      {
        "content-type": "application/json; charset=utf-8",
      },
    );
    expect(charset.statusCode).toBe(200);
  });

  it("answers 413 PayloadTooLarge over the body limit", async () => {
    const { app } = await build();
    const res = await post(app, "/v2/Properties/PR1/Messages", { Text: "x".repeat(2000) });
    expect(res.statusCode).toBe(413);
    expect(status(res)).toEqual({
      ResponseStatus: {
        ErrorCode: "PayloadTooLarge",
        Message: "The request body is larger than the limit of 1024 bytes.",
        Errors: [],
      },
    });
  });

  it("answers 404 NotFound for unknown paths under the API prefix", async () => {
    const { app } = await build();
    for (const url of ["/v2/Nope", "/v2", "/v2/", "/v2/Messages/MG1/extra", "/v2/Properties/PR1"]) {
      const res = await get(app, url);
      expect(res.statusCode, url).toBe(404);
      expect(status(res)).toEqual({
        ResponseStatus: {
          ErrorCode: "NotFound",
          Message: `The requested resource ${url} was not found.`,
          Errors: [],
        },
      });
    }
  });

  it("echoes at most 200 characters of an unknown path", async () => {
    const { app } = await build();
    const long = `/v2/${"x".repeat(5000)}`;
    const res = await get(app, long);
    expect(res.statusCode).toBe(404);
    expect(status(res)).toMatchObject({ ResponseStatus: { Message: `The requested resource ${long.slice(0, 200)}… was not found.` } });
    const edge = `/v2/${"y".repeat(196)}`;
    expect(status(await get(app, edge))).toMatchObject({ ResponseStatus: { Message: `The requested resource ${edge} was not found.` } });
  });

  it("answers 405 MethodNotAllowed with Allow for a known path", async () => {
    const { app } = await build();
    const batch = await get(app, "/v2/Properties/PR1/BatchMessages");
    expect(batch.statusCode).toBe(405);
    expect(batch.headers.allow).toBe("POST");
    expect(status(batch)).toEqual({
      ResponseStatus: {
        ErrorCode: "MethodNotAllowed",
        Message: "GET is not allowed on this resource; allowed: POST.",
        Errors: [],
      },
    });
    const put = await app.inject({ method: "PUT", url: "/v2/Properties/PR1/Messages", headers: { authorization: AUTH } });
    expect(put.statusCode).toBe(405);
    expect(put.headers.allow).toBe("GET, HEAD, POST");
  });

  it("answers 401 with WWW-Authenticate when the edge refuses", async () => {
    const { app, seen } = await build();
    const res = await post(app, "/v2/Properties/PR1/Messages", { Text: "x" }, { authorization: "" });
    expect(res.statusCode).toBe(401);
    expect(res.headers["www-authenticate"]).toBe('Basic realm="switchboard"');
    expect(status(res)).toEqual({
      ResponseStatus: { ErrorCode: "Unauthorized", Message: "Authentication is required.", Errors: [] },
    });
    expect(seen.send).toBeUndefined();
    // The edge runs before the request is converted: no hint about the body to strangers.
    const bad = await post(app, "/v2/Properties/PR1/Messages", { To: 5 }, { authorization: "" });
    expect(bad.statusCode).toBe(401);
  });

  it("aborts the handler's signal when the client goes away", async () => {
    const { app, seen } = await build();
    await app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const body = JSON.stringify({ Text: "wait" });
    const req = httpRequest({
      host: "127.0.0.1",
      port,
      method: "POST",
      path: "/v2/Properties/PR1/Messages",
      headers: { authorization: AUTH, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
    });
    req.on("error", () => undefined);
    req.end(body);
    await expect.poll(() => seen.send?.text).toBe("wait");
    req.destroy();
    await expect.poll(() => seen.abortReason).toBeInstanceOf(ConnectError);
    expect((seen.abortReason as ConnectError).code).toBe(Code.Canceled);
  });

  it("writes a ConnectError with field details as the same ResponseStatus body", async () => {
    const { app } = await build();
    const res = await post(app, "/v2/Properties/PR1/Messages", { Text: "field-error" });
    expect(res.statusCode).toBe(400);
    expect(status(res)).toEqual({
      ResponseStatus: {
        ErrorCode: "InvalidRecipient",
        Message: "To is not a valid phone number.",
        Errors: [{ FieldName: "To", ErrorCode: "InvalidRecipient", Message: "To is not a valid phone number." }],
      },
    });
    const rate = await post(app, "/v2/Properties/PR1/Messages", { Text: "rate" });
    expect(rate.statusCode).toBe(429);
    expect(rate.headers["retry-after"]).toBe("7");
  });

  it("answers 500 InternalError without detail for a bug, and logs it", async () => {
    const { app, logs } = await build();
    for (const text of ["bug", "internal"]) {
      const res = await post(app, "/v2/Properties/PR1/Messages", { Text: text });
      expect(res.statusCode).toBe(500);
      expect(res.body).toBe(
        JSON.stringify({
          ResponseStatus: { ErrorCode: "InternalError", Message: "An internal error occurred.", Errors: [] },
        }),
      );
    }
    expect(logs.join("")).toContain("database password is hunter2");
    expect(logs.join("")).toContain("secret detail");
  });

  it("answers 501 for a bound method the implementation lacks", async () => {
    const { app } = await build();
    const res = await app.inject({ method: "DELETE", url: "/v2/Messages/MG1", headers: { authorization: AUTH } });
    expect(res.statusCode).toBe(501);
    expect(res.json().ResponseStatus.Message).toBe("switchboard.v2.MessagingService.CancelMessage is not implemented");
  });

  it("leaves the rest of the app alone: Connect routes, other routes, their parsers and errors", async () => {
    const { app } = await build();
    const health = await app.inject({ method: "GET", url: "/healthz" });
    expect(health.statusCode).toBe(200);
    expect(health.json()).toEqual({ Status: "ok" });

    const outside = await app.inject({ method: "POST", url: "/outside", payload: { a: 1 } });
    expect(outside.statusCode).toBe(200);
    expect(outside.json()).toEqual({ got: { a: 1 } });

    // Fastify's own JSON parser and error format still apply outside the plugin.
    const outsideBad = await app.inject({
      method: "POST",
      url: "/outside",
      headers: { "content-type": "application/json" },
      payload: "{",
    });
    expect(outsideBad.statusCode).toBe(400);
    expect(outsideBad.json()).not.toHaveProperty("ResponseStatus");
    const boom = await app.inject({ method: "GET", url: "/outside/boom" });
    expect(boom.statusCode).toBe(500);
    expect(boom.json()).toMatchObject({ statusCode: 500, message: "outside failure" });

    const fourOhFour = await app.inject({ method: "GET", url: "/elsewhere" });
    expect(fourOhFour.statusCode).toBe(404);
    expect(fourOhFour.json()).not.toHaveProperty("ResponseStatus");

    const rpc = await app.inject({
      method: "POST",
      url: "/switchboard.v2.MessagingService/SendMessage",
      headers: { "content-type": "application/json" },
      payload: { PropertySid: "PR7", Text: "via connect" },
    });
    expect(rpc.statusCode).toBe(200);
    expect(rpc.json()).toMatchObject({ MessageSid: "MG1", PropertySid: "PR7", Text: "via connect" });
  });
});

// ---------------------------------------------------------------------------------------------
// Generic features on a descriptor built in the test: PUT/PATCH, a body field, additional
// bindings, bool and repeated query parameters, nested messages, maps and 64-bit lists.

function featureService(): { service: DescService; response: DescMessage } {
  const rule = (init: Parameters<typeof create<typeof HttpRuleSchema>>[1]) => {
    const options = create(MethodOptionsSchema);
    setExtension(options, http, create(HttpRuleSchema, init));
    return options;
  };
  const field = (name: string, number: number, type: Type, extra: Record<string, unknown> = {}) => ({
    name,
    number,
    type,
    label: Label.OPTIONAL,
    jsonName: name.charAt(0).toUpperCase() + name.slice(1),
    ...extra,
  });
  const file = create(FileDescriptorProtoSchema, {
    name: "test/feature.proto",
    package: "test.feature",
    syntax: "proto3",
    messageType: [
      { name: "Inner", field: [field("note", 1, Type.STRING), field("count", 2, Type.INT64)] },
      {
        name: "ThingRequest",
        field: [
          field("id", 1, Type.STRING),
          field("flag", 2, Type.BOOL),
          field("nums", 3, Type.INT32, { label: Label.REPEATED }),
          field("inner", 4, Type.MESSAGE, { typeName: ".test.feature.Inner" }),
          field("ratio", 5, Type.DOUBLE),
        ],
      },
      {
        name: "ThingResponse",
        field: [
          field("id", 1, Type.STRING),
          field("flag", 2, Type.BOOL),
          field("nums", 3, Type.INT32, { label: Label.REPEATED }),
          field("inner", 4, Type.MESSAGE, { typeName: ".test.feature.Inner" }),
          field("ratio", 5, Type.DOUBLE),
          field("big", 6, Type.INT64, { label: Label.REPEATED }),
          field("counts", 7, Type.MESSAGE, { label: Label.REPEATED, typeName: ".test.feature.ThingResponse.CountsEntry" }),
          field("children", 8, Type.MESSAGE, { label: Label.REPEATED, typeName: ".test.feature.ThingResponse" }),
        ],
        nestedType: [
          {
            name: "CountsEntry",
            field: [field("key", 1, Type.STRING), field("value", 2, Type.UINT64)],
            options: { mapEntry: true },
          },
        ],
      },
    ],
    service: [
      {
        name: "ThingService",
        method: [
          {
            name: "GetThing",
            inputType: ".test.feature.ThingRequest",
            outputType: ".test.feature.ThingResponse",
            options: rule({
              pattern: { case: "get", value: "/t/v1/Things/{id}" },
              additionalBindings: [create(HttpRuleSchema, { pattern: { case: "get", value: "/t/v1/Alias/{id=*}" } })],
            }),
          },
          {
            name: "PutThing",
            inputType: ".test.feature.ThingRequest",
            outputType: ".test.feature.ThingResponse",
            options: rule({ pattern: { case: "put", value: "/t/v1/Things/{id}" }, body: "*" }),
          },
          {
            name: "PatchInner",
            inputType: ".test.feature.ThingRequest",
            outputType: ".test.feature.ThingResponse",
            options: rule({ pattern: { case: "patch", value: "/t/v1/Things/{id}/Inner" }, body: "inner" }),
          },
        ],
      },
    ],
  });
  const registry = createFileRegistry(file, () => undefined);
  return {
    service: registry.getService("test.feature.ThingService")!,
    response: registry.getMessage("test.feature.ThingResponse")!,
  };
}

describe("REST transcoder on any descriptor", () => {
  async function buildFeature() {
    const { service } = featureService();
    const echo = (req: Record<string, unknown>) => ({
      ...req,
      $typeName: undefined,
      big: [1n, 9007199254740991n],
      counts: { a: 5n },
      children: [{ id: "child", big: [2n], inner: { count: 3n } }],
    });
    const impl = { getThing: echo, putThing: echo, patchInner: echo } as unknown as ServiceImpl<DescService>;
    const app = fastify();
    current = app;
    await app.register(restPlugin, { services: [{ service, impl }], interceptors: [] });
    await app.ready();
    return app;
  }

  const emptyChild = {
    Id: "child",
    Flag: false,
    Nums: [],
    Inner: { Note: "", Count: 3 },
    Ratio: 0,
    Big: [2],
    Counts: {},
    Children: [],
  };

  it("reads bool and repeated query parameters and follows additional bindings", async () => {
    const app = await buildFeature();
    for (const url of ["/t/v1/Things/T1?Flag=1&Nums=1&Nums=2&nums=3&Ratio=0.5", "/t/v1/Alias/T1?flag=true&Nums=1&Nums=2&Nums=3&ratio=0.5"]) {
      const res = await app.inject({ method: "GET", url });
      expect(res.statusCode, url).toBe(200);
      expect(res.json(), url).toEqual({
        Id: "T1",
        Flag: true,
        Nums: [1, 2, 3],
        Ratio: 0.5,
        Big: [1, 9007199254740991],
        Counts: { a: 5 },
        Children: [emptyChild],
      });
    }
    const bad = await app.inject({ method: "GET", url: "/t/v1/Things/T1?Flag=yes&Nums=1&Nums=x" });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual(invalid(["Flag", "Flag must be true or false."], ["Nums", "Nums must be an integer."]));
  });

  it("serves PUT with body * and PATCH with a body field", async () => {
    const app = await buildFeature();
    const put = await app.inject({
      method: "PUT",
      url: "/t/v1/Things/T2",
      payload: { Id: "ignored", Flag: true, Nums: [4], Inner: { Note: "n", Count: "12" } },
    });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toMatchObject({ Id: "T2", Flag: true, Nums: [4], Inner: { Note: "n", Count: 12 } });

    const patch = await app.inject({ method: "PATCH", url: "/t/v1/Things/T3/Inner", payload: { Note: "p", Count: 7 } });
    expect(patch.statusCode).toBe(200);
    expect(patch.json()).toMatchObject({ Id: "T3", Inner: { Note: "p", Count: 7 } });

    const badPatch = await app.inject({ method: "PATCH", url: "/t/v1/Things/T3/Inner", payload: { Count: true, Note: 1 } });
    expect(badPatch.json()).toEqual(invalid(["Count", "Count must be an integer (Unix seconds)."], ["Note", "Note must be a string."]));
    const badNested = await app.inject({ method: "PUT", url: "/t/v1/Things/T2", payload: { Inner: { Count: 1.5 }, Nums: [1, "a"] } });
    expect(badNested.json()).toEqual(invalid(["Inner.Count", "Inner.Count must be an integer (Unix seconds)."], ["Nums[1]", "Nums[1] must be an integer."]));
  });

  it("answers 404 under the descriptor's own prefix", async () => {
    const app = await buildFeature();
    const res = await app.inject({ method: "GET", url: "/t/v1/Other" });
    expect(res.statusCode).toBe(404);
    expect(res.json().ResponseStatus.ErrorCode).toBe("NotFound");
  });
});
