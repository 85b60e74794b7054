import { describe, expect, it } from "vitest";
import {
  concatInfo,
  formatStatus,
  isTemporaryStatus,
  normalizeSmppNumber,
  parseReceiptText,
  receiptOutcome,
  sourceAddress,
  submitParts,
} from "../../../src/carriers/smpp/smpp-codec.js";
import { idForms } from "../../../src/delivery/segment-store.js";
import { textEncoding } from "../../../src/common/sms-text.js";
import { smppConfig } from "../../../src/config.js";
import { createPacer } from "../../../src/carriers/pacer.js";

describe("SMPP codec", () => {
  it("matches a message id in every form SMSCs write it: hex, decimal, leading zeros, case", () => {
    const submit = idForms("001A2B");
    expect(submit).toEqual({ key: "1a2b", hexValue: "6699" });
    // A receipt naming it in decimal matches the submit's hexValue; without zeros or in lower case, its key.
    expect(idForms("6699").key).toBe(submit.hexValue);
    expect(idForms("1a2b").key).toBe(submit.key);
    // A decimal submit id named in hex by the receipt: the receipt's hexValue is the submit's key.
    expect(idForms("1a2b").hexValue).toBe(idForms("6699").key);
    expect(idForms("msg-42")).toEqual({ key: "msg-42", hexValue: null });
    expect(idForms("0000").key).toBe("0");
  });

  it("reads receipts from the text format and maps states", () => {
    expect(parseReceiptText("id:0123 sub:001 dlvrd:000 submit date:2611241200 done date:2611241201 stat:UNDELIV err:034 text:hi")).toEqual({
      id: "0123",
      stat: "UNDELIV",
      err: "034",
    });
    expect(parseReceiptText("Hello, see you at 8")).toBeUndefined();
    expect(receiptOutcome("DELIVRD")).toBe("Delivered");
    expect(receiptOutcome(2)).toBe("Delivered");
    expect(receiptOutcome(5)).toBe("Failed");
    expect(receiptOutcome("REJECTD")).toBe("Failed");
    expect(receiptOutcome("ENROUTE")).toBeNull();
    expect(receiptOutcome(6)).toBeNull();
  });

  it("formats and classifies command statuses", () => {
    expect(formatStatus(0x0b)).toBe("0x0000000B ESME_RINVDSTADR");
    expect(formatStatus(0x0e)).toBe("0x0000000E ESME_RINVPASWD");
    expect(isTemporaryStatus(0x58)).toBe(true);
    expect(isTemporaryStatus(0x14)).toBe(true);
    expect(isTemporaryStatus(0x0b)).toBe(false);
  });

  it("sets source TON/NPI from From and normalises inbound numbers to E164", () => {
    expect(sourceAddress("+447700900123")).toEqual({ source_addr: "447700900123", source_addr_ton: 1, source_addr_npi: 1 });
    expect(sourceAddress("Shop")).toEqual({ source_addr: "Shop", source_addr_ton: 5, source_addr_npi: 0 });
    expect(normalizeSmppNumber("447700900123", 1)).toBe("+447700900123");
    expect(normalizeSmppNumber("07700900123", 2, "GB")).toBe("+447700900123");
    expect(normalizeSmppNumber("00447700900123", 0)).toBe("+447700900123");
    expect(normalizeSmppNumber("Shop", 5)).toBe("Shop");
    expect(normalizeSmppNumber("12345", 0)).toBe("12345");
  });

  it("splits into exactly NumSegments parts with one concatenation reference", () => {
    for (const text of ["a".repeat(160), "a".repeat(161), "€".repeat(80) + "a".repeat(100), "Привет ".repeat(30), "😀".repeat(40)]) {
      const parts = submitParts(text, 9);
      expect(parts.length).toBe(textEncoding(text).numSegments);
      if (parts.length > 1) {
        parts.forEach((p, i) => {
          expect(p.esm_class).toBe(0x40);
          expect([...p.short_message.subarray(0, 6)]).toEqual([5, 0, 3, 9, parts.length, i + 1]);
          expect(concatInfo([p.short_message.subarray(1, 6)])).toEqual({ ref: 9, total: parts.length, part: i + 1 });
          expect(p.short_message.length).toBeLessThanOrEqual(140 + (p.data_coding === 0 ? 20 : 0)); // unpacked septets: up to 160 bytes
        });
      }
    }
  });

  it("reads SMPP_URL and the SMPP_ settings", () => {
    expect(smppConfig({ SMPP_URL: "smpps://sys%40id:p%3Ass@smsc.example:3551", SMPP_TPS: "50" })).toMatchObject({
      host: "smsc.example",
      port: 3551,
      tls: true,
      systemId: "sys@id",
      password: "p:ss",
      window: 10,
      tps: 50,
      moReassemblyMs: 300_000,
    });
    expect(smppConfig({ SMPP_URL: "smpp://a:b@h" })).toMatchObject({ port: 2775, tls: false, tps: 0, systemType: "" });
    expect(() => smppConfig({ SMPP_URL: "http://a:b@h" })).toThrow(/smpp:\/\//);
    expect(() => smppConfig({ SMPP_URL: "smpp://a:b@h", SMPP_WINDOW: "0" })).toThrow(/SMPP_WINDOW/);
  });

  it("sizes the dispatcher's claim by the rate and the window, less what it already holds", async () => {
    const pacer = createPacer({ window: 10, tps: 50, initialRoundTripMs: 100 });
    expect(pacer.capacity(30_000)).toBe(1500); // 50/s for 30 s; the window (10 per 100 ms) allows 3000
    const slot = await pacer.acquire();
    expect(pacer.capacity(30_000)).toBe(1499);
    slot.done();
    expect(createPacer({ window: 10, tps: 0, initialRoundTripMs: 1000 }).capacity(30_000)).toBe(300);
    expect(createPacer({ window: Infinity, tps: 0 }).capacity(30_000)).toBe(Infinity);
  });
});
