import { describe, expect, it } from "vitest";
import { AddressService } from "../../gen/switchboard/v2/addresses_pb.js";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { NumberService } from "../../gen/switchboard/v2/numbers_pb.js";
import { compatPlan, compatShaper } from "../../src/rest/rest-compat.js";

const m = MessagingService.method;

describe("the compatible REST shape, read from the proto options", () => {
  it('wraps Message and MessageRecord under "Message", unwraps the batch list, leaves the rest alone', () => {
    expect(compatPlan(m.sendMessage)).toEqual({ wrap: "Message" });
    expect(compatPlan(m.getMessage)).toEqual({ wrap: "Message" });
    expect(compatPlan(m.cancelMessage)).toEqual({ wrap: "Message" });
    expect(compatPlan(m.sendBatch)?.unwrap?.echoes.map((f) => f.jsonName)).toEqual(["From", "To", "Text"]);
    expect(compatPlan(m.listMessages)).toBeUndefined();
    for (const rpc of [...AddressService.methods, ...NumberService.methods]) {
      expect(compatPlan(rpc), rpc.name).toBeUndefined();
      expect(compatShaper(rpc), rpc.name).toBeUndefined();
    }
  });

  it("a record also carries Scheduled, equal to Schedule, also inside a list", () => {
    const record = { MessageSid: "SM1", Schedule: 1795480000, Status: "Scheduled" };
    expect(compatShaper(m.getMessage)!({ ...record }, undefined)).toStrictEqual({ Message: { ...record, Scheduled: 1795480000 } });
    const list = compatShaper(m.listMessages)!({ Messages: [{ ...record }], TotalCount: 1 }, undefined);
    expect(list).toStrictEqual({ Messages: [{ ...record, Scheduled: 1795480000 }], TotalCount: 1 });
    // The six-field Message has no Schedule: wrapped only.
    const sent = { MessageSid: "SM1", AccountSid: "AC1", PropertySid: "PR1", From: "+1", To: "+2", Text: "hi" };
    expect(compatShaper(m.sendMessage)!({ ...sent }, undefined)).toStrictEqual({ Message: sent });
  });

  it("a batch is a bare array in request order; a failed item is flat with To, From and Text as received", () => {
    const sent = { MessageSid: "SM1", AccountSid: "AC1", PropertySid: "PR1", From: "+1", To: "+2", Text: "hi" };
    const failed = { ResponseStatus: { ErrorCode: "InvalidTo", Message: "To is not a phone number.", Errors: [{ FieldName: "To" }] } };
    const body = { Messages: [{ To: "+2", Text: "hi" }, { To: "nope", Text: "x", From: "Acme" }, { Text: 5 }] };
    const out = compatShaper(m.sendBatch)!(
      { Messages: [{ ...sent }, failed, { ResponseStatus: { ErrorCode: "MissingParameter", Message: "To is required." } }] },
      body,
    );
    expect(out).toStrictEqual([
      sent,
      { ErrorCode: "InvalidTo", Message: "To is not a phone number.", From: "Acme", To: "nope", Text: "x" },
      { ErrorCode: "MissingParameter", Message: "To is required.", From: "", To: "", Text: "5" },
    ]);
  });
});
