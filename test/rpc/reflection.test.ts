/**
 * gRPC server reflection (v1 and v1alpha) on a listening app, asked over real gRPC (h2c) with no
 * credentials, one bidirectional stream per test as grpcurl and buf curl use it: the answers must
 * be complete enough to rebuild every served service from the descriptors alone.
 */
import type { AddressInfo } from "node:net";
import { createFileRegistry, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServerReflection, type ServerReflectionRequestSchema, type ServerReflectionResponse } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import {
  ServerReflection as ServerReflectionV1Alpha,
  type ServerReflectionRequestSchema as ServerReflectionRequestSchemaV1Alpha,
} from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { dbKind } from "../support/db.js";
import { createTestApp, type TestApp } from "../support/harness.js";

type V1AlphaInit = MessageInitShape<typeof ServerReflectionRequestSchemaV1Alpha>;
type Question = MessageInitShape<typeof ServerReflectionRequestSchema>["messageRequest"];

const SERVED = [
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
];
const GOOGLE_API_HTTP = 72295728; // the google.api.http extension of google.protobuf.MethodOptions

let t: TestApp;
let sessions: Http2SessionManager;
let baseUrl: string;

beforeAll(async () => {
  t = await createTestApp();
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  sessions = new Http2SessionManager(baseUrl);
});

afterAll(async () => {
  sessions?.abort();
  await t?.close();
});

/** Asks every question on one stream, as one client would, and returns the answers in order. */
async function ask(version: "v1" | "v1alpha", questions: Question[], host = "localhost"): Promise<ServerReflectionResponse[]> {
  const transport = createGrpcTransport({ baseUrl, sessionManager: sessions });
  const answers: ServerReflectionResponse[] = [];
  async function* requests() {
    for (const q of questions) yield { host, messageRequest: q };
  }
  // v1alpha has v1's shape and field numbers; its answers read the same way.
  const stream =
    version === "v1"
      ? createClient(ServerReflection, transport).serverReflectionInfo(requests())
      : createClient(ServerReflectionV1Alpha, transport).serverReflectionInfo(requests() as AsyncIterable<V1AlphaInit>);
  for await (const a of stream) answers.push(a as unknown as ServerReflectionResponse);
  expect(answers.length).toBe(questions.length);
  return answers;
}

function files(answer: ServerReflectionResponse): FileDescriptorProto[] {
  expect(answer.messageResponse.case, JSON.stringify(answer.messageResponse.value)).toBe("fileDescriptorResponse");
  if (answer.messageResponse.case !== "fileDescriptorResponse") return [];
  return answer.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b));
}

function fileNames(answer: ServerReflectionResponse): string[] {
  return files(answer).map((f) => f.name);
}

function errorOf(answer: ServerReflectionResponse) {
  expect(answer.messageResponse.case).toBe("errorResponse");
  return answer.messageResponse.case === "errorResponse" ? answer.messageResponse.value : undefined;
}

