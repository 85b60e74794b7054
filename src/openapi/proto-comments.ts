/**
 * Proto source comments, for the OpenAPI descriptions. The descriptors protoc-gen-es embeds in
 * gen/ have their source info stripped, so `npm run generate` also writes
 * gen/descriptors.binpb (`buf build`, a FileDescriptorSet with source info) and this reads it.
 */
import { readFileSync } from "node:fs";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema, type DescriptorProto, type EnumDescriptorProto, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";

/** Where `npm run generate` writes the descriptor set with source info. */
export const DESCRIPTOR_SET_URL = new URL("../../gen/descriptors.binpb", import.meta.url);

// Field numbers of the descriptor.proto fields that source-info paths walk through.
const FILE_MESSAGE = 4;
const FILE_ENUM = 5;
const FILE_SERVICE = 6;
const MESSAGE_FIELD = 2;
const MESSAGE_NESTED = 3;
const MESSAGE_ENUM = 4;
const SERVICE_METHOD = 2;

/**
 * Leading comments by full name: `pkg.Message`, `pkg.Message.field_name` (proto name),
 * `pkg.Enum`, `pkg.Service`, `pkg.Service.Method`. Empty when the file is missing.
 */
export function loadProtoComments(url: URL = DESCRIPTOR_SET_URL): Map<string, string> {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(url);
  } catch {
    return new Map();
  }
  return protoComments(bytes);
}

/** Leading comments of a serialized FileDescriptorSet, by full name (see loadProtoComments). */
export function protoComments(descriptorSet: Uint8Array): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of fromBinary(FileDescriptorSetSchema, descriptorSet).file) {
    const names = namesByPath(file);
    for (const loc of file.sourceCodeInfo?.location ?? []) {
      const name = names.get(loc.path.join("."));
      const text = loc.leadingComments === undefined ? "" : cleanComment(loc.leadingComments);
      if (name !== undefined && text !== "") out.set(name, text);
    }
  }
  return out;
}

/** Source-info path (dot-joined) → full name, for every declaration that can carry a comment. */
function namesByPath(file: FileDescriptorProto): Map<string, string> {
  const names = new Map<string, string>();
  const prefix = file.package ? `${file.package}.` : "";
  const addEnum = (e: EnumDescriptorProto, path: number[], scope: string) => {
    names.set(path.join("."), `${scope}${e.name}`);
  };
  const addMessage = (m: DescriptorProto, path: number[], scope: string) => {
    const full = `${scope}${m.name}`;
    names.set(path.join("."), full);
    m.field.forEach((f, i) => names.set([...path, MESSAGE_FIELD, i].join("."), `${full}.${f.name}`));
    m.nestedType.forEach((n, i) => addMessage(n, [...path, MESSAGE_NESTED, i], `${full}.`));
    m.enumType.forEach((e, i) => addEnum(e, [...path, MESSAGE_ENUM, i], `${full}.`));
  };
  file.messageType.forEach((m, i) => addMessage(m, [FILE_MESSAGE, i], prefix));
  file.enumType.forEach((e, i) => addEnum(e, [FILE_ENUM, i], prefix));
  file.service.forEach((s, i) => {
    const full = `${prefix}${s.name}`;
    names.set([FILE_SERVICE, i].join("."), full);
    s.method.forEach((m, j) => names.set([FILE_SERVICE, i, SERVICE_METHOD, j].join("."), `${full}.${m.name}`));
  });
  return names;
}

/** `// a\n// b` arrives as " a\n b\n": one line per paragraph, blank lines kept as paragraph breaks. */
function cleanComment(raw: string): string {
  return raw
    .split(/\n\s*\n/)
    .map((p) =>
      p
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l !== "")
        .join(" "),
    )
    .filter((p) => p !== "")
    .join("\n\n");
}
