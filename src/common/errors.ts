import { Code, ConnectError } from "@connectrpc/connect";
import { create, toJson } from "@bufbuild/protobuf";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import {
  BadRequestSchema,
  BadRequest_FieldViolationSchema,
  ErrorInfoSchema,
} from "../../gen/google/rpc/error_details_pb.js";
import { type ResponseStatus, ResponseStatusSchema } from "../../gen/switchboard/v2/common_pb.js";
import { type ConstraintViolation, constraintViolation, isDatabaseUnavailable } from "../db/orm.js";

/** The error domain carried in every google.rpc.ErrorInfo detail. */
export const ERROR_DOMAIN = "switchboard";

/** Stable PascalCase error codes of the API (docs/errors.md lists them). */
export type ErrorCode =
  | "Unauthorized"
  | "NotFound"
  | "MalformedRequest"
  | "MissingParameter"
  | "InvalidParameter"
  | "InvalidSenderId"
  | "SenderNotOwned"
  | "InvalidRecipient"
  | "InvalidSchedule"
  | "ScheduleInPast"
  | "TextTooLong"
  | "SmsNotEnabled"
  | "LeaseLimitReached"
  | "NoLeasedNumberAvailable"
  | "InvalidWebhookUri"
  | "InvalidWebhookMethod"
  | "InvalidEmail"
  | "InvalidCountryCode"
  | "AddressInUse"
  | "AddressNotActive"
  | "MessageNotCancelable"
  | "NumberExists"
  | "AddressNotPending"
  | "IdempotencyKeyReused"
  | "MethodNotAllowed"
  | "UnsupportedMediaType"
  | "PayloadTooLarge"
  | "RequestTimeout"
  | "HeadersTooLarge"
  | "RateLimited"
  | "ServiceUnavailable"
  | "InternalError";

/** One field problem: the request field (as the client spelled it), its code and a fix-it message. */
export interface FieldProblem {
  field: string;
  code: ErrorCode;
  message: string;
}

/** Builds a ConnectError that carries the Switchboard ErrorCode and field problems as standard details. */
export function apiError(
  code: Code,
  errorCode: ErrorCode,
  message: string,
  fields: FieldProblem[] = [],
  metadata?: Record<string, string>,
): ConnectError {
  const details: ConstructorParameters<typeof ConnectError>[3] = [
    { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason: errorCode, domain: ERROR_DOMAIN }) },
  ];
  if (fields.length > 0) {
    details.push({
      desc: BadRequestSchema,
      value: create(BadRequestSchema, {
        fieldViolations: fields.map((f) =>
          create(BadRequest_FieldViolationSchema, { field: f.field, reason: f.code, description: f.message }),
        ),
      }),
    });
  }
  return new ConnectError(message, code, metadata, details);
}

/** A client's value quoted for an error message, cut short so a huge input is not echoed back whole. */
export function quoted(value: string, max = 40): string {
  return JSON.stringify(value.length > max ? `${value.slice(0, max)}…` : value);
}

/** A 400 for one bad field: the common case of request validation. */
export function fieldError(field: string, errorCode: ErrorCode, message: string): ConnectError {
  return apiError(Code.InvalidArgument, errorCode, message, [{ field, code: errorCode, message }]);
}

/** A 400 for several field problems at once; the first one names the top-level code. */
export function fieldErrors(problems: FieldProblem[]): ConnectError {
  const first = problems[0];
  const message = problems.length === 1 ? first.message : problems.map((p) => p.message).join(" ");
  return apiError(Code.InvalidArgument, first.code, message, problems);
}

/** A 400 for a refused business rule that concerns no single field. */
export function ruleError(errorCode: ErrorCode, message: string): ConnectError {
  return apiError(Code.FailedPrecondition, errorCode, message);
}

/** The 404 every unknown, malformed or foreign Sid gets, so other tenants' resources stay invisible. */
export function notFound(what: string, sid: string): ConnectError {
  return apiError(Code.NotFound, "NotFound", `${what} ${sid.length > 40 ? quoted(sid) : sid} was not found.`);
}

/** 400 InvalidParameter on AddressSid: not one of the account's addresses (unknown, another account's, or deleted). */
export function addressNotOfAccount(sid: string): ConnectError {
  return fieldError("AddressSid", "InvalidParameter", `AddressSid ${sid} is not an address of this account; add it first (POST /v2/Accounts/{AccountSid}/Addresses).`);
}

/** 400 AddressInUse: a number is registered against the address being deleted. */
export function addressInUse(sid: string): ConnectError {
  return ruleError("AddressInUse", `Address ${sid} is used to register numbers; assign those numbers another address first (Configure Numbers).`);
}

/** 409 NumberExists: the operator adds a number that is already there. */
export function numberExists(number: string): ConnectError {
  return apiError(Code.AlreadyExists, "NumberExists", `Number ${number} already exists.`);
}

/** 409 AddressNotPending: a review of an address another review (or this one earlier) already decided otherwise. */
export function addressNotPending(sid: string, status: string): ConnectError {
  return apiError(
    Code.Aborted,
    "AddressNotPending",
    `Address ${sid} is ${status}; only a Pending address can be reviewed (a Rejected address stays rejected: the customer submits a new one).`,
  );
}

