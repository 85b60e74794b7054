/**
 * SMPP 3.4's message_state values (5.2.28) and the receipt text's `stat:` word for each, which the
 * carrier side reads from an SMSC's receipts and the SMPP server writes into its own.
 */
export const SMPP_STATE_WORDS: Readonly<Record<number, string>> = {
  1: "ENROUTE",
  2: "DELIVRD",
  3: "EXPIRED",
  4: "DELETED",
  5: "UNDELIV",
  6: "ACCEPTD",
  7: "UNKNOWN",
  8: "REJECTD",
};
