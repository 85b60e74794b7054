import { describe, expect, it } from "vitest";
import { answerText, keywordOf } from "../../src/optouts/keywords.js";

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
    for (const text of ["", "   ", "STOP please", "stop.", "S TOP", "STOPP", "please stop", "HELP ME", "ＳＴＯＰ", "stop stop"]) {
      expect(keywordOf(text), JSON.stringify(text)).toBeUndefined();
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
