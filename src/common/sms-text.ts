import { SegmentedMessage } from "sms-segments-calculator";
import UnicodeToGsmModule from "sms-segments-calculator/dist/libs/UnicodeToGSM.js";

/**
 * Code units of the GSM-7 basic character set (one septet each), from the calculator's own table;
 * CR is left out because the calculator counts CR LF as one two-unit grapheme and so as UCS-2.
 */
const GSM7_BASIC = (() => {
  // A CommonJS module with __esModule: imported from ESM, its exports object is the default.
  const mod = UnicodeToGsmModule as unknown as { default?: Record<string, number[]> } & Record<string, number[]>;
  const table: Record<string, number[]> = mod.default ?? mod;
  const basic = new Uint8Array(0x10000);
  for (const [code, septets] of Object.entries(table)) {
    if (septets.length === 1 && Number(code) !== 0x0d) basic[Number(code)] = 1;
  }
  return basic;
})();

/** GSM-7 user data: 160 septets in a lone SMS, 153 per part of a long one (a 6-octet header). */
const GSM7_SINGLE = 160;
const GSM7_PART = 153;

/** Text encoding and segment count, as the carrier will bill it. */
export function textEncoding(text: string): { encoding: "GSM7" | "UCS2"; numSegments: number } {
  // Fast path for the usual text, only basic GSM-7 characters: the calculator's answer is then
  // one septet per character (test/common/sms-text.test.ts checks they agree).
  let basic = true;
  for (let i = 0; i < text.length; i++) {
    if (GSM7_BASIC[text.charCodeAt(i)] !== 1) {
      basic = false;
      break;
    }
  }
  if (basic) {
    const n = text.length;
    return { encoding: "GSM7", numSegments: n <= GSM7_SINGLE ? 1 : Math.ceil(n / GSM7_PART) };
  }
  return textEncodingSlow(text);
}

/** The calculator itself (graphemes, extension characters, UCS-2). */
export function textEncodingSlow(text: string): { encoding: "GSM7" | "UCS2"; numSegments: number } {
  const m = new SegmentedMessage(text);
  return { encoding: m.encodingName === "GSM-7" ? "GSM7" : "UCS2", numSegments: m.segmentsCount };
}

/** Code points in a string (a surrogate pair is one character; an unpaired surrogate counts as one). */
export function codePoints(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}
