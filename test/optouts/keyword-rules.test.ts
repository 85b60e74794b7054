import { describe, expect, it } from "vitest";
import { answerText, KEYWORDS, keywordOf } from "../../src/optouts/keywords.js";

describe("keywordOf", () => {
  it("reads the whole trimmed text, any case, as one keyword", () => {
    expect(keywordOf("STOP")).toBe("Stop");
    expect(keywordOf("  unsubscribe\r\n")).toBe("Stop");
    expect(keywordOf("\tStopAll ")).toBe("Stop");
    expect(keywordOf("Unstop")).toBe("Start");
    expect(keywordOf("yes")).toBe("Start");
    expect(keywordOf("Info")).toBe("Help");
  });

  it("is undefined for anything else", () => {
    // "ＳＴＯＰ" (full-width) was here until issue 41: it is STOP after NFKC, as below.
    for (const text of [
      "",
      "   ",
      "\u200B",
      "STOP please",
      "stop.",
      "S TOP",
      "STOPP",
      "please stop",
      "HELP ME",
      "stop stop",
      "ＳＴＯＰ ＳＴＯＰ",
      "СТОП",
      "ST0P",
    ]) {
      expect(keywordOf(text), JSON.stringify(text)).toBeUndefined();
    }
  });
});

describe("keywordOf: one normalisation (issue 41)", () => {
  it("matches after NFKC, the removal of format characters and case folding, whatever look-alike carries the word", () => {
    const cases: [string, string][] = [
      ["ＳＴＯＰ", "Stop"], // full-width (NFKC)
      ["ｓｔｏｐ", "Stop"],
      ["\u200BSTOP", "Stop"], // zero-width space (Cf)
      ["STOP\u200B", "Stop"],
      ["S\u200BT\u200CO\u200DP", "Stop"], // zero-width space, non-joiner, joiner inside
      ["S\u00ADTOP", "Stop"], // soft hyphen
      ["\uFEFFstop", "Stop"], // byte order mark
      ["\u2060stop\u200E", "Stop"], // word joiner, left-to-right mark
      ["ſtop", "Stop"], // long s (NFKC)
      ["quıt", "Stop"], // dotless i (case folding)
      ["STOP\u00A0", "Stop"], // no-break space (NFKC, then trimmed)
      ["\u3000stop\u3000", "Stop"], // ideographic space
      ["ＵＮＳＴＯＰ", "Start"],
      ["ｉｎｆｏ", "Help"],
      ["ınfo", "Help"],
    ];
    for (const [text, kind] of cases) expect(keywordOf(text), JSON.stringify(text)).toBe(kind);
  });

  it("is the same normalisation for every keyword: each word in full-width, after a zero-width space, upper and lower case", () => {
    const fullWidth = (w: string) => [...w].map((c) => String.fromCodePoint(c.codePointAt(0)! + 0xfee0)).join("");
    for (const [kind, words] of Object.entries(KEYWORDS)) {
      for (const word of words) {
        for (const text of [word, word.toLowerCase(), fullWidth(word), fullWidth(word.toLowerCase()), `\u200B${word}`, `${word}\u00A0`]) {
          expect(keywordOf(text), JSON.stringify(text)).toBe(kind);
        }
      }
    }
  });
});

describe("answerText", () => {
  const account = { name: "Acme", optOutText: "", optInText: "Welcome back to Acme.", helpText: "" };
  it("is the account's text, or the default naming the account", () => {
    expect(answerText("Stop", account)).toBe("You have been unsubscribed from Acme and will get no more messages from it. Reply START to subscribe again.");
    expect(answerText("Start", account)).toBe("Welcome back to Acme.");
    expect(answerText("Help", account)).toBe("Acme: reply STOP to unsubscribe from these messages, START to subscribe again.");
  });
});
