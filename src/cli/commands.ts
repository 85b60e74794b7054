/**
 * The operator CLI's commands. The list comes from the AdminService descriptor: every unary
 * method is a command (kebab-case of its name) whose options are the request's fields and whose
 * positional arguments are the fields of its HTTP path. The summaries and option hints are the
 * proto comments (read from gen/descriptors.binpb: protoc-gen-es strips them from the embedded
 * descriptors), so the help and the OpenAPI document say the same; a method's summary is the
 * first paragraph of its comment. The table below only adds what a comment cannot say:
 * command-line hints, extra positional arguments and shortcuts such as approve-address and approve-sender-id.
 */
import { getOption, ScalarType, type DescField, type DescMethod, type DescMethodUnary, type JsonValue } from "@bufbuild/protobuf";
import { http } from "../../gen/google/api/annotations_pb.js";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { loadProtoComments } from "../openapi/proto-comments.js";

/** What the proto comments cannot say about one AdminService method, by the method's proto name. */
interface MethodNotes {
  /** Option hints by proto field name; they replace the field's proto comment in the help. */
  hints?: Record<string, string>;
  /** Request fields taken as positional arguments after the path fields, in this order. */
  positionals?: string[];
  /** Option names by proto field name, where the field's own name is a global option (--url, --token). */
  flags?: Record<string, string>;
}

const SMS_HINT = "--sms-enabled switches SMS on, --no-sms-enabled off (disables sending)";
const SMS_DEFAULT_HINT = "default on; --no-sms-enabled creates it with SMS off";
const COMPAT_HINT = "None (Switchboard's REST format, the default) or FoneDynamics (the shapes Fone Dynamics' SDKs read)";

/** Command-line additions to the proto comments. */
export const METHOD_NOTES: Record<string, MethodNotes> = {
  CreateAccount: { hints: { sms_enabled: SMS_DEFAULT_HINT, rest_compatibility: COMPAT_HINT } },
  UpdateAccount: { hints: { sms_enabled: SMS_HINT, rest_compatibility: COMPAT_HINT } },
  CreateProperty: { hints: { sms_enabled: SMS_DEFAULT_HINT } },
  UpdateProperty: { hints: { sms_enabled: SMS_HINT } },
  ListNumbers: { hints: { pool: "--pool: only lease pool numbers; --no-pool: only owned numbers; neither: both" } },
  CreateNumber: {
    hints: { number: "E164 with the + prefix, e.g. +12025550100", account_sid: "owning account; omit for the lease pool" },
    positionals: ["number"],
  },
  ReviewAddress: { hints: { status: "Active or Rejected (or use approve-address / reject-address)" } },
  ReviewSenderId: { hints: { status: "Registered or Rejected (or use approve-sender-id / reject-sender-id)" } },
  InjectInbound: { hints: { from: "the handset's E164 number", to: "a number of the service, e.g. a leased pool number" } },
  // --url is the service's URL: the carrier's Url is --carrier-url.
  AddCarrier: { flags: { url: "carrier-url" } },
  GetUsage: {
    hints: {
      start_date: "the first UTC day, YYYY-MM-DD",
      end_date: "the last UTC day (included), YYYY-MM-DD",
      group_by: "Account (the default) or Carrier",
      account_sid: "only this account",
    },
  },
  UpdateCarrier: { flags: { url: "carrier-url" } },
};

/** Full proto name of an AdminService method, the key of its comment. */
export function methodKey(method: DescMethod): string {
  return `${method.parent.typeName}.${method.name}`;
}

/** A method's one-line summary: the first paragraph of its proto comment. */
export function summaryOf(comment: string | undefined): string | undefined {
  const first = comment?.split("\n\n", 1)[0].trim();
  return first ? first : undefined;
}

/** Commands that call a method with some request fields fixed. */
const SHORTCUTS: { name: string; method: string; fixed: Record<string, JsonValue>; summary: string }[] = [
  { name: "approve-address", method: "ReviewAddress", fixed: { Status: "Active" }, summary: "Approves a Pending address (review-address --status Active)." },
  {
    name: "reject-address",
    method: "ReviewAddress",
    fixed: { Status: "Rejected" },
    summary: "Rejects a Pending address; it stays rejected (review-address --status Rejected).",
  },
  {
    name: "approve-sender-id",
    method: "ReviewSenderId",
    fixed: { Status: "Registered" },
    summary: "Registers a Pending sender ID to its account for its country (review-sender-id --status Registered).",
  },
  {
    name: "reject-sender-id",
    method: "ReviewSenderId",
    fixed: { Status: "Rejected" },
    summary: "Rejects a Pending sender ID; the name is free again (review-sender-id --status Rejected).",
  },
  {
    name: "usage",
    method: "GetUsage",
    fixed: {},
    summary: "Usage between two UTC days with Cost and Margin, by account or carrier (get-usage; docs/billing.md#usage).",
  },
];

