/**
 * The SMPP server's pure parts (docs/smpp-server.md): SMPP times, the text of a submit_sm and its
 * parts, the joiner of long texts, the decoding of hostile PDUs, and the mapping of refusals to
 * command_status.
 */
import { describe, expect, it, vi } from "vitest";
import { apiError, fieldError, smppStatusOf } from "../../src/common/errors.js";
import { PartJoiner } from "../../src/smpp-server/part-joiner.js";
import { decodePdu, PduError, status, type SubmitSmPdu } from "../../src/smpp-server/smpp-pdu.js";
import { commandStatusOf, sendRequestOf } from "../../src/smpp-server/smpp-submit.js";
import { decodeText, textPartOf } from "../../src/smpp-server/smpp-text.js";
import { parseSmppTime, receiptDate, SmppTimeError } from "../../src/smpp-server/smpp-time.js";

const NOW = new Date("2026-11-22T12:00:00Z");

describe("SMPP times", () => {
  it("absolute times with their quarter-hour offset from UTC", () => {
    expect(parseSmppTime("261122130000000+", NOW)).toStrictEqual(new Date("2026-11-22T13:00:00Z"));
    // 23:00 at UTC+10 (40 quarter hours) is 13:00 UTC.
    expect(parseSmppTime("261122230000040+", NOW)).toStrictEqual(new Date("2026-11-22T13:00:00Z"));
    expect(parseSmppTime("261122080000016-", NOW)).toStrictEqual(new Date("2026-11-22T12:00:00Z"));
    expect(parseSmppTime("261122120000500+", NOW)).toStrictEqual(new Date("2026-11-22T12:00:00.500Z"));
  });

  it("relative times from the given now", () => {
    expect(parseSmppTime("000000010000000R", NOW)).toStrictEqual(new Date("2026-11-22T13:00:00Z"));
    expect(parseSmppTime("000002003000000R", NOW)).toStrictEqual(new Date("2026-11-24T12:30:00Z"));
    expect(parseSmppTime("000100000000000R", NOW)).toStrictEqual(new Date("2026-12-22T12:00:00Z"));
  });

  it("empty is none; anything else is refused", () => {
    expect(parseSmppTime("", NOW)).toBeUndefined();
    for (const bad of ["garbage", "2611221300", "261322130000000+", "260431120000000+", "261122250000000+", "261122130000049+", "26112213000000+0"]) {
      expect(() => parseSmppTime(bad, NOW), bad).toThrow(SmppTimeError);
    }
  });

  it("receipt dates are YYMMDDhhmm in UTC", () => {
    expect(receiptDate(new Date("2026-01-02T03:04:59Z"))).toBe("2601020304");
  });
});

function submit(over: Partial<SubmitSmPdu> = {}): SubmitSmPdu {
  return {
    kind: "submit_sm",
    serviceType: "",
    sourceTon: 1,
    sourceNpi: 1,
    sourceAddr: "61400000001",
    destTon: 1,
    destNpi: 1,
    destinationAddr: "61412345678",
    esmClass: 0,
    registeredDelivery: 1,
    scheduleDeliveryTime: "",
    validityPeriod: "",
    dataCoding: 0,
    shortMessage: Buffer.alloc(0),
    ...over,
  };
}

