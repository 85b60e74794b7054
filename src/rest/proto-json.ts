/** Small facts about descriptors and JSON values that the REST transcoder and the OpenAPI document share. */
import { ScalarType, type DescMessage, type JsonObject } from "@bufbuild/protobuf";

/**
 * True for the 64-bit integer types. Every 64-bit integer of this API is a time in Unix seconds
 * (docs/api.md#conventions): REST reads and writes them as JSON numbers, and messages and the OpenAPI
 * document say so.
 */
export function is64(scalar: ScalarType): boolean {
  switch (scalar) {
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return true;
    default:
      return false;
  }
}

/** True for google.protobuf.* messages, whose JSON forms are special: protobuf-es reads and writes them. */
export function isWellKnown(desc: DescMessage): boolean {
  return desc.typeName.startsWith("google.protobuf.");
}

/** True for a JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
