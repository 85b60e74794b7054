import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { codeToHttpStatus } from "./internals.js";
import { BadRequestSchema, BadRequest_FieldViolationSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { type ResponseStatus, ResponseStatusSchema } from "../../gen/switchboard/v2/common_pb.js";
import { type ConstraintViolation, constraintViolation } from "./pg-errors.js";
import { type Unreachable, unreachableOf } from "./unreachable.js";

/** The error domain carried in every google.rpc.ErrorInfo detail. */
export const ERROR_DOMAIN = "switchboard";

/** What the error table says about one ErrorCode. */
export interface ErrorSpec {
  /** The HTTP status of the REST answer. */
  http: number;
  /** The Connect/gRPC code of the answer on every wire; REST answers it only through `http`. */
  grpc: Code;
  /** Raised only by the HTTP layer or the REST transcoder: never an RPC's answer. */
  restOnly?: true;
  /** When it happens (the documented table's words, Markdown). */
  when: string;
  /** A realistic message, for the OpenAPI example of its status. */
  example?: string;
  /**
   * The SMPP command_status the SMPP server answers it with (docs/smpp-server.md#error-mapping);
   * absent: SMPP_DEFAULT_STATUS (or ESME_RSYSERR for a 5xx).
   */
  smpp?: SmppStatus;
}

/** The SMPP 3.4 command_status names the error table uses (their numbers are the `smpp` package's). */
export type SmppStatus =
  | "ESME_RINVMSGLEN"
  | "ESME_RINVCMDLEN"
  | "ESME_RSYSERR"
  | "ESME_RINVSRCADR"
  | "ESME_RINVDSTADR"
  | "ESME_RINVMSGID"
  | "ESME_RINVPASWD"
  | "ESME_RCANCELFAIL"
  | "ESME_RSUBMITFAIL"
  | "ESME_RTHROTTLED"
  | "ESME_RINVSCHED"
  | "ESME_RINVEXPIRY"
  | "ESME_RX_T_APPN"
  | "ESME_RX_P_APPN";

/** What a refusal without its own SMPP status is answered with: the generic submit failure. */
export const SMPP_DEFAULT_STATUS: SmppStatus = "ESME_RSUBMITFAIL";

/**
 * The one error table: every stable PascalCase ErrorCode of the API, its HTTP status, its
 * Connect/gRPC code and when it happens. apiError takes the gRPC code from here, REST the status,
 * the OpenAPI document its error responses, and the documented table is generated from it
 * (scripts/errors-doc.ts). Order is the documented order.
 */
export const ERRORS = {
  Unauthorized: {
    http: 401,
    grpc: Code.Unauthenticated,
    when: "missing or wrong credentials",
    example: "The AccountSid or token is wrong.",
    smpp: "ESME_RINVPASWD",
  },
  NotFound: {
    http: 404,
    grpc: Code.NotFound,
    when: "unknown path (the message quotes at most its first 200 characters), or a Sid that is malformed, unknown or another account's",
    example: "Message MG0123456789ABCDEFGHIJKLMNOPQRST was not found.",
    smpp: "ESME_RINVMSGID",
  },
  MethodNotAllowed: {
    http: 405,
    grpc: Code.Unimplemented,
    restOnly: true,
    when: "known path, unsupported HTTP method (`Allow` header lists the right ones), e.g. `GET` on an RPC path; or `CONNECT` (the service is not a proxy)",
  },
  MalformedRequest: {
    http: 400,
    grpc: Code.InvalidArgument,
    when: "body is not JSON, not a JSON object or not valid UTF-8 (the message names the byte offset); or the request is not valid HTTP/1.1 (an unknown method token, a header line without a colon, no `Host`, …); or a bidirectional stream (server reflection) called over HTTP/1.1, which needs HTTP/2",
  },
  UnsupportedMediaType: {
    http: 415,
    grpc: Code.InvalidArgument,
    restOnly: true,
    when: "a body that is not `application/json`, or a `Content-Type` charset other than UTF-8 or (REST only) ISO-8859-1 (over Connect: HTTP 415, code invalid_argument)",
    example: "The request body must be JSON, sent with Content-Type: application/json.",
  },
  PayloadTooLarge: {
    http: 413,
    grpc: Code.ResourceExhausted,
    when: "body over `BODY_LIMIT_BYTES` (1 MiB); see [Request size](api.md#request-size)",
    example: "The request body is larger than the limit of 1048576 bytes.",
    smpp: "ESME_RINVMSGLEN",
  },
  RequestTimeout: {
    http: 408,
    grpc: Code.DeadlineExceeded,
    restOnly: true,
    when: "HTTP/1.1 headers not received within `HEADERS_TIMEOUT_MS`, or the whole request within `REQUEST_TIMEOUT_MS`; see [Connections](api.md#connections)",
  },
  HeadersTooLarge: {
    http: 431,
    grpc: Code.ResourceExhausted,
    restOnly: true,
    when: "HTTP/1.1 header block over `MAX_HEADER_BYTES`; see [Request size](api.md#request-size)",
  },
  MissingParameter: { http: 400, grpc: Code.InvalidArgument, when: "a required field is missing or blank" },
  InvalidParameter: { http: 400, grpc: Code.InvalidArgument, when: "a field of the wrong JSON type, out of range, or not allowed" },
  InvalidSenderId: { http: 400, grpc: Code.InvalidArgument, when: "`From`/`ForwardFromSms` breaks the sender ID rules", smpp: "ESME_RINVSRCADR" },
  SenderNotOwned: {
    http: 400,
    grpc: Code.InvalidArgument,
    when: "E164 `From` or `ForwardFromSms` that is not one of the account's numbers",
    smpp: "ESME_RINVSRCADR",
  },
  SenderIdNotRegistered: {
    http: 400,
    grpc: Code.FailedPrecondition,
    when: "alphanumeric `From` (or, for a forwarded reply, `ForwardFromSms`) to a country where `SENDER_ID_REGISTRATION` is `require` (AU by default) that is not a sender ID Registered to the account for that country (letter case aside); a reply forwarded from one is kept `Failed` with this ErrorCode; see [Sender IDs](api.md#sender-ids)",
    example:
      'From "ACMEBANK" is not a sender ID registered to this account for AU, where registration is required; apply for it (POST /v2/Accounts/{AccountSid}/SenderIds) and send once the operator has registered it, or use one of your numbers.',
    smpp: "ESME_RINVSRCADR",
  },
  InvalidRecipient: {
    http: 400,
    grpc: Code.InvalidArgument,
    when: "`To`/`ForwardToSms` is not a valid E164 number in its one spelling (no trunk prefix after the country code, no spaces)",
    smpp: "ESME_RINVDSTADR",
  },
  DestinationNotAllowed: {
    http: 400,
    grpc: Code.InvalidArgument,
    when: "`To` (or `ForwardToSms`) is a destination the account may not send to: a country outside its `AllowedCountries` (or `DEFAULT_ALLOWED_COUNTRIES`), a prefix in `BLOCKED_PREFIXES`, a premium-rate, shared-cost or other special-service number (unless `ALLOW_PREMIUM_DESTINATIONS`), or one of this deployment's own numbers (a pool number or any account's number: a reply forwarded there would come back and be forwarded again without end); see [Destination permissions](api.md#destination-permissions)",
    smpp: "ESME_RINVDSTADR",
  },
  RecipientOptedOut: {
    http: 400,
    grpc: Code.FailedPrecondition,
    when: "`To` has opted out of the account's messages (texted STOP, or added through `/OptOuts`); a queued message to it when the STOP came ends `Failed` with this ErrorCode; see [Opt-out](api.md#opt-out-stop-start-help)",
    example:
      "To +61412345678 has opted out of this account's messages (it texted STOP); it must text START, or be removed from the account's OptOuts, before it can be sent to.",
    smpp: "ESME_RX_P_APPN",
  },
  InvalidSchedule: {
    http: 400,
    grpc: Code.InvalidArgument,
    when: "`Schedule` more than 14 days ahead",
    example: "Schedule is more than 14 days in the future.",
    smpp: "ESME_RINVSCHED",
  },
  ScheduleInPast: { http: 400, grpc: Code.InvalidArgument, when: "`Schedule` 1 hour or more in the past", smpp: "ESME_RINVSCHED" },
  TextTooLong: { http: 400, grpc: Code.InvalidArgument, when: "`Text` over 1600 characters", smpp: "ESME_RINVMSGLEN" },
  SmsNotEnabled: { http: 400, grpc: Code.FailedPrecondition, when: "account or property not enabled for SMS", smpp: "ESME_RX_P_APPN" },
  LeaseLimitReached: {
    http: 400,
    grpc: Code.FailedPrecondition,
    when: "the account already holds 5 live leases to the recipient (other accounts' leases do not count)",
    smpp: "ESME_RX_T_APPN",
  },
  NoLeasedNumberAvailable: {
    http: 400,
    grpc: Code.FailedPrecondition,
    when: "no pool number is free for the recipient (each is leased to it already, by any account)",
    smpp: "ESME_RX_T_APPN",
  },
  InvalidWebhookUri: { http: 400, grpc: Code.InvalidArgument, when: "not absolute http(s), or a private target" },
  InvalidWebhookMethod: { http: 400, grpc: Code.InvalidArgument, when: "not POST or GET" },
  InvalidEmail: {
    http: 400,
    grpc: Code.InvalidArgument,
    when: "`ForwardToEmail`/`ForwardFromEmail` not an e-mail address, or `ForwardFromEmail` outside `MAIL_FROM_DOMAINS`",
  },
  InvalidCountryCode: { http: 400, grpc: Code.InvalidArgument, when: "not an ISO 3166-1 alpha-2 code" },
  AddressInUse: { http: 400, grpc: Code.FailedPrecondition, when: "deleting an address a number is registered against" },
  AddressNotActive: { http: 400, grpc: Code.InvalidArgument, when: "registering a number against a Pending/Rejected address" },
  AddressNotPending: {
    http: 409,
    grpc: Code.Aborted,
    when: "operator review of an address that another review already decided otherwise (the same decision again is a 200 that changes nothing)",
  },
  MessageNotCancelable: { http: 400, grpc: Code.FailedPrecondition, when: "cancel of a message that is not Scheduled", smpp: "ESME_RCANCELFAIL" },
  NumberExists: {
    http: 409,
    grpc: Code.AlreadyExists,
    when: "operator adds a number that exists (also when the same number is added several times at once: one 200, the others this)",
  },
  SenderIdTaken: {
    http: 409,
    grpc: Code.AlreadyExists,
    when: "applying for a sender ID (any letter case) in a country where another application, of this account or another, is Pending or Registered (also when two apply at once: one 200, the other this)",
  },
  SenderIdNotPending: {
    http: 409,
    grpc: Code.Aborted,
    when: "operator review of a sender ID that another review already decided otherwise (the same decision again is a 200 that changes nothing)",
  },
  CarrierExists: {
    http: 409,
    grpc: Code.AlreadyExists,
    when: "operator adds a carrier, or renames one, to a `Name` another carrier has",
  },
  CarrierInUse: {
    http: 409,
    grpc: Code.Aborted,
    when: "operator removes a carrier a route still names (replace the route table without it first)",
  },
  SmppSystemIdTaken: {
    http: 409,
    grpc: Code.AlreadyExists,
    when: "operator sets an account's SMPP credentials with a `SystemId` another account holds (also when two set it at once: one 200, the other this)",
  },
  WebhookNotFailed: {
    http: 409,
    grpc: Code.Aborted,
    when: "operator retries a webhook call that is not Failed (Pending, also when another retry queued it at the same moment, or Delivered)",
  },
  IdempotencyKeyReused: {
    http: 422,
    grpc: Code.InvalidArgument,
    when: "an `Idempotency-Key` the account used in the last 24 hours for a different request (another body, property or method); see [Idempotency-Key](api.md#idempotency-key)",
  },
  RateLimited: {
    http: 429,
    grpc: Code.ResourceExhausted,
    when: "an account's sends over `SEND_RATE_LIMIT` (`Retry-After` says when to retry), an account's reads over `READ_CONCURRENCY_PER_ACCOUNT` running plus `READ_QUEUE_PER_ACCOUNT` waiting, too many failed authentications from the client's address or for the account (`Retry-After`; the credentials are not checked), or too many pipelined requests on one HTTP/1.1 connection; see [Limits](api.md#limits)",
    example: "Too many messages: account AC0123456789ABCDEFGHIJKLMNOPQRST may send 50 per second, in bursts of up to 500. Retry after 1 second.",
    smpp: "ESME_RTHROTTLED",
  },
  InsufficientFunds: {
    http: 402,
    grpc: Code.FailedPrecondition,
    when: "a send whose price the account's balance, with its `CreditLimit`, cannot cover (a `Prepaid` account, or a `Postpaid` one with a `CreditLimit`); nothing is stored or charged, and in a batch only the items that do not fit are refused, in order; see [Billing](billing.md#the-charge-on-the-send)",
    example:
      "The account's balance (with its credit limit) cannot cover this message's price of 0.105: nothing was stored or charged. Top up the balance, then send again.",
    smpp: "ESME_RSUBMITFAIL",
  },
  QuotaExceeded: {
    http: 429,
    grpc: Code.ResourceExhausted,
    when: "a send that would take the account past its `DailySegmentQuota` (segments per UTC day); `Retry-After` says the seconds until the next UTC midnight; see [Limits](api.md#limits)",
    example:
      "Daily quota reached: account AC0123456789ABCDEFGHIJKLMNOPQRST may send 100 segments per UTC day; this request needs 3. Retry after 3600 seconds (the next UTC midnight).",
    smpp: "ESME_RTHROTTLED",
  },
  ServiceUnavailable: {
    http: 503,
    grpc: Code.Unavailable,
    when: "a dependency is down, and the message names which: the database, the shared limits' Redis, or the process's database connection pool (every connection busy); or a read ran past `READ_STATEMENT_TIMEOUT_MS`",
    example: "The service is temporarily unavailable: its database cannot be reached. Try again shortly.",
    smpp: "ESME_RX_T_APPN",
  },
  InternalError: {
    http: 500,
    grpc: Code.Internal,
    when: "a bug; no detail is returned, the log has it",
    example: "An internal error occurred.",
    smpp: "ESME_RSYSERR",
  },
} as const satisfies Record<string, ErrorSpec>;

/**
 * A message's own ErrorCode (the record's `ErrorCode`, not an API answer, so not in the table
 * above): the message is still Submitted, but its delivery report has not come within
 * RECEIPT_TIMEOUT_HOURS of its submission (docs/api.md#message-record).
 */
export const RECEIPT_TIMEOUT = "ReceiptTimeout";

/**
 * A message's own ErrorCode: no route of the route table matches its destination and account
 * (docs/operations.md#carriers-and-routes); the message fails at dispatch.
 */
export const NO_ROUTE = "NoRoute";

/** Stable PascalCase error codes of the API: the keys of the error table. */
export type ErrorCode = keyof typeof ERRORS;

/** The SMPP command_status the SMPP server answers an ErrorCode with: its table entry's, else the default of its kind. */
export function smppStatusOf(code: ErrorCode): SmppStatus {
  const spec: ErrorSpec = ERRORS[code];
  return spec.smpp ?? (spec.http >= 500 ? "ESME_RSYSERR" : SMPP_DEFAULT_STATUS);
}

/** One field problem: the request field (as the client spelled it), its code and a fix-it message. */
export interface FieldProblem {
  field: string;
  code: ErrorCode;
  message: string;
}

/**
 * Builds a ConnectError that carries the Switchboard ErrorCode and field problems as standard
 * details; its Connect/gRPC code is the error table's.
 */
export function apiError(errorCode: ErrorCode, message: string, fields: FieldProblem[] = [], metadata?: Record<string, string>): ConnectError {
  const details: ConstructorParameters<typeof ConnectError>[3] = [
    { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason: errorCode, domain: ERROR_DOMAIN }) },
  ];
  if (fields.length > 0) {
    details.push({
      desc: BadRequestSchema,
      value: create(BadRequestSchema, {
        fieldViolations: fields.map((f) => create(BadRequest_FieldViolationSchema, { field: f.field, reason: f.code, description: f.message })),
      }),
    });
  }
  return new ConnectError(message, ERRORS[errorCode].grpc, metadata, details);
}

