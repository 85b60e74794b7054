/**
 * The encoding and segment count of a text (what NumSegments and Encoding report) come from a
 * fast path for basic GSM-7 text; it must give exactly the SMS calculator's answer, whatever the text.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { codePoints, textEncoding, textEncodingSlow } from "../../src/common/sms-text.js";

// Basic GSM-7 characters (letters, digits, @ £ $ ¥ è é ù ì ò Ç Ø å Æ ß É Ä Ö Ñ Ü § ¿ ä ö ñ ü à, LF),
// extension characters ([ ] { } \ ^ ~ | €), CR, and characters that need UCS-2.
const GSM_BASIC = [..."abcXYZ0189 .,!?@£$¥èéùìòÇØøÅåÆæßÉÄÖÑÜ§¿äöñüà\n_\"#%&'()*+-/:;<=>ΔΦΓΛΩΠΨΣΘΞ"];
const GSM_EXTENSION = [..."[]{}\\^~|€"];
const OTHER = ["\r", "ç", "ł", "中", "😀", "👍🏽", "e\u0301", "\u00a0"];

const text = (alphabet: string[], maxLength: number) => fc.array(fc.constantFrom(...alphabet), { maxLength }).map((cs) => cs.join(""));

describe("textEncoding", () => {
  it("gives the calculator's answer at the single-SMS and part boundaries", () => {
    for (const n of [0, 1, 152, 153, 154, 159, 160, 161, 305, 306, 307, 459, 460, 1600]) {
      const t = "a".repeat(n);
      expect(textEncoding(t), `length ${n}`).toEqual(textEncodingSlow(t));
    }
    expect(textEncoding("a".repeat(160))).toEqual({ encoding: "GSM7", numSegments: 1 });
    expect(textEncoding("a".repeat(161))).toEqual({ encoding: "GSM7", numSegments: 2 });
    expect(textEncoding("a".repeat(307))).toEqual({ encoding: "GSM7", numSegments: 3 });
  });

  it("gives the calculator's answer for any basic GSM-7 text", () => {
    fc.assert(
      fc.property(text(GSM_BASIC, 500), (t) => {
        expect(textEncoding(t)).toEqual(textEncodingSlow(t));
      }),
      { numRuns: 300 },
    );
  });

  it("gives the calculator's answer for text mixing in extension characters, CR and UCS-2 characters", () => {
    fc.assert(
      fc.property(text([...GSM_BASIC, ...GSM_EXTENSION, ...OTHER], 400), (t) => {
        expect(textEncoding(t)).toEqual(textEncodingSlow(t));
      }),
      { numRuns: 300 },
    );
  });
});

describe("codePoints", () => {
  it("counts what spreading the string counts, for any string (pairs, lone surrogates, ASCII)", () => {
    const units = fc.array(fc.oneof(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0xd800, max: 0xdfff })), { maxLength: 60 });
    fc.assert(
      fc.property(units, (codes) => {
        const s = String.fromCharCode(...codes);
        expect(codePoints(s)).toBe([...s].length);
      }),
      { numRuns: 2000 },
    );
    expect(codePoints("😀".repeat(1600))).toBe(1600);
    expect(codePoints("\ud83d")).toBe(1);
  });
});
