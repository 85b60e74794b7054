import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { SendMessageRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { errorCodeOf, fieldErrors } from "../../src/common/errors.js";
import { SEND_FACTS, type SendFacts } from "../../src/messaging/message-store.js";
import { validateSend, type ValidSend } from "../../src/messaging/send-rules.js";
import { ACCESS_RULES, accessRefusal, neededFacts, RULES, ruleRefusal, type SendItem } from "../../src/messaging/send-steps.js";

// The rules that need data, as pure functions of a send and its facts (the statement that reads
// the facts and stores by them is tested in send.test.ts and test/db/).

const NOW = 1_900_000_000;

function item(fields: Omit<MessageInitShape<typeof SendMessageRequestSchema>, "$typeName">, extra: Partial<SendItem> = {}): SendItem {
  const req = create(SendMessageRequestSchema, { propertySid: "PR1", to: "+447700900123", text: "hi", ...fields });
  return {
    account: { sid: "AC1", tokenHash: "hash-1" },
    propertySid: "PR1",
    checked: validateSend(req, NOW, { webhookAllowPrivate: false }),
    leased: false,
    now: new Date(NOW * 1000),
    sid: "MG1",
    ...extra,
  };
}

/** Facts under which every rule passes for an E164 send with forward numbers. */
const GOOD: SendFacts = {
  i: 0,
  token_hash: "hash-1",
  account_sms: true,
  property_found: true,
  property_sms: true,
  sender_owned: true,
  forward_from_owned: true,
  forward_to_ours: false,
  recipient_ours: false,
  opted_out: false,
  key_expired: null,
  key_hash: null,
  m_sid: null,
  m_account_sid: null,
  m_property_sid: null,
  m_sender: null,
  m_recipient: null,
  m_text: null,
  stored: false,
};

const refusal = (it: SendItem, facts: Partial<SendFacts>) => {
  const f = { ...GOOD, ...facts };
  const err = accessRefusal(it, f) ?? ruleRefusal(it, f, fieldErrors);
  return err && { code: errorCodeOf(err), message: err.rawMessage };
};

describe("the send's rules that need data (send-steps.ts)", () => {
  it("every fact a rule can need is one the statement reads (SEND_FACTS)", () => {
    const names = new Set<string>(SEND_FACTS.map(([f]) => f));
    const sends = [
      item({ from: "+447700900001", forwardFromSms: "+447700900002", forwardToSms: "+447700900003" }),
      item({ from: "ACME" }),
      item({}, { forward: { inReplyTo: "MG0", relay: true, draft: (item({}).checked as { send: ValidSend }).send } }),
    ];
    for (const s of sends) for (const fact of Object.keys(neededFacts(s))) expect(names).toContain(fact);
    expect(ACCESS_RULES.map((r) => r.name)).toEqual(["credentials", "property"]);
    expect(RULES.map((r) => r.name)).toEqual([
      "account enabled",
      "property enabled",
      "sender owned",
      "forward sender owned",
      "forward destination not ours",
      "destination not ours",
      "recipient not opted out",
    ]);
  });

  it("an E164 send with forward numbers needs its token, the property, both SMS flags, both numbers owned and the forward destination not ours", () => {
    expect(neededFacts(item({ from: "+447700900001", forwardFromSms: "+447700900002", forwardToSms: "+447700900003" }))).toEqual({
      token_hash: "hash-1",
      property_found: true,
      account_sms: true,
      property_sms: true,
      sender_owned: true,
      forward_from_owned: true,
      forward_to_ours: false,
      recipient_ours: false,
      opted_out: false,
    });
  });

  it("an alphanumeric send needs no ownership; a request with problems needs only its access facts", () => {
    expect(neededFacts(item({ from: "ACME" }))).toEqual({
      token_hash: "hash-1",
      property_found: true,
      account_sms: true,
      property_sms: true,
      recipient_ours: false,
      opted_out: false,
    });
    expect(neededFacts(item({ to: "12" }))).toEqual({ token_hash: "hash-1", property_found: true });
  });

  it("the forward of a reply has no credentials to re-check; relayed from the responding party's number it needs no ownership, and its destination must not be ours", () => {
    const draft = (item({ from: "+447700900009" }).checked as { send: ValidSend }).send;
    const relay = item({ from: "+447700900009" }, { account: { sid: "AC1" }, forward: { inReplyTo: "MG0", relay: true, draft } });
    expect(neededFacts(relay)).toEqual({ property_found: true, account_sms: true, property_sms: true, recipient_ours: false, opted_out: false });
    const owned = { ...relay, forward: { inReplyTo: "MG0", relay: false, draft } };
    expect(neededFacts(owned)).toMatchObject({ sender_owned: true });
  });

  it("judges in the documented order: credentials, property, the request's problems, account, property, sender, forward sender, forward destination, recipient, opt-out", () => {
    const s = item({ from: "+447700900001", forwardFromSms: "+447700900002", forwardToSms: "+447700900003" });
    expect(refusal(s, {})).toBeUndefined();
    expect(refusal(s, { token_hash: "other", property_found: false, account_sms: false })?.code).toBe("Unauthorized");
    expect(refusal(s, { token_hash: null })?.code).toBe("Unauthorized");
    expect(refusal(s, { property_found: false, property_sms: null, account_sms: false })).toEqual({
      code: "NotFound",
      message: expect.stringContaining("PR1"),
    });
    expect(refusal(item({ to: "12" }), { account_sms: false })?.code).toBe("InvalidRecipient");
    expect(refusal(s, { account_sms: false, property_sms: false, sender_owned: false })).toEqual({
      code: "SmsNotEnabled",
      message: "Account AC1 is not enabled for SMS; ask the operator to enable it.",
    });
    expect(refusal(s, { property_sms: false, sender_owned: false })).toEqual({
      code: "SmsNotEnabled",
      message: "Property PR1 is not enabled for SMS; ask the operator to enable it.",
    });
    expect(refusal(s, { sender_owned: false, forward_from_owned: false })?.message).toMatch(/^From \+447700900001 is not one of this account's numbers/);
    expect(refusal(s, { forward_from_owned: false, forward_to_ours: true })?.message).toMatch(
      /^ForwardFromSms \+447700900002 is not one of this account's numbers/,
    );
    expect(refusal(s, { forward_to_ours: true })).toEqual({
      code: "DestinationNotAllowed",
      message: expect.stringMatching(/^ForwardToSms \+447700900003 is one of this service's own numbers/),
    });
    // A fact the send does not need may be anything.
    expect(refusal(item({ from: "ACME" }), { sender_owned: false, forward_from_owned: false, forward_to_ours: true })).toBeUndefined();
    // Then the recipient: not one of our numbers, not opted out.
    expect(refusal(s, { recipient_ours: true, opted_out: true })?.message).toMatch(/^To \+447700900123 is one of this service's own numbers/);
    expect(refusal(s, { opted_out: true })).toEqual({
      code: "RecipientOptedOut",
      message: expect.stringMatching(/^To \+447700900123 has opted out of messages from account AC1/),
    });
  });
});