/** One option of a command: a request field given as --kebab-name. */
export interface CommandOption {
  flag: string;
  field: DescField;
  hint: string;
}

/** One CLI command. */
export interface Command {
  name: string;
  method: DescMethodUnary;
  summary: string;
  /** The HTTP binding, e.g. "POST /admin/v1/Accounts/{AccountSid}/Token", for the help text. */
  http: string;
  /** Fields given as positional arguments, all required, in order. */
  positionals: DescField[];
  options: CommandOption[];
  /** Request fields (API JSON names) the command sets itself. */
  fixed: Record<string, JsonValue>;
}

/** "CreateAccount" → "create-account". */
export function kebab(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
    .replace(/_/g, "-")
    .toLowerCase();
}

function httpBinding(method: DescMethod): { verb: string; path: string; pathFields: string[] } | undefined {
  const rule = getOption(method, http);
  const p = rule.pattern;
  if (p.case === undefined || p.case === "custom") return undefined;
  const path = p.value;
  const pathFields = [...path.matchAll(/\{([a-z0-9_.]+)(?:=[^}]*)?\}/g)].map((m) => m[1]);
  return { verb: p.case.toUpperCase(), path, pathFields };
}

/** "integer; omit for …", or "integer. Default 200, …" before a sentence (a proto comment). */
function optionHint(type: string, text: string): string {
  if (!type || !text) return type || text;
  return `${type}${/^[A-Z]/.test(text) ? "." : ";"} ${text}`;
}

function typeHint(field: DescField): string {
  switch (field.fieldKind) {
    case "scalar":
      if (field.scalar === ScalarType.BOOL) return "";
      if (field.scalar === ScalarType.STRING) return "";
      if (field.scalar === ScalarType.BYTES) return "base64";
      return field.scalar === ScalarType.FLOAT || field.scalar === ScalarType.DOUBLE ? "number" : "integer";
    case "enum":
      return field.enum.values.map((v) => v.name).join(" | ");
    case "list":
      return "repeatable";
    default:
      return "JSON";
  }
}

function buildCommand(
  name: string,
  method: DescMethodUnary,
  summary: string,
  fixed: Record<string, JsonValue>,
  comments: ReadonlyMap<string, string>,
): Command {
  const text = METHOD_NOTES[method.name];
  const binding = httpBinding(method);
  const fixedFields = new Set(Object.keys(fixed));
  const byName = new Map(method.input.fields.map((f) => [f.name, f]));
  const positionalNames = [...(binding?.pathFields ?? []), ...(text?.positionals ?? [])];
  const positionals = positionalNames.map((n) => byName.get(n)).filter((f): f is DescField => f !== undefined);
  const options = method.input.fields
    .filter((f) => !positionals.includes(f) && !fixedFields.has(f.jsonName))
    .map((field) => ({
      flag: text?.flags?.[field.name] ?? kebab(field.name),
      field,
      hint: optionHint(typeHint(field), text?.hints?.[field.name] ?? comments.get(`${field.parent.typeName}.${field.name}`) ?? ""),
    }));
  const path = binding ? binding.path.replace(/\{([a-z0-9_.]+)[^}]*\}/g, (_, f: string) => `{${byName.get(f)?.jsonName ?? f}}`) : "";
  return {
    name,
    method,
    summary,
    http: binding ? `${binding.verb} ${path}` : "",
    positionals,
    options,
    fixed,
  };
}

/**
 * Every command: one per unary AdminService method, in proto order, then the shortcuts.
 * `comments` defaults to the proto comments of gen/descriptors.binpb.
 */
export function adminCommands(comments: ReadonlyMap<string, string> = loadProtoComments()): Command[] {
  const unary = AdminService.methods.filter((m): m is DescMethodUnary => m.methodKind === "unary");
  const commands = unary.map((m) =>
    // Only without gen/descriptors.binpb (npm run generate writes it) is there no comment.
    buildCommand(kebab(m.name), m, summaryOf(comments.get(methodKey(m))) ?? `Calls AdminService/${m.name}.`, {}, comments),
  );
  for (const s of SHORTCUTS) {
    const method = unary.find((m) => m.name === s.method);
    if (method) commands.push(buildCommand(s.name, method, s.summary, s.fixed, comments));
  }
  return commands;
}
