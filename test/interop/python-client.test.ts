/**
 * A Python gRPC client (grpcio) generated from proto/ with buf.gen.clients.yaml, as docs/api.md's
 * recipe does, runs test/interop/client.py against a listening app: it sends an SMS, reads the
 * ErrorCode of a validation error from the google.rpc.Status in grpc-status-details-bin, and adds
 * then removes an address. Debian's python3-grpcio and python3-grpc-tools, offline.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind } from "../support/db.js";
import { without } from "../support/system-packages.js";
import { createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const run = promisify(execFile);
// The system Python, which has python3-grpcio and python3-grpc-tools (a pyenv python3 may be first on PATH).
const PYTHON = "/usr/bin/python3";
const BUF = resolve("node_modules/.bin/buf");
const TO = "+447700900123";

let t: TestApp;
let tenant: Tenant;
let target: string;
let dir: string;
let out: Record<string, any>;

describe.skipIf(without("pythonGrpc"))(`Python gRPC client generated from proto/ (${dbKind()})`, () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "sb-python-client-"));
    // The template's plugin runs `python3`: put the system one first for buf and the plugin.
    await run(BUF, ["generate", "--template", "buf.gen.clients.yaml", "-o", dir], {
      env: { ...process.env, PATH: `/usr/bin:${process.env.PATH ?? ""}` },
      timeout: 60_000,
    });
    t = await createTestApp();
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    target = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    tenant = await createTenant(t.app);
  });

  afterAll(async () => {
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the clients template generated messages and stubs for every API file, and none for gRPC's own protos", () => {
    const py = join(dir, "gen-clients/python");
    for (const f of ["switchboard/v2/messaging", "switchboard/v2/addresses", "switchboard/v2/numbers", "switchboard/admin/v1/admin"]) {
      expect(existsSync(join(py, `${f}_pb2.py`)), f).toBe(true);
      expect(existsSync(join(py, `${f}_pb2_grpc.py`)), f).toBe(true);
    }
    for (const f of ["google/rpc/status_pb2.py", "google/rpc/error_details_pb2.py", "google/api/annotations_pb2.py"])
      expect(existsSync(join(py, f)), f).toBe(true);
    // A generated "grpc" folder would shadow the grpc package.
    expect(existsSync(join(py, "grpc"))).toBe(false);
  });

  it("runs client.py: send, read back, errors with their ErrorCode, add and remove an address", async () => {
    const { stdout } = await run(
      PYTHON,
      [resolve("test/interop/client.py"), join(dir, "gen-clients/python"), target, tenant.accountSid, tenant.token, tenant.propertySid, tenant.ownedNumber],
      { timeout: 60_000 },
    );
    out = JSON.parse(stdout);

    expect(out.sent).toEqual({
      MessageSid: expect.stringMatching(/^MG[A-Z0-9]{30}$/),
      AccountSid: tenant.accountSid,
      PropertySid: tenant.propertySid,
      From: tenant.ownedNumber,
      To: TO,
      Text: "Hello from Python",
    });
    expect(out.record).toEqual({ MessageSid: out.sent.MessageSid, Status: "Processing", Text: "Hello from Python" });

    expect(out.invalid).toEqual({
      code: "INVALID_ARGUMENT",
      statusCode: 3,
      message: expect.stringMatching(/^To "123" is not a valid E164 number/),
      statusMessage: out.invalid.message,
      detailTypes: ["type.googleapis.com/google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.BadRequest"],
      reason: "InvalidRecipient",
      domain: "switchboard",
      fields: [{ field: "To", reason: "InvalidRecipient" }],
    });
    expect(out.unauthenticated).toMatchObject({ code: "UNAUTHENTICATED", statusCode: 16, reason: "Unauthorized", domain: "switchboard", fields: [] });

    expect(out.addressCreated).toEqual({
      AddressSid: expect.stringMatching(/^AD[A-Z0-9]{30}$/),
      AccountSid: tenant.accountSid,
      Friendly: "Head office",
      Line1: "10 Downing Street",
      City: "London",
      CountryCode: "GB",
      PostalCode: "SW1A 2AA",
      Status: "Active",
    });
    expect(out.addressDeleted).toEqual({ AddressSid: out.addressCreated.AddressSid });
    expect(out.addressAfterDelete).toMatchObject({
      code: "NOT_FOUND",
      statusCode: 5,
      message: `Address ${out.addressCreated.AddressSid} was not found.`,
      reason: "NotFound",
    });
  });

  it("what the Python client did is what the REST API shows", async () => {
    const msg = await t.app.inject({ method: "GET", url: `/v2/Messages/${out.sent.MessageSid}`, headers: { authorization: tenant.auth } });
    expect(msg.statusCode).toBe(200);
    expect(msg.json()).toMatchObject({ MessageSid: out.sent.MessageSid, Text: "Hello from Python", Status: "Processing" });
    const addresses = await t.app.inject({ method: "GET", url: `/v2/Accounts/${tenant.accountSid}/Addresses`, headers: { authorization: tenant.auth } });
    expect(addresses.json()).toEqual({ Addresses: [], TotalCount: 0 });
  });
});