/** A client's value quoted for an error message, cut short so a huge input is not echoed back whole. */
export function quoted(value: string, max = 40): string {
  return JSON.stringify(value.length > max ? `${value.slice(0, max)}…` : value);
}

/** A 400 for one bad field: the common case of request validation. */
export function fieldError(field: string, errorCode: ErrorCode, message: string): ConnectError {
  return apiError(errorCode, message, [{ field, code: errorCode, message }]);
}

/** A 400 for several field problems at once; the first one names the top-level code. */
export function fieldErrors(problems: FieldProblem[]): ConnectError {
  const first = problems[0];
  const message = problems.length === 1 ? first.message : problems.map((p) => p.message).join(" ");
  return apiError(first.code, message, problems);
}

/** The 404 every unknown, malformed or foreign Sid gets, so other tenants' resources stay invisible. */
export function notFound(what: string, sid: string): ConnectError {
  return apiError("NotFound", `${what} ${sid.length > 40 ? quoted(sid) : sid} was not found.`);
}

/** 400 InvalidParameter on AddressSid: not one of the account's addresses (unknown, another account's, or deleted). */
export function addressNotOfAccount(sid: string): ConnectError {
  return fieldError(
    "AddressSid",
    "InvalidParameter",
    `AddressSid ${sid} is not an address of this account; add it first (POST /v2/Accounts/{AccountSid}/Addresses).`,
  );
}