describe("a submit_sm's text", () => {
  it("decodes GSM 7 with its escapes, Latin-1, IA5 and UCS-2 with surrogate pairs", () => {
    expect(decodeText(Buffer.from([0x48, 0x69, 0x1b, 0x65, 0x00]), 0)).toBe("Hi€@");
    expect(decodeText(Buffer.from("café", "latin1"), 3)).toBe("café");
    expect(decodeText(Buffer.from("plain"), 1)).toBe("plain");
    expect(decodeText(Buffer.from([0xd8, 0x3d, 0xde, 0x00]), 8)).toBe("😀");
    expect(() => decodeText(Buffer.from([0x00]), 8)).toThrow(PduError);
  });

  it("reads the part of a UDH (8- and 16-bit references) or of the sar_* TLVs; a part of one is a text", () => {
    const udh8 = Buffer.from([0x05, 0x00, 0x03, 0x2a, 0x02, 0x01, 0x41]);
    expect(textPartOf(submit({ esmClass: 0x40, shortMessage: udh8 }))).toStrictEqual({ bytes: Buffer.from([0x41]), part: { ref: 0x2a, total: 2, seq: 1 } });
    const udh16 = Buffer.from([0x06, 0x08, 0x04, 0x01, 0x02, 0x03, 0x03, 0x42]);
    expect(textPartOf(submit({ esmClass: 0x40, shortMessage: udh16 })).part).toStrictEqual({ ref: 0x0102, total: 3, seq: 3 });
    expect(textPartOf(submit({ shortMessage: Buffer.from("x"), sar: { ref: 9, total: 2, seq: 2 } })).part).toStrictEqual({ ref: 9, total: 2, seq: 2 });
    expect(textPartOf(submit({ shortMessage: Buffer.from("x"), sar: { ref: 9, total: 1, seq: 1 } })).part).toBeUndefined();
  });

  it("refuses what it cannot take, each with its status", () => {
    const refusal = (pdu: SubmitSmPdu) => {
      try {
        textPartOf(pdu);
        return "taken";
      } catch (err) {
        return (err as PduError).status;
      }
    };
    expect(refusal(submit({ dataCoding: 4 }))).toBe(status("ESME_RINVDCS"));
    expect(refusal(submit({ esmClass: 0x40, shortMessage: Buffer.from([0x09, 0x00]) }))).toBe(status("ESME_RINVESMCLASS"));
    expect(refusal(submit({ sar: { ref: 1, total: 2, seq: 3 } }))).toBe(status("ESME_RINVTLVVAL"));
  });
});

describe("the Send SMS request of a submit_sm", () => {
  it("maps TONs, times and registered_delivery", () => {
    const req = sendRequestOf(submit({ scheduleDeliveryTime: "000000010000000R", validityPeriod: "000000020000000R" }), "hi", "PR1", NOW);
    expect(req).toMatchObject({ propertySid: "PR1", from: "+61400000001", to: "+61412345678", text: "hi", deliveryReceipt: true, validityPeriod: 3600 });
    expect(req.schedule).toBe(BigInt(NOW.getTime() / 1000 + 3600));
    expect(sendRequestOf(submit({ sourceTon: 5, sourceAddr: "ACME", registeredDelivery: 0 }), "x", "PR1", NOW)).toMatchObject({
      from: "ACME",
      deliveryReceipt: false,
    });
    expect(sendRequestOf(submit({ sourceTon: 0, sourceAddr: "" }), "x", "PR1", NOW).from).toBe("");
    // A validity longer than 14 days is 14 days.
    expect(sendRequestOf(submit({ validityPeriod: "010000000000000R" }), "x", "PR1", NOW).validityPeriod).toBe(1_209_600);
  });

  it("refuses a TON it does not take, a validity already over, and a bad time", () => {
    const st = (over: Partial<SubmitSmPdu>) => {
      try {
        sendRequestOf(submit(over), "x", "PR1", NOW);
        return "taken";
      } catch (err) {
        return (err as PduError).status;
      }
    };
    expect(st({ sourceTon: 2 })).toBe(status("ESME_RINVSRCTON"));
    expect(st({ destTon: 5 })).toBe(status("ESME_RINVDSTTON"));
    expect(st({ destinationAddr: "abc" })).toBe(status("ESME_RINVDSTADR"));
    expect(st({ validityPeriod: "261122110000000+" })).toBe(status("ESME_RINVEXPIRY"));
    expect(st({ scheduleDeliveryTime: "nope" })).toBe(status("ESME_RINVSCHED"));
  });
});

