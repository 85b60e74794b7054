/**
 * The operator CLI (`npx switchboard …`): calls a running service's AdminService over the
 * Connect protocol and prints the response as JSON on stdout; every error is JSON on stderr in
 * the REST error shape, with an exit code per kind (EXIT). bin/switchboard.mjs launches it.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { create, fromJson, ScalarType, toJson, type DescField, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { ResponseStatusSchema } from "../../gen/switchboard/v2/common_pb.js";
import { errorCodeOf } from "../common/errors.js";
import { int64Fixer } from "../rest/rest-response.js";
import { adminCommands, type Command } from "./commands.js";
import { RATES_HELP, runRates } from "./rates.js";

/** Exit codes: success, an error answer from the service, a bad command line, no answer at all. */
export const EXIT = { ok: 0, api: 1, usage: 2, connection: 3 } as const;

/** Where the CLI reads its settings and writes its output (the process, or a test's stand-in). */
export interface CliIo {
  env: NodeJS.ProcessEnv;
  cwd: string;
  stdout(text: string): void;
  stderr(text: string): void;
}

const DEFAULT_URL = "http://localhost:8080";
/** Where `npm start` keeps a generated operator token (docs/configuration.md). */
const TOKEN_FILE = join(".switchboard", "admin-token");
const TIMEOUT_MS = 30_000;

const GLOBAL_OPTIONS = {
  url: { type: "string" },
  token: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies ParseArgsConfig["options"];

class UsageError extends Error {}

/** Runs one command line (without the node and script arguments); resolves to the exit code. */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  const commands = adminCommands();
  try {
    const at = commandIndex(argv);
    const name = at === -1 ? undefined : argv[at];
    const rest = at === -1 ? argv : [...argv.slice(0, at), ...argv.slice(at + 1)];
    if (name === undefined || name === "help") {
      const { positionals, values } = parse(rest, {});
      if (name === "help" && positionals.length > 0) {
        io.stdout(commandHelp(findCommand(commands, positionals[0])));
        return EXIT.ok;
      }
      if (name === "help" || values.help) {
        io.stdout(globalHelp(commands));
        return EXIT.ok;
      }
      throw new UsageError("No command given. Run 'switchboard --help' for the list of commands.");
    }
    if (name === "rates") return await rates(rest, io);
    const command = findCommand(commands, name);
    const { values, positionals } = parse(rest, commandOptions(command), command.name);
    if (values.help) {
      io.stdout(commandHelp(command));
      return EXIT.ok;
    }
    const request = buildRequest(command, positionals, jsonFromFile(values, io));
    const url = settingsUrl(values.url as string | undefined, io);
    const token = settingsToken(values.token as string | undefined, io);
    return await call(command, request, url, token, io);
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr(errorJson("UsageError", `${e.message}`, []));
      return EXIT.usage;
    }
    throw e;
  }
}

function processIo(): CliIo {
  return {
    env: process.env,
    cwd: process.cwd(),
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
  };
}

/** The index of the command word: the first argument that is neither an option nor a global option's value. */
function commandIndex(argv: string[]): number {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") return i + 1 < argv.length ? i + 1 : -1;
    if (a === "--url" || a === "--token") i++;
    else if (!a.startsWith("-")) return i;
  }
  return -1;
}

function findCommand(commands: Command[], name: string): Command {
  const command = commands.find((c) => c.name === name);
  if (!command) throw new UsageError(`Unknown command '${name}'. Run 'switchboard --help' for the list of commands.`);
  return command;
}

type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

function parse(args: string[], options: NonNullable<ParseArgsConfig["options"]>, command?: string): { values: Values; positionals: string[] } {
  try {
    const { values, positionals } = parseArgs({
      args,
      options: { ...GLOBAL_OPTIONS, ...options },
      allowPositionals: true,
      allowNegative: true,
      strict: true,
    });
    return { values: values as Values, positionals };
  } catch (e) {
    throw new UsageError(`${(e as Error).message} (see 'switchboard ${command ? `${command} ` : ""}--help').`);
  }
}

function commandOptions(command: Command): NonNullable<ParseArgsConfig["options"]> {
  const options: NonNullable<ParseArgsConfig["options"]> = { json: { type: "string" }, "json-file": { type: "string" } };
  for (const o of command.options) {
    const isBool = o.field.fieldKind === "scalar" && o.field.scalar === ScalarType.BOOL;
    options[o.flag] = { type: isBool ? "boolean" : "string", multiple: o.field.fieldKind === "list" };
  }
  return options;
}

/** --json-file PATH (relative to the working directory) read as --json; both at once is a usage error. */
function jsonFromFile(values: Values, io: CliIo): Values {
  const path = values["json-file"];
  if (path === undefined) return values;
  if (values.json !== undefined) throw new UsageError("Give the request as --json or --json-file, not both.");
  try {
    return { ...values, json: readFileSync(resolve(io.cwd, String(path)), "utf8") };
  } catch (e) {
    throw new UsageError(`--json-file: cannot read '${String(path)}': ${(e as Error).message}`);
  }
}