/** 400 AddressInUse: a number is registered against the address being deleted. */
export function addressInUse(sid: string): ConnectError {
  return apiError("AddressInUse", `Address ${sid} is used to register numbers; assign those numbers another address first (Configure Numbers).`);
}

/** 409 NumberExists: the operator adds a number that is already there. */
export function numberExists(number: string): ConnectError {
  return apiError("NumberExists", `Number ${number} already exists.`);
}

/** 409 CarrierExists: another carrier has that name. */
export function carrierExists(name: string): ConnectError {
  return apiError("CarrierExists", `A carrier named ${quoted(name)} already exists.`, [
    { field: "Name", code: "CarrierExists", message: `A carrier named ${quoted(name)} already exists.` },
  ]);
}

/** 409 SmppSystemIdTaken: another account's SMPP credentials have that SystemId. */
export function smppSystemIdTaken(systemId: string): ConnectError {
  const message = `SystemId ${quoted(systemId)} is another account's; each account's SMPP SystemId is its own.`;
  return apiError("SmppSystemIdTaken", message, [{ field: "SystemId", code: "SmppSystemIdTaken", message }]);
}

/** 409 AddressNotPending: a review of an address another review (or this one earlier) already decided otherwise. */
export function addressNotPending(sid: string, status: string): ConnectError {
  return apiError(
    "AddressNotPending",
    `Address ${sid} is ${status}; only a Pending address can be reviewed (a Rejected address stays rejected: the customer submits a new one).`,
  );
}

