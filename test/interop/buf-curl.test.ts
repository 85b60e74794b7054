/**
 * `buf curl` (a stock gRPC client) against a listening app, with server reflection only and no
 * .proto files: it lists the services and methods, sends an SMS with HTTP Basic, gets errors
 * with their ErrorCode, and asks grpc.health.v1.Health without credentials.
 */
import { execFile } from "node:child_process";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { dbKind } from "../support/db.js";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

// What `npx buf` runs, called directly so that npm's own notices stay out of stderr.
const BUF = resolve("node_modules/.bin/buf");
const TO = "+447700900123";

let t: TestApp;
let tenant: Tenant;
let url: string;

beforeAll(async () => {
  t = await createTestApp();
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  tenant = await createTenant(t.app);
});

afterAll(async () => {
  await t?.close();
});

interface CurlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `buf curl --protocol grpc --http2-prior-knowledge ARGS`; never throws on a failed call. */
function bufCurl(args: string[]): Promise<CurlResult> {
  return new Promise((done, fail) => {
    execFile(BUF, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") return fail(err);
      done({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

/** Calls one method with a JSON body, with the tenant's Basic credentials unless `auth` is false. */
function call(method: string, body: object, auth = true): Promise<CurlResult> {
  const headers = auth ? ["-H", `authorization: ${tenant.auth}`] : [];
  return bufCurl([...headers, "-d", JSON.stringify(body), `${url}/${method}`]);
}

/** The gRPC error buf curl prints, with its details decoded. */
function rpcError(res: CurlResult) {
  expect(res.code, res.stdout).not.toBe(0);
  expect(res.stdout).toBe("");
  const err = JSON.parse(res.stderr) as { code: string; message: string; details: { type: string; value: string }[] };
  const detail = (type: string) => err.details.filter((d) => d.type === type).map((d) => Buffer.from(d.value, "base64"));
  return {
    code: err.code,
    message: err.message,
    types: err.details.map((d) => d.type),
    reasons: detail("google.rpc.ErrorInfo")
      .map((b) => fromBinary(ErrorInfoSchema, b))
      .map((i) => `${i.domain}/${i.reason}`),
    fields: detail("google.rpc.BadRequest").flatMap((b) => fromBinary(BadRequestSchema, b).fieldViolations.map((v) => `${v.field}:${v.reason}`)),
  };
}

describe(`buf curl with server reflection, no .proto files (${dbKind()})`, () => {
  it("--list-methods lists every method of every served service (reflection v1)", async () => {
    const res = await bufCurl(["--list-methods", url]);
    expect(res.code, res.stderr).toBe(0);
    const methods = res.stdout.trim().split("\n");
    expect(methods).toEqual(
      expect.arrayContaining([
        "grpc.health.v1.Health/Check",
        "grpc.health.v1.Health/Watch",
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "switchboard.v2.MessagingService/SendMessage",
        "switchboard.v2.MessagingService/CancelMessage",
        "switchboard.v2.AddressService/CreateAddress",
        "switchboard.v2.NumberService/ConfigureNumber",
        "switchboard.v2.OptOutService/CreateOptOut",
        "switchboard.admin.v1.AdminService/CreateAccount",
      ]),
    );
    expect(new Set(methods.map((m) => m.split("/")[0]))).toEqual(
      new Set([
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
        "switchboard.admin.v1.AdminService",
        "switchboard.v2.AddressService",
        "switchboard.v2.BillingService",
        "switchboard.v2.MessagingService",
        "switchboard.v2.NumberService",
        "switchboard.v2.OptOutService",
        "switchboard.v2.SenderIdService",
      ]),
    );
    expect(methods.filter((m) => m.startsWith("switchboard.v2.MessagingService/")).sort()).toEqual(
      ["CancelMessage", "GetMessage", "ListMessages", "SendBatch", "SendMessage"].map((m) => `switchboard.v2.MessagingService/${m}`),
    );
  });

  it("--list-services over reflection v1alpha gives the same services", async () => {
    const v1 = await bufCurl(["--list-services", url]);
    const v1alpha = await bufCurl(["--list-services", "--reflect-protocol", "grpc-v1alpha", url]);
    expect(v1alpha.code, v1alpha.stderr).toBe(0);
    expect(v1alpha.stdout).toBe(v1.stdout);
    expect(v1alpha.stdout.trim().split("\n")).toContain("switchboard.v2.MessagingService");
  });

  it("sends an SMS with HTTP Basic and reads it back, JSON in the API's own field names", async () => {
    const sent = await call("switchboard.v2.MessagingService/SendMessage", {
      PropertySid: tenant.propertySid,
      From: tenant.ownedNumber,
      To: TO,
      Text: "Hello from buf curl",
    });
    expect(sent.code, sent.stderr).toBe(0);
    const msg = JSON.parse(sent.stdout);
    expect(Object.keys(msg).sort()).toEqual(["AccountSid", "From", "MessageSid", "PropertySid", "Text", "To"]);
    expect(msg).toMatchObject({
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: tenant.ownedNumber,
      To: TO,
      Text: "Hello from buf curl",
    });
    expect(msg.MessageSid).toMatch(/^MG[A-Z0-9]{30}$/);

    const got = await call("switchboard.v2.MessagingService/GetMessage", { MessageSid: msg.MessageSid });
    expect(got.code, got.stderr).toBe(0);
    expect(JSON.parse(got.stdout)).toMatchObject({ MessageSid: msg.MessageSid, Status: "Processing", Direction: "Transmit", Text: "Hello from buf curl" });
  });

  it("a validation error comes back as invalid_argument with its ErrorCode and field", async () => {
    const err = rpcError(await call("switchboard.v2.MessagingService/SendMessage", { PropertySid: tenant.propertySid, To: "12345", Text: "hi" }));
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toMatch(/^To "12345" is not a valid E164 number/);
    expect(err.types).toEqual(["google.rpc.ErrorInfo", "google.rpc.BadRequest"]);
    expect(err.reasons).toEqual(["switchboard/InvalidRecipient"]);
    expect(err.fields).toEqual(["To:InvalidRecipient"]);
  });

  it("no credentials: unauthenticated / Unauthorized; reflection itself needed none", async () => {
    const err = rpcError(await call("switchboard.v2.MessagingService/SendMessage", { PropertySid: tenant.propertySid, To: TO, Text: "hi" }, false));
    expect(err.code).toBe("unauthenticated");
    expect(err.reasons).toEqual(["switchboard/Unauthorized"]);
  });

  it("grpc.health.v1.Health/Check answers SERVING without credentials; an unknown service is not_found", async () => {
    for (const service of ["", "switchboard.v2.MessagingService", "switchboard.admin.v1.AdminService"]) {
      const res = await call("grpc.health.v1.Health/Check", { service }, false);
      expect(res.code, res.stderr).toBe(0);
      expect(JSON.parse(res.stdout), service).toEqual({ status: "SERVING" });
    }
    const err = rpcError(await call("grpc.health.v1.Health/Check", { service: "switchboard.v2.Nope" }, false));
    expect(err.code).toBe("not_found");
    expect(err.reasons).toEqual(["switchboard/NotFound"]);
  });
});