describe("refusals as command_status", () => {
  it("the error table's SMPP column, by field for the generic parameter errors, the default otherwise", () => {
    expect(commandStatusOf(apiError("RateLimited", "slow down"))).toBe(status("ESME_RTHROTTLED"));
    expect(commandStatusOf(apiError("InsufficientFunds", "no money"))).toBe(status("ESME_RSUBMITFAIL"));
    expect(commandStatusOf(apiError("InvalidRecipient", "bad To"))).toBe(status("ESME_RINVDSTADR"));
    expect(commandStatusOf(fieldError("To", "InvalidParameter", "bad"))).toBe(status("ESME_RINVDSTADR"));
    expect(commandStatusOf(fieldError("From", "MissingParameter", "bad"))).toBe(status("ESME_RINVSRCADR"));
    expect(commandStatusOf(fieldError("Text", "InvalidParameter", "bad"))).toBe(status("ESME_RINVMSGLEN"));
    expect(commandStatusOf(fieldError("WebhookUri", "InvalidParameter", "bad"))).toBe(status("ESME_RSUBMITFAIL"));
    expect(commandStatusOf(new Error("a bug"))).toBe(status("ESME_RSYSERR"));
    expect(commandStatusOf(new PduError(0x61, "bad time"))).toBe(0x61);
    expect(smppStatusOf("MessageNotCancelable")).toBe("ESME_RCANCELFAIL");
    expect(smppStatusOf("SmsNotEnabled")).toBe("ESME_RX_P_APPN");
  });
});

describe("hostile PDUs", () => {
  const header = (length: number, id: number, seq = 1) => {
    const b = Buffer.alloc(16);
    b.writeUInt32BE(length, 0);
    b.writeUInt32BE(id, 4);
    b.writeUInt32BE(seq, 12);
    return b;
  };

  it("a truncated body, a string without its NUL, a TLV past the end are PduErrors, never a crash", () => {
    const bind = Buffer.concat([header(20, 0x09), Buffer.from("abc\0")]);
    bind.writeUInt32BE(bind.length, 0);
    expect(() => decodePdu(bind)).toThrow(PduError);
    const noNul = Buffer.concat([header(0, 0x04), Buffer.from("abcdef")]);
    noNul.writeUInt32BE(noNul.length, 0);
    expect(() => decodePdu(noNul)).toThrow(PduError);
    const longSysId = Buffer.concat([header(0, 0x09), Buffer.from("a".repeat(20) + "\0pw\0\0\x34\0\0\0")]);
    longSysId.writeUInt32BE(longSysId.length, 0);
    expect(() => decodePdu(longSysId)).toThrow(expect.objectContaining({ status: status("ESME_RINVSYSID") }));
    // A random fuzz: every byte string decodes or throws a PduError.
    let seed = 42;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % 256;
    for (let i = 0; i < 5000; i++) {
      const len = 16 + (rnd() % 64);
      const b = Buffer.from(Array.from({ length: len }, () => rnd()));
      b.writeUInt32BE(len, 0);
      b.writeUInt32BE([0x01, 0x02, 0x03, 0x04, 0x06, 0x08, 0x09, 0x15, 0x80000005][i % 9]!, 4);
      try {
        decodePdu(b);
      } catch (err) {
        expect(err).toBeInstanceOf(PduError);
      }
    }
  });
});

describe("the part joiner", () => {
  it("joins parts in order, answers duplicates too, refuses past its bound and gives up a text whose parts stop", () => {
    vi.useFakeTimers();
    try {
      const expired: string[][] = [];
      const j = new PartJoiner<string>((w) => expired.push(w), 1000, 2);
      expect(j.add("k", { total: 3, seq: 2 }, Buffer.from("b"), "w2").kind).toBe("held");
      expect(j.add("k", { total: 3, seq: 2 }, Buffer.from("b"), "w2again").kind).toBe("held");
      expect(j.add("k", { total: 3, seq: 1 }, Buffer.from("a"), "w1").kind).toBe("held");
      const whole = j.add("k", { total: 3, seq: 3 }, Buffer.from("c"), "w3");
      expect(whole).toStrictEqual({ kind: "whole", bytes: Buffer.from("abc"), first: "w1", waiters: ["w1", "w2again", "w3", "w2"] });
      expect(j.add("x", { total: 2, seq: 1 }, Buffer.from("x"), "x1").kind).toBe("held");
      expect(j.add("y", { total: 2, seq: 1 }, Buffer.from("y"), "y1").kind).toBe("held");
      expect(j.add("z", { total: 2, seq: 1 }, Buffer.from("z"), "z1").kind).toBe("full");
      vi.advanceTimersByTime(1001);
      expect(expired).toStrictEqual([["x1"], ["y1"]]);
      expect(j.size).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
