/**
 * The keywords as pure rules: which kind an inbound text is, and the SMS that
 * answers it (docs/api.md#opt-out-stop-start-help).
 */

/** What an inbound keyword does; also the Response webhook's OptOutType. */
export type KeywordKind = "Stop" | "Start" | "Help";

/** Opt-out, opt-in and help keywords (Twilio's and the CTIA's lists). */
export const KEYWORDS: Readonly<Record<KeywordKind, readonly string[]>> = {
  Stop: ["STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT", "REVOKE"],
  Start: ["START", "UNSTOP", "YES"],
  Help: ["HELP", "INFO"],
};

const byWord = new Map<string, KeywordKind>(
  (Object.entries(KEYWORDS) as [KeywordKind, readonly string[]][]).flatMap(([kind, words]) => words.map((w) => [w, kind] as const)),
);

/** The kind of keyword a text is: its whole text, trimmed, one of the words in any case; undefined otherwise (`STOP please` is not). */
export function keywordOf(text: string): KeywordKind | undefined {
  const word = text.trim();
  // The longest keyword has 11 letters: anything longer is not one, whatever its case folding does.
  if (word.length === 0 || word.length > 16) return undefined;
  return byWord.get(word.toUpperCase());
}

/** The account's answer texts ("" = the default) and its name, which the defaults give. */
export interface AnswerTexts {
  name: string;
  optOutText: string;
  optInText: string;
  helpText: string;
}

/** The default answers; each names the account and says how to opt back in or out. */
export function defaultAnswer(kind: KeywordKind, name: string): string {
  switch (kind) {
    case "Stop":
      return `You have been unsubscribed from ${name} and will get no more messages from it. Reply START to subscribe again.`;
    case "Start":
      return `You have been subscribed to ${name} again. Reply STOP to unsubscribe, HELP for help.`;
    case "Help":
      return `${name}: reply STOP to unsubscribe from these messages, START to subscribe again.`;
  }
}

/** The SMS that answers a keyword: the account's text for it, or the default. */
export function answerText(kind: KeywordKind, account: AnswerTexts): string {
  const own = kind === "Stop" ? account.optOutText : kind === "Start" ? account.optInText : account.helpText;
  return own !== "" ? own : defaultAnswer(kind, account.name);
}