/** 409 SenderIdTaken: a live application (Pending or Registered) for the same name and country exists. */
export function senderIdTaken(senderId: string, country: string): ConnectError {
  const message = `Sender ID ${quoted(senderId)} is already applied for or registered in ${country} (letter case aside); a sender ID belongs to one account per country.`;
  return apiError("SenderIdTaken", message, [{ field: "SenderId", code: "SenderIdTaken", message }]);
}

/** 409 SenderIdNotPending: a review of a sender ID another review already decided otherwise. */
export function senderIdNotPending(sid: string, status: string): ConnectError {
  return apiError(
    "SenderIdNotPending",
    `Sender ID ${sid} is ${status}; only a Pending sender ID can be reviewed (a Rejected one stays rejected: the customer applies again).`,
  );
}

/**
 * 422 IdempotencyKeyReused: the key already answered a different request (another body, method or
 * property) within its 24 hours. Compared on the decoded request, so REST and RPC agree.
 */
export function idempotencyKeyReused(key: string): ConnectError {
  const message = `Idempotency-Key ${quoted(key)} was already used for a different request in the last 24 hours; send a new key with a new request.`;
  return apiError("IdempotencyKeyReused", message, [{ field: "Idempotency-Key", code: "IdempotencyKeyReused", message }]);
}

