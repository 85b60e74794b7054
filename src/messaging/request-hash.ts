import { createHash } from "node:crypto";
import { type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";

/**
 * The fingerprint an Idempotency-Key remembers: SHA-256 of the method's name and the request
 * message's protobuf binary. Taken from the decoded message, not the bytes sent, so the same
 * request over REST, Connect or gRPC, in any field order or spelling, matches; unknown fields of a
 * binary client are left out, since the service ignores them too.
 */
export function requestHash<Desc extends DescMessage>(method: string, schema: Desc, request: MessageShape<Desc>): string {
  return createHash("sha256")
    .update(method)
    .update("\n")
    .update(toBinary(schema, request, { writeUnknownFields: false }))
    .digest("hex");
}