for (const version of ["v1", "v1alpha"] as const) {
  describe(`grpc.reflection.${version}.ServerReflection (${dbKind()})`, () => {
    it("lists every served service, echoing the host and the question", async () => {
      const [a] = await ask(version, [{ case: "listServices", value: "*" }], "api.example:443");
      expect(a.validHost).toBe("api.example:443");
      expect(a.originalRequest?.messageRequest).toEqual({ case: "listServices", value: "*" });
      expect(a.messageResponse.case).toBe("listServicesResponse");
      if (a.messageResponse.case !== "listServicesResponse") return;
      expect(a.messageResponse.value.service.map((s) => s.name).sort()).toEqual(SERVED);
    });

    it("answers a service with its file and every transitive dependency, enough to rebuild it", async () => {
      const [a] = await ask(version, [{ case: "fileContainingSymbol", value: "switchboard.v2.MessagingService" }]);
      const got = files(a);
      expect(got[0].name).toBe("switchboard/v2/messaging.proto");
      expect(got.map((f) => f.name).sort()).toEqual([
        "google/api/annotations.proto",
        "google/api/http.proto",
        "google/protobuf/descriptor.proto",
        "switchboard/v2/common.proto",
        "switchboard/v2/messaging.proto",
        "switchboard/v2/rest_compat.proto",
      ]);
      // As a client does: build the asked-for file, resolving its imports among the answer's files.
      const registry = createFileRegistry(got[0], (name) => got.find((f) => f.name === name));
      const service = registry.getService("switchboard.v2.MessagingService");
      expect(service?.methods.map((m) => m.name)).toEqual(["SendMessage", "SendBatch", "GetMessage", "ListMessages", "CancelMessage"]);
      const send = service!.methods.find((m) => m.name === "SendMessage")!;
      expect(send.input.fields.slice(0, 4).map((f) => f.jsonName)).toEqual(["PropertySid", "From", "To", "Text"]);
      // proto3 optional survives, so clients keep field presence.
      expect(send.input.fields.find((f) => f.name === "schedule")?.proto.proto3Optional).toBe(true);
    });

    it("sends a dependency once per stream; the asked-for file always", async () => {
      const [first, second, again] = await ask(version, [
        { case: "fileByFilename", value: "switchboard/v2/messaging.proto" },
        { case: "fileByFilename", value: "switchboard/v2/addresses.proto" },
        { case: "fileByFilename", value: "switchboard/v2/messaging.proto" },
      ]);
      expect(fileNames(first).length).toBe(6); // messaging.proto and its five transitive imports
      expect(fileNames(second)).toEqual(["switchboard/v2/addresses.proto"]);
      expect(fileNames(again)).toEqual(["switchboard/v2/messaging.proto"]);
    });

    it("finds the file of methods, messages, fields, enum values, the vendored services and the error details", async () => {
      const cases: [string, string][] = [
        ["switchboard.v2.MessagingService.SendMessage", "switchboard/v2/messaging.proto"],
        ["switchboard.v2.SendMessageRequest", "switchboard/v2/messaging.proto"],
        ["switchboard.v2.SendMessageRequest.to", "switchboard/v2/messaging.proto"],
        [".switchboard.v2.Address", "switchboard/v2/addresses.proto"],
        ["switchboard.admin.v1.AdminService", "switchboard/admin/v1/admin.proto"],
        ["grpc.health.v1.Health.Check", "grpc/health/v1/health.proto"],
        ["grpc.health.v1.HealthCheckResponse.SERVING", "grpc/health/v1/health.proto"],
        ["grpc.reflection.v1.ServerReflection", "grpc/reflection/v1/reflection.proto"],
        ["grpc.reflection.v1alpha.ServerReflection", "grpc/reflection/v1alpha/reflection.proto"],
        ["google.rpc.ErrorInfo", "google/rpc/error_details.proto"],
        ["google.rpc.BadRequest.FieldViolation", "google/rpc/error_details.proto"],
      ];
      const answers = await ask(
        version,
        cases.map(([symbol]) => ({ case: "fileContainingSymbol", value: symbol })),
      );
      cases.forEach(([symbol, file], i) => expect(fileNames(answers[i])[0], symbol).toBe(file));
    });

    it("finds extensions by type and number", async () => {
      const [byExt, numbers, none] = await ask(version, [
        { case: "fileContainingExtension", value: { containingType: "google.protobuf.MethodOptions", extensionNumber: GOOGLE_API_HTTP } },
        { case: "allExtensionNumbersOfType", value: "google.protobuf.MethodOptions" },
        { case: "allExtensionNumbersOfType", value: "switchboard.v2.Message" },
      ]);
      expect(fileNames(byExt)[0]).toBe("google/api/annotations.proto");
      expect(numbers.messageResponse).toMatchObject({
        case: "allExtensionNumbersResponse",
        value: { baseTypeName: "google.protobuf.MethodOptions", extensionNumber: [GOOGLE_API_HTTP] },
      });
      expect(none.messageResponse).toMatchObject({
        case: "allExtensionNumbersResponse",
        value: { baseTypeName: "switchboard.v2.Message", extensionNumber: [] },
      });
    });

    it("answers what it does not know with NOT_FOUND on the stream, which stays usable", async () => {
      const answers = await ask(version, [
        { case: "fileByFilename", value: "switchboard/v2/nope.proto" },
        { case: "fileContainingSymbol", value: "switchboard.v2.Nope" },
        { case: "fileContainingExtension", value: { containingType: "google.protobuf.MethodOptions", extensionNumber: 1 } },
        { case: "allExtensionNumbersOfType", value: "switchboard.v2.Nope" },
        { case: "listServices", value: "" },
      ]);
      expect(answers.slice(0, 4).map((a) => errorOf(a)?.errorCode)).toEqual([5, 5, 5, 5]);
      expect(errorOf(answers[1])?.errorMessage).toBe("Symbol switchboard.v2.Nope was not found.");
      expect(answers[4].messageResponse.case).toBe("listServicesResponse");
    });
  });
}
