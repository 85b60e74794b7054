/**
 * Issue 41, defect 2, as a property: whatever way a number is spelled (its trunk prefix after the
 * calling code, once or twice; the national prefix of another country; an international prefix
 * `+00` or `00`; spaces, dashes, dots and brackets; blanks around it), every path a number enters
 * either refuses it or holds it in the one canonical spelling, never as written: the send's To,
 * From, ForwardToSms and ForwardFromSms (validateSend, which SendMessage, each SendBatch item and
 * every wire run), a send and a batch item stored, the OptOuts API's add and delete, the operator's
 * numbers, and a carrier's inbound number (Kannel's and SMPP's readings, then receiveInbound).
 */
import fc from "fast-check";
import { Metadata } from "libphonenumber-js/core";
import metadataJson from "libphonenumber-js/max/metadata";
import mobileExamples from "libphonenumber-js/mobile/examples";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { SendMessageRequestSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import { normalizeKannelNumber } from "../../src/carriers/kannel.js";
import { normalizeSmppNumber } from "../../src/carriers/smpp/smpp-codec.js";
import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import { parseE164 } from "../../src/common/phone.js";
import { receiveInbound, sendAfterCommit } from "../../src/delivery/inbound.js";
import { validateSend } from "../../src/messaging/send-rules.js";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";
import { sendJudge } from "../../src/messaging/send-pipeline.js";
import { SEND_RULES } from "../../src/messaging/send-steps.js";

const metadata = new Metadata(metadataJson) as unknown as {
  selectNumberingPlan(country: string): void;
  numberingPlan: { nationalPrefix(): string | undefined; callingCode(): string };
};

/** A canonical number: its calling code, national number, and its country's trunk prefix. */
interface Base {
  code: string;
  national: string;
  trunk: string;
  number: string;
}

/** Every country's example mobile number that parseE164 takes, with the probe's own numbers. */
const BASES: Base[] = [
  ...Object.entries(mobileExamples as Record<string, string>).map(([country, national]) => {
    metadata.selectNumberingPlan(country);
    const code = metadata.numberingPlan.callingCode();
    return { code, national, trunk: metadata.numberingPlan.nationalPrefix() ?? "", number: `+${code}${national}` };
  }),
  { code: "61", national: "412345679", trunk: "0", number: "+61412345679" },
  { code: "61", national: "491234567", trunk: "0", number: "+61491234567" },
  { code: "1", national: "4155559101", trunk: "1", number: "+14155559101" },
].filter((b) => parseE164(b.number) !== undefined);

/** A spelling of a base: how a client or a carrier may write it. */
const spelling = (separators: boolean) =>
  fc
    .record({
      base: fc.constantFrom(...BASES),
      // Between the calling code and the national number: nothing, its trunk prefix (once, twice), another's.
      middle: fc.constantFrom("", "T", "TT", "0", "00", "1", "8"),
      lead: fc.constantFrom("+", "+", "+", "+00", "00"),
      cuts: separators ? fc.array(fc.tuple(fc.nat(20), fc.constantFrom(" ", "-", ".", "(", ")", "  ")), { maxLength: 3 }) : fc.constant([]),
      around: separators ? fc.constantFrom("", " ", "\t") : fc.constant(""),
    })
    .map(({ base, middle, lead, cuts, around }) => {
      let digits = `${base.code}${middle.replaceAll("T", base.trunk || "0")}${base.national}`;
      for (const [at, sep] of cuts) digits = digits.slice(0, 1 + (at % digits.length)) + sep + digits.slice(1 + (at % digits.length));
      return { base, written: `${around}${lead}${digits}${around}` };
    });

/**
 * The oracle, libphonenumber's alone: the number a spelling names (separators dropped, an
 * international prefix read as +, then read until the reading no longer changes), when it is a
 * possible one; undefined when it names none.
 */
function canonicalOf(written: string): string | undefined {
  let number = written
    .trim()
    .replace(/[\s\-.()]/g, "")
    .replace(/^\+?00/, "+");
  if (!/^\+\d+$/.test(number)) return undefined;
  for (let i = 0; i < 4; i++) {
    const phone = parsePhoneNumberFromString(number);
    if (phone === undefined) return undefined;
    if (phone.number === number) return phone.isPossible() && /^\+[1-9]\d{7,14}$/.test(number) ? number : undefined;
    number = phone.number;
  }
  return undefined;
}

describe("the send's number fields: refused, or the one spelling (validateSend)", () => {
  const opts = { webhookAllowPrivate: false };
  it("To, ForwardToSms, From and ForwardFromSms over 3,000 spellings", () => {
    let rewritten = 0;
    fc.assert(
      fc.property(spelling(true), ({ written }) => {
        const canonical = canonicalOf(written);
        if (canonical !== written.trim()) rewritten++;
        const req = create(SendMessageRequestSchema, { to: written, text: "hi", forwardToSms: written, from: written, forwardFromSms: written });
        const out = validateSend(req, 1_800_000_000, opts);
        if ("send" in out) {
          // Accepted: every field holds the one spelling, exactly.
          expect(canonical).toBe(written.trim());
          expect([out.send.to.number, out.send.forwardToSms, out.send.from, out.send.forwardFromSms]).toEqual(Array(4).fill(canonical));
        } else {
          const fields = out.problems.map((p) => p.field).sort();
          // Refused: a spelling the API does not hold is refused in every field that took it.
          if (canonical !== written.trim()) expect(fields).toEqual(["ForwardFromSms", "ForwardToSms", "From", "To"]);
        }
      }),
      { numRuns: 3000, seed: 41_2 },
    );
    expect(rewritten).toBeGreaterThan(2000);
  });

  it("a refused spelling of a number names the one spelling to use", () => {
    fc.assert(
      fc.property(spelling(true), ({ written }) => {
        const canonical = canonicalOf(written);
        fc.pre(canonical !== undefined && canonical !== written.trim());
        const out = validateSend(create(SendMessageRequestSchema, { to: written, text: "hi", forwardToSms: written }), 1_800_000_000, opts);
        const messages = "problems" in out ? out.problems.map((p) => `${p.field}: ${p.message}`) : [];
        expect(messages).toEqual([expect.stringMatching(/^To: /), expect.stringMatching(/^ForwardToSms: /)]);
        for (const m of messages) expect(m).toContain(`Write it ${canonical} `);
      }),
      { numRuns: 1000, seed: 41_3 },
    );
  });
});

describe(`every stored number is the one spelling (${dbKind()})`, () => {
  let t: TestApp;
  let a: Tenant;
  beforeAll(async () => {
    t = await createTestApp({ config: { sendRateLimit: 0 } });
    a = await createTenant(t.app);
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });
  const call = (method: "POST" | "DELETE", url: string, payload?: object, auth = a.auth) =>
    t.app.inject({ method, url, headers: { authorization: auth }, ...(payload ? { payload } : {}) });

  /** A 400 naming `field`, or a 200 whose `value` is the one spelling of `written`. */
  function refusedOrCanonical(res: { statusCode: number; body: string; json(): any }, field: string, value: (body: any) => unknown, written: string) {
    const canonical = canonicalOf(written);
    if (res.statusCode === 200) {
      expect(canonical, `${written} accepted`).toBe(written.trim());
      expect(value(res.json())).toBe(canonical);
    } else {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().ResponseStatus.Errors.map((e: { FieldName: string }) => e.FieldName)).toContain(field);
    }
  }

  it("a send, a batch item, an opt-out added and deleted, an operator's number, a carrier's STOP", async () => {
    await fc.assert(
      fc.asyncProperty(spelling(true), async ({ written }) => {
        await t.db.orm.em.fork().execute("delete from opt_outs where account_sid = ?", [a.accountSid]);
        const canonical = canonicalOf(written);
        const sent = await call("POST", `/v2/Properties/${a.propertySid}/Messages`, { From: "Acme", To: written, Text: "hi" });
        refusedOrCanonical(sent, "To", (b) => b.To, written);

        const batch = await call("POST", `/v2/Properties/${a.propertySid}/BatchMessages`, {
          Messages: [{ From: "Acme", To: "+447700900111", ForwardToSms: written, Text: "hi" }],
        });
        expect(batch.statusCode, batch.body).toBe(200);
        const item = batch.json().Messages[0];
        if (item.MessageSid) {
          expect(canonical).toBe(written.trim());
        } else expect(item.ResponseStatus.Errors.map((e: { FieldName: string }) => e.FieldName)).toContain("ForwardToSms");

        const added = await call("POST", `/v2/Accounts/${a.accountSid}/OptOuts`, { Number: written });
        refusedOrCanonical(added, "Number", (b) => b.Number, written);
        const removed = await call("DELETE", `/v2/Accounts/${a.accountSid}/OptOuts/${encodeURIComponent(written.trim().replace(/^\+/, ""))}`);
        if (removed.statusCode === 200) expect(removed.json().Number).toBe(canonical);
        else if (removed.statusCode === 400) expect(removed.json().ResponseStatus.Errors[0].FieldName).toBe("Number");
        else expect(removed.statusCode).toBe(404);

        const numbered = await call("POST", "/admin/v1/Numbers", { Number: written }, `Bearer ${ADMIN_TOKEN}`);
        if (numbered.statusCode === 409) expect(canonical).toBe(written.trim());
        else refusedOrCanonical(numbered, "Number", (b) => b.Number, written);

        // A carrier: Kannel's or SMPP's (TON 1) reading, then the inbound step. A STOP to an owned number opts out the one spelling.
        const from = written.length % 2 === 0 ? normalizeKannelNumber(written) : normalizeSmppNumber(written.trim().replace(/^\+/, ""), 1);
        // The keyword's answer is sent once the inbound SMS is stored (issue 41, defect 3), as the engine does.
        const stop = await sendAfterCommit(
          { orm: t.db.orm, noAlphaCountries: new Set(), judge: sendJudge(SEND_RULES) },
          await receiveInbound(t.db.orm.em.fork(), { from, to: a.ownedNumber, text: "STOP", at: t.clock.now() }, t.clock.now(), {}),
        );
        const listed = await t.db.orm.em.fork().execute<{ number: string }[]>("select number from opt_outs where account_sid = ?", [a.accountSid]);
        // Never another spelling of a number: the one spelling, or digits no number has.
        for (const row of listed) expect(canonicalOf(row.number) ?? row.number, row.number).toBe(row.number);
        if (stop.keyword && canonicalOf(from) !== undefined) expect(listed.map((r) => r.number)).toContain(canonicalOf(from));
      }),
      { numRuns: 60, seed: 41_4 },
    );
    const stored = await t.db.orm.em.fork().execute<{ n: string }[]>("select recipient as n from messages union select number from numbers");
    // The keyword answers go to what the carrier gave (digits no number has stay as they came).
    for (const { n } of stored) expect(canonicalOf(n) ?? n, n).toBe(n);
  }, 240_000);
});
