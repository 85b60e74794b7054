/**
 * Smart encoding (docs/api.md#smart-encoding): characters with a GSM-7 look-alike (curly quotes,
 * dashes, special spaces, the ellipsis, fullwidth forms, …) replaced before a text is segmented,
 * so one pasted curly quote does not turn a 160-character GSM-7 message into three UCS-2 segments.
 *
 * The table is Twilio's, "List of characters replaced by Smart Encoding"
 * (https://www.twilio.com/docs/messaging/services/smart-encoding-char-list), as Twilio's own
 * segment calculator ships it (sms-segments-calculator, already our segment counter: its
 * SmartEncodingMap). One correction: the calculator maps the special spaces (U+00A0, U+2000–U+200A,
 * U+202F, U+205F, U+3000) and a few C1 controls to two spaces and the tab to seven; each becomes
 * one space, which reads the same and does not lengthen the text.
 */
import SmartEncodingModule from "sms-segments-calculator/dist/libs/SmartEncodingMap.js";
import { textEncoding } from "./sms-text.js";

/** Each look-alike character (one code point) and what replaces it (GSM-7 text, possibly empty). */
export const LOOK_ALIKES: ReadonlyMap<string, string> = (() => {
  // A CommonJS module with __esModule: imported from ESM, its exports object is the default.
  const mod = SmartEncodingModule as unknown as { default?: Record<string, string> } & Record<string, string>;
  const table: Record<string, string> = mod.default ?? mod;
  return new Map(Object.entries(table).map(([from, to]) => [from, /^ +$/.test(to) ? " " : to]));
})();

/**
 * The text with its look-alikes replaced, when that makes the whole text GSM-7, and whether
 * anything was replaced. A text that is GSM-7 already, or that keeps a character without a
 * look-alike (an emoji, CJK, Cyrillic), comes back as it is: it goes out UCS-2 either way, and
 * replacing part of it would change what the recipient reads for no saving.
 */
export function smartEncode(text: string): { text: string; replaced: boolean } {
  if (textEncoding(text).encoding === "GSM7") return { text, replaced: false };
  let out = "";
  let replaced = false;
  for (const ch of text) {
    const to = LOOK_ALIKES.get(ch);
    if (to === undefined) out += ch;
    else {
      out += to;
      replaced = true;
    }
  }
  if (!replaced || textEncoding(out).encoding !== "GSM7") return { text, replaced: false };
  return { text: out, replaced: true };
}
