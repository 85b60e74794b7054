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

const byWord: readonly (readonly [string, KeywordKind])[] = (Object.entries(KEYWORDS) as [KeywordKind, readonly string[]][]).flatMap(([kind, words]) =>
  words.map((w) => [w, kind] as const),
);

/**
 * A text as keywords are matched (docs/api.md#opt-out-stop-start-help): NFKC (full-width letters,
 * the long s, ligatures and non-breaking or ideographic spaces become their plain forms), without
 * format characters (Unicode Cf: zero-width spaces and joiners, the BOM, soft hyphens,
 * direction marks), case-folded (upper then lower case, so that `ß`, `ſ` and the dotless `ı` fold
 * like their ASCII look-alikes), trimmed. One normalisation, for every keyword and every text.
 */
export function keywordForm(text: string): string {
  return text.normalize("NFKC").replace(FORMAT_CHARACTERS, "").toUpperCase().toLowerCase().trim();
}

const FORMAT_CHARACTERS = /\p{Cf}/gu;

/** The keywords by their normalised form. */
const byForm = new Map<string, KeywordKind>(byWord.map(([word, kind]) => [keywordForm(word), kind] as const));

/** The kind of keyword a text is: its whole text, normalised (keywordForm), one of the words; undefined otherwise (`STOP please` is not). */
export function keywordOf(text: string): KeywordKind | undefined {
  const word = keywordForm(text);
  // The longest keyword has 11 letters.
  if (word.length === 0 || word.length > 16) return undefined;
  return byForm.get(word);
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