/**
 * The answer to each constraint a request can break, whichever statement or COMMIT raised it
 * (foreign keys are deferred: a reference to a row deleted meanwhile fails at commit). Each is what
 * the same request gets from the service's own check when it arrives just after the other one.
 */
const CONSTRAINT_ERRORS: Record<string, (v: ConstraintViolation) => ConnectError | undefined> = {
  numbers_address_sid_fkey: (v) => (v.side === "referencing" ? addressNotOfAccount(v.key ?? "") : addressInUse(v.key ?? "")),
  numbers_number_key: (v) => numberExists(v.key ?? ""),
  carriers_name_key: (v) => carrierExists(v.key ?? ""),
  smpp_credentials_system_id_key: (v) => smppSystemIdTaken(v.key ?? ""),
};

/** The documented 4xx for a database constraint violation, or undefined when none is mapped (a bug). */
export function constraintError(reason: unknown): ConnectError | undefined {
  const v = constraintViolation(reason);
  return v ? CONSTRAINT_ERRORS[v.constraint]?.(v) : undefined;
}

/** The ErrorCode an error of ours carries (apiError), or undefined for any other ConnectError. */
function carriedErrorCode(err: ConnectError): ErrorCode | undefined {
  const info = err.findDetails(ErrorInfoSchema).find((d) => d.domain === ERROR_DOMAIN);
  return info && info.reason in ERRORS ? (info.reason as ErrorCode) : undefined;
}