/**
 * 422 IdempotencyKeyReused: the key already answered a different request (another body, method or
 * property) within its 24 hours. Compared on the decoded request, so REST and RPC agree.
 */
export function idempotencyKeyReused(key: string): ConnectError {
  const message = `Idempotency-Key ${quoted(key)} was already used for a different request in the last 24 hours; send a new key with a new request.`;
  return apiError(Code.InvalidArgument, "IdempotencyKeyReused", message, [{ field: "Idempotency-Key", code: "IdempotencyKeyReused", message }]);
}

/**
 * HTTP statuses that differ from the Connect code's own mapping: 422 has no Connect code, and
 * the errors only HTTP has (the connection, or the request before a method is chosen) have none
 * in Connect's code-to-status table.
 */
const HTTP_STATUS: Partial<Record<ErrorCode, number>> = {
  IdempotencyKeyReused: 422,
  MethodNotAllowed: 405,
  RequestTimeout: 408,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415,
  HeadersTooLarge: 431,
};

/**
 * The answer to each constraint a request can break, whichever statement or COMMIT raised it
 * (foreign keys are deferred: a reference to a row deleted meanwhile fails at commit). Each is what
 * the same request gets from the service's own check when it arrives just after the other one.
 */
const CONSTRAINT_ERRORS: Record<string, (v: ConstraintViolation) => ConnectError | undefined> = {
  numbers_address_sid_fkey: (v) => (v.side === "referencing" ? addressNotOfAccount(v.key ?? "") : addressInUse(v.key ?? "")),
  numbers_number_key: (v) => numberExists(v.key ?? ""),
};

/** The documented 4xx for a database constraint violation, or undefined when none is mapped (a bug). */
export function constraintError(reason: unknown): ConnectError | undefined {
  const v = constraintViolation(reason);
  return v ? CONSTRAINT_ERRORS[v.constraint]?.(v) : undefined;
}

/** The ErrorCode a ConnectError carries, or one derived from its Connect code. */
export function errorCodeOf(err: ConnectError): ErrorCode {
  const info = err.findDetails(ErrorInfoSchema).find((d) => d.domain === ERROR_DOMAIN);
  if (info) return info.reason as ErrorCode;
  switch (err.code) {
    case Code.InvalidArgument:
    case Code.FailedPrecondition:
    case Code.OutOfRange:
      return "InvalidParameter";
    case Code.Unauthenticated:
      return "Unauthorized";
    case Code.NotFound:
      return "NotFound";
    case Code.ResourceExhausted:
      return "RateLimited";
    case Code.Unavailable:
    case Code.DeadlineExceeded:
      return "ServiceUnavailable";
    case Code.Unimplemented:
      return "NotFound";
    default:
      return "InternalError";
  }
}

/** The one answer to a request while the database cannot be reached: 503 / Unavailable, ServiceUnavailable. */
export function serviceUnavailable(): ConnectError {
  return apiError(Code.Unavailable, "ServiceUnavailable", "The service is temporarily unavailable: its database cannot be reached. Try again shortly.", [], {
    "retry-after": "2",
  });
}

/**
 * Any thrown value as the ConnectError a client is answered with, for every transport: a lost
 * database (refused, dropped or timed-out connections) is ServiceUnavailable; a constraint
 * violation is its documented 4xx (CONSTRAINT_ERRORS); anything else that is not already a
 * ConnectError stays an internal error.
 */
export function toConnectError(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) return reason;
  if (isDatabaseUnavailable(reason)) return serviceUnavailable();
  return constraintError(reason) ?? ConnectError.from(reason);
}

/** Converts any thrown value into the documented ResponseStatus and its HTTP status. */
export function toResponseStatus(reason: unknown): { httpStatus: number; status: ResponseStatus } {
  const err = toConnectError(reason);
  const errorCode = errorCodeOf(err);
  const violations = err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations);
  const internal = errorCode === "InternalError";
  const status = create(ResponseStatusSchema, {
    errorCode,
    // Internal errors never leak their detail to the client; the log has it.
    message: internal ? "An internal error occurred." : err.rawMessage,
    errors: violations.map((v) => ({
      fieldName: v.field,
      errorCode: v.reason || errorCode,
      message: v.description,
    })),
  });
  return { httpStatus: HTTP_STATUS[errorCode] ?? codeToHttpStatus(err.code), status };
}

/**
 * The documented error body (`{"ResponseStatus": {...}}`) of any thrown value and its HTTP
 * status: what every HTTP answer of an error sends, whoever writes it (the REST routes, the
 * pipelining refusal, the parse errors answered on the raw socket).
 */
export function errorBody(reason: unknown): { httpStatus: number; errorCode: ErrorCode; body: string } {
  const { httpStatus, status } = toResponseStatus(reason);
  const body = JSON.stringify({ ResponseStatus: toJson(ResponseStatusSchema, status, { alwaysEmitImplicit: true }) });
  return { httpStatus, errorCode: status.errorCode as ErrorCode, body };
}

/** True when the value is a ConnectError that a client caused (not a bug). */
export function isClientError(reason: unknown): boolean {
  return reason instanceof ConnectError && reason.code !== Code.Internal && reason.code !== Code.Unknown;
}
