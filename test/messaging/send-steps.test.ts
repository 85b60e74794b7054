import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { SendMessageRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { errorCodeOf, fieldErrors } from "../../src/common/errors.js";
import type { SendFacts } from "../../src/messaging/message-send-store.js";
import { validateSend, type ValidSend } from "../../src/messaging/send-rules.js";
import {
  ACCESS_RULES,
  accessRefusal,
  addToBatch,
  emptyBatch,
  factsSpec,
  RULES,
  ruleRefusal,
  SEND_RULES,
  type SendItem,
} from "../../src/messaging/send-steps.js";
import { messageRow } from "../../src/messaging/send-rows.js";

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
  property_found: true,
  sms_off: "",
  sender_owned: true,
  forward_from_owned: true,
  forward_to_ours: false,
  recipient_ours: false,
  opted_out: false,
  no_price: false,
  send_price: null,
  key_expired: null,
  key_hash: null,
  m_sid: null,
  m_account_sid: null,
  m_property_sid: null,
  m_sender: null,
  m_recipient: null,
  m_text: null,
  stored: false,
  charged: null,
};

const refusal = (it: SendItem, facts: Partial<SendFacts>) => {
  const f = { ...GOOD, ...facts };
  const err = accessRefusal(SEND_RULES, it, f) ?? ruleRefusal(SEND_RULES, it, f, fieldErrors);
  return err && { code: errorCodeOf(err), message: err.rawMessage };
};