/** The request as proto JSON: --json first, then positional arguments, options and fixed fields on top. */
function buildRequest(command: Command, positionals: string[], values: Values) {
  let json: JsonObject = {};
  if (values.json !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(values.json as string);
    } catch {
      throw new UsageError('--json must be a JSON object with the API\'s field names, e.g. \'{"Name":"Acme"}\'.');
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new UsageError('--json must be a JSON object with the API\'s field names, e.g. \'{"Name":"Acme"}\'.');
    }
    json = parsed as JsonObject;
  }
  const wanted = command.positionals.map((f) => `<${f.jsonName}>`).join(" ");
  if (positionals.length < command.positionals.length) {
    const missing = command.positionals.slice(positionals.length).map((f) => `<${f.jsonName}>`);
    throw new UsageError(`${command.name} needs ${missing.join(" ")}: switchboard ${command.name} ${wanted}`.trimEnd());
  }
  if (positionals.length > command.positionals.length) {
    throw new UsageError(
      `Unexpected argument '${positionals[command.positionals.length]}': switchboard ${command.name} ${wanted} [options]`.replace(/ +/g, " "),
    );
  }
  command.positionals.forEach((f, i) => (json[f.jsonName] = positionals[i]));
  for (const o of command.options) {
    const v = values[o.flag];
    if (v !== undefined) json[o.field.jsonName] = optionValue(o.field, o.flag, v);
  }
  Object.assign(json, command.fixed);
  try {
    return fromJson(command.method.input, json);
  } catch (e) {
    throw new UsageError(`Bad request for ${command.name}: ${(e as Error).message}`);
  }
}

/** An option's text as the JSON value proto JSON expects (fromJson checks the rest). */
function optionValue(field: DescField, flag: string, v: string | boolean | (string | boolean)[]): JsonValue {
  if (Array.isArray(v)) return v.map((item) => optionValue(field, flag, item));
  if (typeof v === "boolean") return v;
  if (field.fieldKind === "message" || field.fieldKind === "map") {
    try {
      return JSON.parse(v) as JsonValue;
    } catch {
      throw new UsageError(`--${flag} takes a JSON value.`);
    }
  }
  const scalar = field.fieldKind === "scalar" || field.fieldKind === "list" ? field.scalar : undefined;
  if (scalar !== undefined && scalar !== ScalarType.STRING && scalar !== ScalarType.BYTES && scalar !== ScalarType.BOOL) {
    if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(v.trim())) throw new UsageError(`--${flag} takes a number, got '${v}'.`);
  }
  return v;
}

function settingsUrl(flag: string | undefined, io: CliIo): string {
  const url = flag ?? (io.env.SWITCHBOARD_URL || DEFAULT_URL);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`--url must be the service's base URL such as ${DEFAULT_URL}, got '${url}'.`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new UsageError(`--url must be an http:// or https:// URL, got '${url}'.`);
  }
  return url.replace(/\/+$/, "");
}

function settingsToken(flag: string | undefined, io: CliIo): string {
  const token = flag ?? io.env.SWITCHBOARD_ADMIN_TOKEN;
  if (token) return token;
  // `npm start` without SWITCHBOARD_ADMIN_TOKEN keeps its generated token here.
  const file = join(io.cwd, TOKEN_FILE);
  if (existsSync(file)) {
    const saved = readFileSync(file, "utf8").trim();
    if (saved) return saved;
  }
  throw new UsageError(`No operator token: pass --token or set SWITCHBOARD_ADMIN_TOKEN (or run from the folder whose ${TOKEN_FILE} npm start wrote).`);
}

/** An AdminService client for the service at `url` with the operator token. */
function adminClient(url: string, token: string) {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const transport = createConnectTransport({ baseUrl: url, httpVersion: "1.1", interceptors: [bearer], defaultTimeoutMs: TIMEOUT_MS });
  return createClient(AdminService, transport);
}

async function call(command: Command, request: unknown, url: string, token: string, io: CliIo): Promise<number> {
  const client = adminClient(url, token) as unknown as Record<string, (req: unknown) => Promise<never>>;
  let response;
  try {
    response = await client[command.method.localName](request);
  } catch (e) {
    return reportFailure(e, url, io);
  }
  const output = command.method.output;
  const json = toJson(output, response, { alwaysEmitImplicit: true }) as JsonObject;
  // Same shape as the REST API: 64-bit integers (Unix seconds) as JSON numbers.
  int64Fixer(output)?.(json);
  io.stdout(`${JSON.stringify(json, null, 2)}\n`);
  return EXIT.ok;
}

