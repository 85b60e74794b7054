/**
 * gRPC server reflection (grpc.reflection.v1 and v1alpha), so that grpcurl, buf curl and other
 * stock clients can list and call the services without the .proto files.
 *
 * Everything comes from the served services' descriptors: protobuf-es keeps each file's
 * FileDescriptorProto (`DescFile.proto`), which is serialized as is. Files, symbols and
 * extensions are indexed once; an answer is a few Map lookups.
 */
import { create, fromBinary, toBinary, type DescFile, type DescService } from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ServiceImpl } from "@connectrpc/connect";
import {
  ServerReflection,
  ServerReflectionRequestSchema,
  ServerReflectionResponseSchema,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";
import {
  ServerReflection as ServerReflectionV1Alpha,
  ServerReflectionRequestSchema as ServerReflectionRequestSchemaV1Alpha,
  ServerReflectionResponseSchema as ServerReflectionResponseSchemaV1Alpha,
} from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";

/** What reflection knows: every file the services need, indexed by name, symbol and extension. */
interface ReflectionIndex {
  serviceNames: string[];
  /** By file name as imports spell it, e.g. `switchboard/v2/messaging.proto`. */
  files: Map<string, DescFile>;
  /** Fully-qualified symbol (message, enum, enum value, field, oneof, service, method, extension) → its file. */
  symbols: Map<string, DescFile>;
  /** Fully-qualified message type names. */
  messages: Set<string>;
  /** Extended message type → extension number → the extension's file. */
  extensions: Map<string, Map<number, DescFile>>;
  /** Serialized FileDescriptorProto per file, computed on first use. */
  encoded: Map<DescFile, Uint8Array>;
}

/** Indexes the files of the given services, the extra files, and all their transitive dependencies. */
function buildIndex(services: readonly DescService[], extraFiles: readonly DescFile[]): ReflectionIndex {
  const index: ReflectionIndex = {
    serviceNames: [...new Set(services.map((s) => s.typeName))],
    files: new Map(),
    symbols: new Map(),
    messages: new Set(),
    extensions: new Map(),
    encoded: new Map(),
  };
  const visit = (file: DescFile) => {
    // DescFile.name has no ".proto" suffix; clients ask by the name imports use.
    if (index.files.has(file.proto.name)) return;
    index.files.set(file.proto.name, file);
    const pkg = file.proto.package;
    for (const type of nestedTypes(file)) {
      index.symbols.set(type.typeName, file);
      switch (type.kind) {
        case "message":
          index.messages.add(type.typeName);
          for (const f of type.fields) index.symbols.set(`${type.typeName}.${f.name}`, file);
          for (const o of type.oneofs) index.symbols.set(`${type.typeName}.${o.name}`, file);
          break;
        case "enum": {
          // Enum values are scoped as siblings of their enum, not inside it.
          const scope = type.parent?.typeName ?? pkg;
          for (const v of type.values) index.symbols.set(scope ? `${scope}.${v.name}` : v.name, file);
          break;
        }
        case "service":
          for (const m of type.methods) index.symbols.set(`${type.typeName}.${m.name}`, file);
          break;
        case "extension": {
          let byNumber = index.extensions.get(type.extendee.typeName);
          if (!byNumber) index.extensions.set(type.extendee.typeName, (byNumber = new Map()));
          byNumber.set(type.number, file);
          break;
        }
      }
    }
    for (const dep of file.dependencies) visit(dep);
  };
  for (const s of services) visit(s.file);
  for (const f of extraFiles) visit(f);
  return index;
}

/** The file and its transitive dependencies, each once, skipping dependencies this stream was already sent. */
function fileWithDependencies(index: ReflectionIndex, file: DescFile, sent: Set<string>): Uint8Array[] {
  const out: Uint8Array[] = [];
  const seen = new Set<string>();
  const queue = [file];
  while (queue.length > 0) {
    const f = queue.shift()!;
    if (seen.has(f.proto.name)) continue;
    seen.add(f.proto.name);
    // The asked-for file is always sent; its dependencies only once per stream, as grpc-go does.
    if (f === file || !sent.has(f.proto.name)) {
      let bytes = index.encoded.get(f);
      if (!bytes) index.encoded.set(f, (bytes = toBinary(FileDescriptorProtoSchema, f.proto)));
      out.push(bytes);
      sent.add(f.proto.name);
    }
    queue.push(...f.dependencies);
  }
  return out;
}

/** One answer to one reflection question (v1 messages). */
function answer(index: ReflectionIndex, req: ServerReflectionRequest, sent: Set<string>): ServerReflectionResponse {
  const base = { validHost: req.host, originalRequest: req };
  const files = (file: DescFile | undefined, what: string): ServerReflectionResponse => {
    if (!file) return notFound(what);
    return create(ServerReflectionResponseSchema, {
      ...base,
      messageResponse: { case: "fileDescriptorResponse", value: { fileDescriptorProto: fileWithDependencies(index, file, sent) } },
    });
  };
  const notFound = (what: string): ServerReflectionResponse =>
    create(ServerReflectionResponseSchema, {
      ...base,
      messageResponse: { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: `${what} was not found.` } },
    });

  const q = req.messageRequest;
  switch (q.case) {
    case "listServices":
      return create(ServerReflectionResponseSchema, {
        ...base,
        messageResponse: { case: "listServicesResponse", value: { service: index.serviceNames.map((name) => ({ name })) } },
      });
    case "fileByFilename":
      return files(index.files.get(q.value), `File ${q.value}`);
    case "fileContainingSymbol":
      return files(index.symbols.get(q.value.replace(/^\./, "")), `Symbol ${q.value}`);
    case "fileContainingExtension": {
      const { containingType, extensionNumber } = q.value;
      return files(index.extensions.get(containingType)?.get(extensionNumber), `Extension ${extensionNumber} of ${containingType}`);
    }
    case "allExtensionNumbersOfType": {
      const type = q.value.replace(/^\./, "");
      // A known message type with no extensions has an empty list; an unknown one is NOT_FOUND.
      if (!index.messages.has(type)) return notFound(`Type ${q.value}`);
      return create(ServerReflectionResponseSchema, {
        ...base,
        messageResponse: {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: type, extensionNumber: [...(index.extensions.get(type)?.keys() ?? [])].sort((a, b) => a - b) },
        },
      });
    }
    default:
      return create(ServerReflectionResponseSchema, {
        ...base,
        messageResponse: { case: "errorResponse", value: { errorCode: Code.InvalidArgument, errorMessage: "The request asks nothing reflection knows." } },
      });
  }
}

