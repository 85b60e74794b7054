import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LOOK_ALIKES, smartEncode } from "../../src/common/smart-encoding.js";
import { textEncoding, textEncodingSlow } from "../../src/common/sms-text.js";

const lookAlikes = [...LOOK_ALIKES.keys()];
/** Characters that are not look-alikes: GSM-7 ones, and ones with no GSM-7 look-alike (accents, Cyrillic, CJK, emoji). */
const plain = fc.oneof(
  fc.constantFrom(..."abcXYZ019 .,;:!?@£$¥èéùìòÇØøÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ§¿¡ÄÖÑÜäöñüà{}[]~^|€\\\n"),
  fc.constantFrom(..."áíóúâêôçЖжДд你好世界", "😀", "👍🏽", "🇦🇺"),
  fc.string({ unit: "grapheme" }),
);
const noLookAlike = fc.array(plain, { maxLength: 40 }).map((parts) => [...parts.join("")].filter((c) => !LOOK_ALIKES.has(c)).join(""));

describe("smart encoding (issue 45)", () => {
  it("the table: Twilio's look-alikes, each replaced by GSM-7 text", () => {
    expect(LOOK_ALIKES.size).toBeGreaterThan(250);
    for (const [from, to] of LOOK_ALIKES) {
      expect(textEncodingSlow(from).encoding, from).toBe("UCS2");
      expect([...from]).toHaveLength(1);
      if (to !== "") expect(textEncodingSlow(to).encoding, `${from} -> ${to}`).toBe("GSM7");
    }
    expect(LOOK_ALIKES.get("\u2019")).toBe("'");
    expect(LOOK_ALIKES.get("\u201C")).toBe('"');
    expect(LOOK_ALIKES.get("\u2013")).toBe("-");
    expect(LOOK_ALIKES.get("\u2014")).toBe("-");
    expect(LOOK_ALIKES.get("\u2026")).toBe("...");
    expect(LOOK_ALIKES.get("\u00A0")).toBe(" ");
  });

  it("any GSM-7 text with look-alikes mixed in becomes GSM-7, each look-alike replaced and nothing else changed", () => {
    const gsm = fc.constantFrom(..."abc XYZ 019.,!?@£$èé{}[]€\n");
    fc.assert(
      fc.property(fc.array(fc.oneof(gsm, fc.constantFrom(...lookAlikes)), { minLength: 1, maxLength: 200 }), (chars) => {
        const text = chars.join("");
        const out = smartEncode(text);
        const expected = chars.map((c) => LOOK_ALIKES.get(c) ?? c).join("");
        const hasLookAlike = chars.some((c) => LOOK_ALIKES.has(c));
        expect(out).toEqual({ text: hasLookAlike ? expected : text, replaced: hasLookAlike && expected !== text });
        expect(textEncoding(out.text).encoding).toBe("GSM7");
      }),
      { numRuns: 3000 },
    );
  });

  it("a text without look-alikes never changes, GSM-7 or not", () => {
    fc.assert(
      fc.property(noLookAlike, (text) => {
        expect(smartEncode(text)).toEqual({ text, replaced: false });
      }),
      { numRuns: 3000 },
    );
  });

  it("a text that keeps a character without a look-alike (emoji, CJK) is left whole, look-alikes included", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...lookAlikes), { minLength: 1, maxLength: 20 }), fc.constantFrom("😀", "你", "Ж", "á"), (alikes, other) => {
        const text = `${alikes.join("")}${other}`;
        expect(smartEncode(text)).toEqual({ text, replaced: false });
      }),
      { numRuns: 1000 },
    );
  });

  it("160 characters with curly quotes and an en dash: 1 GSM-7 segment replaced, 3 UCS-2 segments as written", () => {
    const head = "\u201CHello\u201D \u2013 it\u2019s ";
    const text = head + "x".repeat(160 - head.length);
    expect([...text]).toHaveLength(160);
    expect(textEncoding(text)).toEqual({ encoding: "UCS2", numSegments: 3 });
    const out = smartEncode(text);
    expect(out.replaced).toBe(true);
    expect(out.text).toBe(`"Hello" - it's ${"x".repeat(145)}`);
    expect(textEncoding(out.text)).toEqual({ encoding: "GSM7", numSegments: 1 });
  });
});
