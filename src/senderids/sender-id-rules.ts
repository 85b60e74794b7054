import type { CreateSenderIdRequest } from "../../gen/switchboard/v2/sender_ids_pb.js";
import { type FieldProblem, quoted } from "../common/errors.js";
import { codePoints } from "../common/sms-text.js";
import { isAlphanumericSender } from "../common/phone.js";
import { isKnownCountry } from "../config.js";
import { alphanumericSenderProblem } from "../messaging/send-rules.js";

/** Longest UseCase, in characters (docs/api.md#sender-ids). */
export const MAX_USE_CASE_CHARS = 500;

/** A checked application: the name as given (trimmed), the country upper-cased, the use case trimmed. */
export interface ValidSenderId {
  senderId: string;
  country: string;
  useCase: string;
}

/** Checks an application for a sender ID, reporting every field problem at once. */
export function validateSenderId(req: CreateSenderIdRequest): { problems: FieldProblem[] } | { senderId: ValidSenderId } {
  const problems: FieldProblem[] = [];
  const senderId = req.senderId.trim();
  if (senderId === "")
    problems.push({ field: "SenderId", code: "MissingParameter", message: "SenderId is required: the alphanumeric sender ID, e.g. ACMEBANK." });
  else if (!isAlphanumericSender(senderId))
    problems.push({ field: "SenderId", code: "InvalidSenderId", message: alphanumericSenderProblem("SenderId", req.senderId) });
  const country = req.country.trim().toUpperCase();
  if (country === "") problems.push({ field: "Country", code: "MissingParameter", message: "Country is required: an ISO 3166-1 alpha-2 code such as AU." });
  else if (!isKnownCountry(country))
    problems.push({
      field: "Country",
      code: "InvalidCountryCode",
      message: `Country ${quoted(req.country)} is not an ISO 3166-1 alpha-2 country code (e.g. GB, AU, US).`,
    });
  const useCase = req.useCase.trim();
  if (useCase === "")
    problems.push({ field: "UseCase", code: "MissingParameter", message: "UseCase is required: what the account sends from this sender ID." });
  else if (codePoints(useCase) > MAX_USE_CASE_CHARS)
    problems.push({
      field: "UseCase",
      code: "InvalidParameter",
      message: `UseCase is ${codePoints(useCase)} characters long; the limit is ${MAX_USE_CASE_CHARS}.`,
    });
  else if (/[\p{Cc}\u2028\u2029]/u.test(useCase))
    problems.push({ field: "UseCase", code: "InvalidParameter", message: "UseCase must not contain control characters." });
  return problems.length > 0 ? { problems } : { senderId: { senderId, country, useCase } };
}