describe("the send's rules that need data (send-steps.ts)", () => {
  it("each rule brings its own fact, in the documented order; the statement's keys are the rules' own", () => {
    expect(ACCESS_RULES.map((r) => r.name)).toEqual(["credentials", "property"]);
    expect(RULES.map((r) => r.name)).toEqual([
      "SMS enabled",
      "sender owned",
      "forward sender owned",
      "forward destination not ours",
      "destination not ours",
      "recipient not opted out",
      "sender ID registered",
      "destination priced",
      "price",
    ]);
    const spec = factsSpec(SEND_RULES);
    expect(spec.facts.map((f) => f.name)).toEqual([
      "token_hash",
      "property_found",
      "sms_off",
      "sender_owned",
      "forward_from_owned",
      "forward_to_ours",
      "recipient_ours",
      "opted_out",
      "sender_registered",
      "no_price",
      "send_price",
    ]);
    expect(spec.keys).toEqual([
      "sender",
      "forward_from",
      "forward_to",
      "sender_id_name",
      "sender_id_country",
      "default_rate_card",
      "rate_at",
      "price_segments",
      "rate_version",
      "cached_rate",
    ]);
    // The facts recorded in the stored message: label mode's flag, and the price.
    expect(spec.facts.filter((f) => f.column).map((f) => [f.name, f.column])).toEqual([
      ["sender_registered", "sender_id_registered"],
      ["send_price", "price"],
    ]);
    expect(spec.charge).toEqual({ amountFact: "send_price" });
  });

  /** What the statement compares for one send stored by it: each fact's wanted value (null: any), and its lookup keys. */
  function wanted(it: SendItem): { wants: Record<string, unknown>; keys: Record<string, unknown> } {
    const batch = emptyBatch(factsSpec(SEND_RULES), it.now);
    const send = "send" in it.checked ? it.checked.send : undefined;
    addToBatch(SEND_RULES, batch, 0, it, send ? messageRow(it, send, undefined) : null);
    const wants = Object.fromEntries(Object.entries(batch.wanted).flatMap(([f, v]) => (v[0] === null ? [] : [[f, v[0]]])));
    const keys = Object.fromEntries(Object.entries(batch.keys).map(([k, v]) => [k, v[0]]));
    return { wants, keys };
  }

  it("an E164 send with forward numbers needs its token, the property, SMS enabled, both numbers owned and the forward destination not ours", () => {
    const { wants, keys } = wanted(item({ from: "+447700900001", forwardFromSms: "+447700900002", forwardToSms: "+447700900003" }));
    expect(wants).toEqual({
      token_hash: "hash-1",
      property_found: true,
      sms_off: "",
      sender_owned: true,
      forward_from_owned: true,
      forward_to_ours: false,
      recipient_ours: false,
      opted_out: false,
      no_price: false,
    });
    expect(keys).toMatchObject({
      i: 0,
      account_sid: "AC1",
      property_sid: "PR1",
      recipient: "+447700900123",
      idem_key: null,
      sender: "+447700900001",
      forward_from: "+447700900002",
      forward_to: "+447700900003",
      // The rate's keys: DEFAULT_RATE_CARD (none here), the time of accept and the segments the price
      // multiplies; no copy of a card in this process (rate-cache.ts): no version, no cached rate.
      default_rate_card: null,
      rate_at: new Date(NOW * 1000).toISOString(),
      price_segments: "1",
      rate_version: null,
      cached_rate: null,
    });
  });

  it("an alphanumeric send needs no ownership and looks none up; a request with problems is not stored, so it wants nothing", () => {
    const alpha = wanted(item({ from: "ACME" }));
    expect(alpha.wants).toEqual({ token_hash: "hash-1", property_found: true, sms_off: "", recipient_ours: false, opted_out: false, no_price: false });
    expect(alpha.keys).toMatchObject({ sender: null, forward_from: null, forward_to: null, sender_id_name: null, sender_id_country: null });
    const bad = wanted(item({ to: "12" }));
    expect(bad.wants).toEqual({});
    expect(bad.keys).toMatchObject({ recipient: null, sender: null });
  });

  it("an alphanumeric send SENDER_ID_REGISTRATION checks looks up its upper-cased name and the country; require wants it Registered, label wants any value", () => {
    const au = { to: "+61412345678", from: "Acme" };
    const require = wanted(item(au, { senderIdCheck: { country: "AU", mode: "require" } }));
    expect(require.wants).toMatchObject({ sender_registered: true });
    expect(require.keys).toMatchObject({ sender_id_name: "ACME", sender_id_country: "AU" });
    const label = wanted(item(au, { senderIdCheck: { country: "AU", mode: "label" } }));
    expect(label.wants).not.toHaveProperty("sender_registered");
    expect(label.keys).toMatchObject({ sender_id_name: "ACME", sender_id_country: "AU" });
    expect(refusal(item(au, { senderIdCheck: { country: "AU", mode: "require" } }), { sender_registered: false })).toEqual({
      code: "SenderIdNotRegistered",
      message: expect.stringMatching(/^From "Acme" is not a sender ID registered to this account for AU/),
    });
    expect(refusal(item(au, { senderIdCheck: { country: "AU", mode: "label" } }), { sender_registered: false })).toBeUndefined();
  });

  it("the forward of a reply has no credentials to re-check; relayed from the responding party's number it needs no ownership, and its destination must not be ours", () => {
    const draft = (item({ from: "+447700900009" }).checked as { send: ValidSend }).send;
    const relay = item({ from: "+447700900009" }, { account: { sid: "AC1" }, forward: { inReplyTo: "MG0", relay: true, draft } });
    expect(wanted(relay).wants).toEqual({ property_found: true, sms_off: "", recipient_ours: false, opted_out: false, no_price: false });
    const owned = { ...relay, forward: { inReplyTo: "MG0", relay: false, draft } };
    expect(wanted(owned).wants).toMatchObject({ sender_owned: true });
  });

  it("judges in the documented order: credentials, property, the request's problems, account, property, sender, forward sender, forward destination, recipient, opt-out", () => {
    const s = item({ from: "+447700900001", forwardFromSms: "+447700900002", forwardToSms: "+447700900003" });
    expect(refusal(s, {})).toBeUndefined();
    expect(refusal(s, { token_hash: "other", property_found: false, sms_off: "Account" })?.code).toBe("Unauthorized");
    expect(refusal(s, { token_hash: null })?.code).toBe("Unauthorized");
    expect(refusal(s, { property_found: false, sms_off: null })).toEqual({
      code: "NotFound",
      message: expect.stringContaining("PR1"),
    });
    expect(refusal(item({ to: "12" }), { sms_off: "Account" })?.code).toBe("InvalidRecipient");
    expect(refusal(s, { sms_off: "Account", sender_owned: false })).toEqual({
      code: "SmsNotEnabled",
      message: "Account AC1 is not enabled for SMS; ask the operator to enable it.",
    });
    expect(refusal(s, { sms_off: "Property", sender_owned: false })).toEqual({
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
    expect(refusal(s, { opted_out: true, no_price: true })).toEqual({
      code: "RecipientOptedOut",
      message: expect.stringMatching(/^To \+447700900123 has opted out of messages from account AC1/),
    });
    // Last, the price: a priced account's destination needs a rate.
    expect(refusal(s, { no_price: true })).toEqual({
      code: "DestinationNotAllowed",
      message:
        "To +447700900123 has no price on this account's rate card, so it cannot be sent there: nothing was stored. Ask the operator to add a rate for its prefix.",
    });
    // The price itself refuses nothing: it is recorded, and charged after every rule.
    expect(refusal(s, { send_price: "105000" })).toBeUndefined();
    expect(SEND_RULES.charge!.refuse(s, (s.checked as { send: ValidSend }).send, { ...GOOD, send_price: "105000", charged: false })).toMatchObject({
      rawMessage: expect.stringContaining("price of 0.105"),
    });
  });
});