/**
 * Builds the reflection services, v1 and v1alpha (which many clients still ask for first or
 * only), describing `services`, themselves, and `extraFiles`: files no service imports that
 * clients still need, such as the error detail messages they decode from grpc-status-details-bin.
 */
export function createReflectionServices(
  services: readonly DescService[],
  extraFiles: readonly DescFile[] = [],
): { service: DescService; impl: ServiceImpl<DescService> }[] {
  const index = buildIndex([...services, ServerReflection, ServerReflectionV1Alpha], extraFiles);
  const v1: ServiceImpl<typeof ServerReflection> = {
    async *serverReflectionInfo(requests) {
      const sent = new Set<string>();
      for await (const req of requests) yield answer(index, req, sent);
    },
  };
  const v1alpha: ServiceImpl<typeof ServerReflectionV1Alpha> = {
    async *serverReflectionInfo(requests) {
      // v1alpha and v1 have the same field numbers: the bytes convert one to the other.
      const sent = new Set<string>();
      for await (const req of requests) {
        const q = fromBinary(ServerReflectionRequestSchema, toBinary(ServerReflectionRequestSchemaV1Alpha, req));
        yield fromBinary(ServerReflectionResponseSchemaV1Alpha, toBinary(ServerReflectionResponseSchema, answer(index, q, sent)));
      }
    },
  };
  return [
    { service: ServerReflection, impl: v1 as ServiceImpl<DescService> },
    { service: ServerReflectionV1Alpha, impl: v1alpha as ServiceImpl<DescService> },
  ];
}
