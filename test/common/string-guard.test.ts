/**
 * The string guard runs on every request through a checker compiled per message type; it must
 * name the same field, for the same reason, as the reflective walk (unstorableField) for any
 * request, nested and repeated fields included.
 */
import { create } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CreateAddressRequestSchema } from "../../gen/switchboard/v2/addresses_pb.js";
import { SendBatchRequestSchema, SendMessageRequestSchema, ListMessagesRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { unstorableChecker, unstorableField } from "../../src/common/string-guard.js";

const str = fc.oneof(
  fc.constant(""),
  fc.string({ maxLength: 6 }),
  fc.string({ maxLength: 6 }).map((s) => `${s}\0`),
  fc.string({ maxLength: 6 }).map((s) => `${s}\udc00`),
);
const send = fc.record({
  propertySid: str,
  from: str,
  to: str,
  text: str,
  webhookUri: str,
  forwardToEmail: str,
  schedule: fc.option(fc.bigInt({ min: 0n, max: 10n ** 10n }), { nil: undefined }),
});

describe("unstorableChecker", () => {
  it("names the same field as unstorableField for send requests", () => {
    fc.assert(
      fc.property(send, (init) => {
        const msg = create(SendMessageRequestSchema, init);
        expect(unstorableChecker(SendMessageRequestSchema)(msg as never, "")).toEqual(unstorableField(reflect(SendMessageRequestSchema, msg)));
      }),
      { numRuns: 500 },
    );
  });

  it("names the same field as unstorableField for batch requests (e.g. Messages[2].Text)", () => {
    fc.assert(
      fc.property(str, fc.array(send, { maxLength: 5 }), (propertySid, messages) => {
        const msg = create(SendBatchRequestSchema, { propertySid, messages });
        expect(unstorableChecker(SendBatchRequestSchema)(msg as never, "")).toEqual(unstorableField(reflect(SendBatchRequestSchema, msg)));
      }),
      { numRuns: 500 },
    );
  });

  it("leaves Sids to their own check and finds NUL in other messages' strings", () => {
    const list = create(ListMessagesRequestSchema, { propertySid: "PR\0", status: "Sent\0" });
    expect(unstorableChecker(ListMessagesRequestSchema)(list as never, "")).toEqual({ field: "Status", reason: "nul" });
    expect(unstorableField(reflect(ListMessagesRequestSchema, list))).toEqual({ field: "Status", reason: "nul" });
    const address = create(CreateAddressRequestSchema, { accountSid: "AC\0", reference: "r\0" });
    expect(unstorableChecker(CreateAddressRequestSchema)(address as never, "")).toEqual(unstorableField(reflect(CreateAddressRequestSchema, address)));
  });
});