/** `rates import|export` (src/cli/rates.ts): a rate card as CSV. */
async function rates(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(args, {}, "rates");
  if (values.help) {
    io.stdout(RATES_HELP);
    return EXIT.ok;
  }
  const url = settingsUrl(values.url as string | undefined, io);
  const client = adminClient(url, settingsToken(values.token as string | undefined, io));
  try {
    const outcome = await runRates(positionals, io.cwd, client, (message) => new UsageError(message));
    if (outcome.ok) {
      io.stdout(outcome.stdout);
      return EXIT.ok;
    }
    const first = outcome.problems[0];
    const message = outcome.problems.length === 1 ? first.message : outcome.problems.map((p) => p.message).join(" ");
    io.stderr(
      errorJson(
        first.code,
        message,
        outcome.problems.map((p) => ({ fieldName: p.field, errorCode: p.code, message: p.message })),
      ),
    );
    return EXIT.api;
  } catch (e) {
    if (e instanceof UsageError) throw e;
    return reportFailure(e, url, io);
  }
}

/** An error answer (exit 1) or no answer at all (exit 3), written as the REST error shape on stderr. */
function reportFailure(e: unknown, url: string, io: CliIo): number {
  const err = ConnectError.from(e);
  if (isConnectionFailure(err)) {
    io.stderr(errorJson("ConnectionFailed", `No answer from ${url}: ${err.rawMessage}`, []));
    return EXIT.connection;
  }
  const violations = err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations);
  const code = errorCodeOf(err);
  io.stderr(
    errorJson(
      code,
      err.rawMessage,
      violations.map((v) => ({ fieldName: v.field, errorCode: v.reason || code, message: v.description })),
    ),
  );
  return EXIT.api;
}

/** True when the service never answered: refused, unresolvable, reset, or timed out on our side. */
function isConnectionFailure(err: ConnectError): boolean {
  if (err.code === Code.DeadlineExceeded) return true;
  for (let c: unknown = err.cause; c instanceof Error; c = c.cause) {
    const code = (c as NodeJS.ErrnoException).code;
    if (typeof code === "string" && /^(E[A-Z_]+|UND_ERR_[A-Z_]+)$/.test(code)) return true;
  }
  return false;
}

function errorJson(errorCode: string, message: string, errors: { fieldName: string; errorCode: string; message: string }[]): string {
  const status = create(ResponseStatusSchema, { errorCode, message, errors });
  return `${JSON.stringify({ ResponseStatus: toJson(ResponseStatusSchema, status, { alwaysEmitImplicit: true }) }, null, 2)}\n`;
}

// ---------------------------------------------------------------------------------------------
// Help

function globalHelp(commands: Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length)) + 2;
  return [
    "Usage: switchboard [--url URL] [--token TOKEN] <command> [arguments] [options]",
    "",
    "Operator CLI: calls the running service's operator API (switchboard.admin.v1.AdminService).",
    "Prints the response as JSON on stdout; an error as JSON on stderr, in the REST error shape.",
    "",
    "Commands:",
    ...commands.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    `  ${"rates".padEnd(width)}Imports a rate card from CSV or exports it (rates import NAME FILE.csv, rates export NAME [FILE]).`,
    "",
    "Global options:",
    `  --url URL        service base URL (env SWITCHBOARD_URL; default ${DEFAULT_URL})`,
    "  --token TOKEN    operator bearer token (env SWITCHBOARD_ADMIN_TOKEN; else the",
    `                   ${TOKEN_FILE} that npm start writes, if in the current folder)`,
    "  -h, --help       this help; 'switchboard <command> --help' shows a command's options",
    "",
    "Exit codes: 0 success, 1 error answer from the service (its ErrorCode on stderr),",
    "2 bad command line (ErrorCode UsageError), 3 no answer (ErrorCode ConnectionFailed).",
    "",
  ].join("\n");
}

function commandHelp(c: Command): string {
  const args = c.positionals.map((f) => `<${f.jsonName}>`).join(" ");
  const rows: [string, string][] = c.options.map((o) => {
    const f = o.field;
    const isBool = f.fieldKind === "scalar" && f.scalar === ScalarType.BOOL;
    return [isBool ? `--[no-]${o.flag}` : `--${o.flag} ${f.jsonName.toUpperCase()}`, o.hint];
  });
  rows.push(["--json OBJECT", "the request as JSON with the API's field names; arguments and options override it"]);
  rows.push(["--json-file PATH", "the same JSON read from a file (e.g. replace-routes --json-file routes.json)"]);
  const width = Math.max(...rows.map(([flag]) => flag.length)) + 2;
  const fixed = Object.entries(c.fixed)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(", ");
  return [
    `Usage: switchboard ${c.name}${args ? ` ${args}` : ""} [options]`,
    "",
    c.summary,
    `Calls AdminService/${c.method.name}${c.http ? ` (REST: ${c.http})` : ""}${fixed ? ` with ${fixed}` : ""}.`,
    "",
    "Options:",
    ...rows.map(([flag, hint]) => `  ${flag.padEnd(width)}${hint}`.trimEnd()),
    "",
    "Global options --url, --token and --help work here too (see 'switchboard --help').",
    "",
  ].join("\n");
}