/** The ErrorCode a ConnectError carries, or one derived from its Connect code. */
export function errorCodeOf(err: ConnectError): ErrorCode {
  const carried = carriedErrorCode(err);
  if (carried) return carried;
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

/** The ServiceUnavailable message of each unreachable dependency: a client (or an operator reading its log) can tell them apart. */
export const UNAVAILABLE_MESSAGES: Record<Unreachable, string> = {
  database: ERRORS.ServiceUnavailable.example,
  redis: "The service is temporarily unavailable: the Redis that holds its shared limits cannot be reached. Try again shortly.",
  pool: "The service is temporarily unavailable: every database connection is in use (its connection pool is exhausted). Try again shortly.",
};

/** The answer to a request while a dependency cannot be reached (the database unless named): 503 / Unavailable, ServiceUnavailable, its own message. */
export function serviceUnavailable(what: Unreachable = "database"): ConnectError {
  return apiError("ServiceUnavailable", UNAVAILABLE_MESSAGES[what], [], {
    "retry-after": "2",
  });
}

/**
 * Any thrown value as the ConnectError a client is answered with, for every transport: a lost
 * database (refused, dropped or timed-out connections), an exhausted connection pool or a lost
 * Redis is ServiceUnavailable, its message naming which (unreachable.ts); a constraint
 * violation is its documented 4xx (CONSTRAINT_ERRORS); anything else that is not already a
 * ConnectError stays an internal error.
 */
export function toConnectError(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) return reason;
  const unreachable = unreachableOf(reason);
  if (unreachable) return serviceUnavailable(unreachable);
  return constraintError(reason) ?? ConnectError.from(reason);
}

/**
 * Converts any thrown value into the documented ResponseStatus and its HTTP status: the error
 * table's for an error of ours, Connect's mapping of the code for any other ConnectError.
 */
export function toResponseStatus(reason: unknown): { httpStatus: number; status: ResponseStatus } {
  const err = toConnectError(reason);
  const carried = carriedErrorCode(err);
  const errorCode = carried ?? errorCodeOf(err);
  const violations = err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations);
  const internal = errorCode === "InternalError";
  const status = create(ResponseStatusSchema, {
    errorCode,
    // Internal errors never leak their detail to the client; the log has it.
    message: internal ? ERRORS.InternalError.example : err.rawMessage,
    errors: violations.map((v) => ({
      fieldName: v.field,
      errorCode: v.reason || errorCode,
      message: v.description,
    })),
  });
  return { httpStatus: carried ? ERRORS[carried].http : codeToHttpStatus(err.code), status };
}

/** True when the value is a ConnectError that a client caused (not a bug). */
export function isClientError(reason: unknown): boolean {
  return reason instanceof ConnectError && reason.code !== Code.Internal && reason.code !== Code.Unknown;
}
