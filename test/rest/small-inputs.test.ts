/**
 * Small input defects a hostile-client probe found (issue 27, defect 12), each pinned by the rule
 * itself and by its answer over REST: a field sent under both of its names, control characters in
 * e-mail addresses, address lengths in code points, the ISO 3166-1 country list, and an
 * alphanumeric From with surrounding spaces.
 */
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CreateAddressRequestSchema } from "../../gen/switchboard/v2/addresses_pb.js";
import { SendBatchRequestSchema, SendMessageRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { isCountryCode, validateAddress } from "../../src/addresses/address-rules.js";
import type { FieldProblem } from "../../src/common/errors.js";
import { isEmail } from "../../src/common/phone.js";
import { Message } from "../../src/messaging/message.entity.js";
import { validateSend } from "../../src/messaging/send-rules.js";
import { messageConverter } from "../../src/rest/rest-fields.js";
import { admin, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

let t: TestApp;
let tenant: Tenant;
let fone: Tenant;
let now: number;

beforeAll(async () => {
  t = await createTestApp();
  tenant = await createTenant(t.app);
  fone = await createTenant(t.app);
  await admin(t.app, `/admin/v1/Accounts/${fone.accountSid}`, { RestCompatibility: "FoneDynamics" });
  now = Math.floor(t.clock.now().getTime() / 1000);
});
afterAll(async () => {
  await t?.close();
});

function post(who: Tenant, url: string, payload: object) {
  return t.app.inject({ method: "POST", url, headers: { authorization: who.auth }, payload });
}

/** The documented 400 body for one field problem. */
function oneField(field: string, code: string, message: string) {
  return { ResponseStatus: { ErrorCode: code, Message: message, Errors: [{ FieldName: field, ErrorCode: code, Message: message }] } };
}

describe("a field sent under both its JSON name and its proto name", () => {
  const twice = "Messages is given twice, as Messages and messages: send it under one name.";

  it("rule: the REST body reader reports it as InvalidParameter naming the field", () => {
    const problems: FieldProblem[] = [];
    messageConverter(SendBatchRequestSchema).read({ Messages: [{ To: "+447700900001" }], messages: [{ To: "+447700900002" }] }, "", problems);
    expect(problems).toStrictEqual([{ field: "Messages", code: "InvalidParameter", message: twice }]);
    // One of them null is "not given": no conflict.
    const none: FieldProblem[] = [];
    messageConverter(SendBatchRequestSchema).read({ Messages: [{ To: "+447700900001" }], messages: null }, "", none);
    expect(none).toStrictEqual([]);
  });

  it("wire: a Fone-compatible batch with both Messages and messages is a 400, nothing sent", async () => {
    const res = await post(fone, `/v2/Properties/${fone.propertySid}/BatchMessages`, {
      Messages: [{ From: "Acme", To: "+447700900001", Text: "upper" }],
      messages: [{ From: "1", To: "bad", Text: "lower" }],
    });
    expect([res.statusCode, res.json()]).toStrictEqual([400, oneField("Messages", "InvalidParameter", twice)]);
    expect(await t.db.orm.em.fork().count(Message, { accountSid: fone.accountSid })).toBe(0);
    // Nested too: the field's path names it.
    const nested = await post(tenant, `/v2/Properties/${tenant.propertySid}/BatchMessages`, {
      Messages: [{ From: "Acme", To: "+447700900001", Text: "a", text: "b" }],
    });
    expect([nested.statusCode, nested.json()]).toStrictEqual([
      400,
      oneField("Messages[0].Text", "InvalidParameter", "Messages[0].Text is given twice, as Text and text: send it under one name."),
    ]);
  });
});

describe("e-mail addresses with control characters or line separators", () => {
  const hostile = [
    "a@b.c\u0085Bcc:x",
    "a@b.c\u0000",
    "a@b.c\u0007",
    "a\u001f@b.c",
    "a@b.c\u007f",
    "a@b.c\u009b",
    "a@b.c\u2028Bcc:x",
    "a@b.c\u2029",
    "a@b.c\rBcc:x",
  ];

  it("rule: isEmail refuses every C0, DEL, C1 control and U+2028/U+2029, and still takes plain addresses", () => {
    for (const value of hostile) expect(isEmail(value), JSON.stringify(value)).toBe(false);
    for (const value of ["ops@example.com", "first.last+tag@sub.example.co.uk", "o'brien@example.ie"]) expect(isEmail(value), value).toBe(true);
    // More than one address, a display name or a group is not one address.
    for (const value of ["a@b.c,d@e.f", '"x"<a@b.c>', "g:a@b.c;"]) expect(isEmail(value), value).toBe(false);
  });

  it("wire: ForwardToEmail a@b.c\\u0085Bcc:x is 400 InvalidEmail naming the field", async () => {
    const res = await post(tenant, `/v2/Properties/${tenant.propertySid}/Messages`, {
      From: "Acme",
      To: "+447700900123",
      Text: "hi",
      ForwardToEmail: "a@b.c\u0085Bcc:x",
    });
    expect([res.statusCode, res.json()]).toStrictEqual([
      400,
      oneField("ForwardToEmail", "InvalidEmail", `ForwardToEmail ${JSON.stringify("a@b.c\u0085Bcc:x")} is not a valid e-mail address.`),
    ]);
  });
});

describe("address text fields count code points, as Text does", () => {
  const astral = "😀"; // one code point, two UTF-16 units
  const base = { Line1: "1 Market St", City: "San Francisco", CountryCode: "US", PostalCode: "94103" };

  it("rule: 255 code points pass and 256 fail, in every address text field", () => {
    for (const [name, key] of [
      ["Friendly", "friendly"],
      ["Reference", "reference"],
      ["Line1", "line1"],
      ["Line2", "line2"],
      ["City", "city"],
      ["Region", "region"],
      ["PostalCode", "postalCode"],
    ] as const) {
      const req = (value: string) =>
        create(CreateAddressRequestSchema, { line1: "1 Market St", city: "San Francisco", countryCode: "US", postalCode: "94103", [key]: value });
      expect("problems" in validateAddress(req(astral.repeat(255))), name).toBe(false);
      const over = validateAddress(req(astral.repeat(256)));
      expect(over, name).toStrictEqual({ problems: [{ field: name, code: "InvalidParameter", message: `${name} is 256 characters long; the limit is 255.` }] });
    }
  });

  it("wire: Line1 of 255 astral characters is stored whole; 256 is 400 naming Line1", async () => {
    const ok = await post(tenant, `/v2/Accounts/${tenant.accountSid}/Addresses`, { ...base, Line1: astral.repeat(255) });
    expect(ok.statusCode, ok.body).toBe(200);
    const got = await t.app.inject({ method: "GET", url: `/v2/Addresses/${ok.json().AddressSid}`, headers: { authorization: tenant.auth } });
    expect(got.json().Line1).toBe(astral.repeat(255));
    const over = await post(tenant, `/v2/Accounts/${tenant.accountSid}/Addresses`, { ...base, Line1: astral.repeat(256) });
    expect([over.statusCode, over.json()]).toStrictEqual([400, oneField("Line1", "InvalidParameter", "Line1 is 256 characters long; the limit is 255.")]);
  });
});

describe("CountryCode is an ISO 3166-1 alpha-2 code, not a user-assigned one", () => {
  it("rule: XK (and the other user-assigned codes) are refused; assigned codes in any case pass", () => {
    for (const code of ["XK", "xk", "XA", "QM", "ZZ", "AA"]) expect(isCountryCode(code), code).toBe(false);
    for (const code of ["US", "gb", "RS", "AL", "SS", "AQ"]) expect(isCountryCode(code), code).toBe(true);
  });

  it("wire: CountryCode XK is 400 InvalidCountryCode; a Kosovo phone number still sends", async () => {
    const res = await post(tenant, `/v2/Accounts/${tenant.accountSid}/Addresses`, { Line1: "1 Rr. Nëna Terezë", City: "Prishtina", CountryCode: "XK" });
    expect([res.statusCode, res.json()]).toStrictEqual([
      400,
      oneField("CountryCode", "InvalidCountryCode", 'CountryCode "XK" is not a two-letter ISO 3166-1 country code such as US or GB.'),
    ]);
    // libphonenumber's region XK (+383) is another list: phone numbers there stay valid.
    const sent = await post(tenant, `/v2/Properties/${tenant.propertySid}/Messages`, { From: "Acme", To: "+38344123456", Text: "hi" });
    expect(sent.statusCode, sent.body).toBe(200);
  });
});

describe("an alphanumeric From with surrounding whitespace", () => {
  it("rule: it is validated and kept without the surrounding whitespace", () => {
    for (const given of [" BANK", "BANK ", "  BANK\t"]) {
      const v = validateSend(create(SendMessageRequestSchema, { from: given, to: "+447700900123", text: "hi" }), now, { webhookAllowPrivate: false });
      expect("send" in v && { from: v.send.from, kind: v.send.fromKind }, JSON.stringify(given)).toStrictEqual({ from: "BANK", kind: "Alphanumeric" });
    }
    // Spaces inside stay, as the spec allows them; 11 characters once trimmed is within the limit.
    const inner = validateSend(create(SendMessageRequestSchema, { from: " MY BANK 123 ", to: "+447700900123", text: "hi" }), now, {
      webhookAllowPrivate: false,
    });
    expect("send" in inner && inner.send.from).toBe("MY BANK 123");
  });

  it('wire: From " BANK" is stored and answered as "BANK"', async () => {
    const res = await post(tenant, `/v2/Properties/${tenant.propertySid}/Messages`, { From: " BANK", To: "+447700900123", Text: "hi" });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().From).toBe("BANK");
    const got = await t.app.inject({ method: "GET", url: `/v2/Messages/${res.json().MessageSid}`, headers: { authorization: tenant.auth } });
    expect(got.json().From).toBe("BANK");
  });
});
