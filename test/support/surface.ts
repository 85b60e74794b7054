/**
 * The API surface as the descriptors give it, and the checks every answer must pass: used by
 * the fuzz tests and the tenant-isolation matrix, so that a new service, method or route is
 * covered without anyone listing it.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { DescMethodUnary, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { MikroORM } from "@mikro-orm/sql";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { restRoutes, type RestRoute } from "../../src/rest/rest-routes.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

// ---------------------------------------------------------------------------------------------
// Enumeration

/** Every service generated from proto/switchboard (gen/switchboard/**\/*_pb.ts), by type name. */
export async function apiServices(): Promise<DescService[]> {
  const dir = join(ROOT, "gen/switchboard");
  const files = (readdirSync(dir, { recursive: true }) as string[]).filter((f) => f.endsWith("_pb.ts")).sort();
  const found = new Map<string, DescService>();
  for (const file of files) {
    const mod = (await import(pathToFileURL(join(dir, file)).href)) as Record<string, unknown>;
    for (const value of Object.values(mod)) {
      if (typeof value === "object" && value !== null && (value as { kind?: unknown }).kind === "service") {
        const service = value as DescService;
        found.set(service.typeName, service);
      }
    }
  }
  return [...found.values()].sort((a, b) => a.typeName.localeCompare(b.typeName));
}

/** One RPC method of a served service. */
export interface RpcMethod {
  service: DescService;
  method: DescMethodUnary;
  /** `Service.Method`, for labels. */
  name: string;
}

/** Every unary method of the services (the API has no streaming methods; a new one fails the count). */
export function rpcMethods(services: DescService[]): RpcMethod[] {
  return services.flatMap((service) =>
    service.methods.map((m) => {
      if (m.methodKind !== "unary") throw new Error(`${service.typeName}.${m.name} is ${m.methodKind}: extend the fuzz tests`);
      return { service, method: m as DescMethodUnary, name: `${service.name}.${m.name}` };
    }),
  );
}

/** The REST routes of the services, as the REST transcoder registers them. */
export function apiRestRoutes(services: DescService[]): RestRoute[] {
  return restRoutes(services);
}

/** Whether a service is the operator API (bearer token) rather than an account API (Basic). */
export function isOperatorService(service: DescService): boolean {
  return service.typeName.startsWith("switchboard.admin.");
}

// ---------------------------------------------------------------------------------------------
// The documented errors (docs/errors.md, its table)

/** One row of the error table in docs/errors.md. */
export interface DocumentedError {
  http: number;
  /** Connect code string (`invalid_argument`), or undefined for REST-only errors (`—`). */
  connect: string | undefined;
}

let documented: Map<string, DocumentedError> | undefined;

/** The error table of docs/errors.md: ErrorCode → HTTP status and Connect code. */
export function documentedErrors(): Map<string, DocumentedError> {
  if (documented) return documented;
  const section = readFileSync(join(ROOT, "docs", "errors.md"), "utf8");
  const table = new Map<string, DocumentedError>();
  for (const m of section.matchAll(/^\| `([A-Za-z]+)` \| (\d{3}) \| ([a-z_]+|—) \|/gm)) {
    table.set(m[1], { http: Number(m[2]), connect: m[3] === "—" ? undefined : m[3] });
  }
  if (table.size < 20) throw new Error(`docs/errors.md error table not found (${table.size} rows)`);
  return (documented = table);
}

// ---------------------------------------------------------------------------------------------
// Checks

/** What an HTTP answer looks like to the checks (inject's response, or a real one). */
export interface HttpAnswer {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

/**
 * Problems with a REST answer (empty when fine): never a 5xx; a 4xx carries exactly
 * `{"ResponseStatus": {"ErrorCode", "Message", "Errors"}}` with a documented ErrorCode whose
 * documented HTTP status is the one sent; a 2xx is JSON.
 */
export function restAnswerProblems(res: HttpAnswer, method: string): string[] {
  const problems: string[] = [];
  const status = res.statusCode;
  if (status >= 500) problems.push(`status ${status}`);
  if (status < 200 || (status >= 300 && status < 400)) problems.push(`unexpected status ${status}`);
  if (method === "HEAD") return problems; // no body to check
  const contentType = String(res.headers["content-type"] ?? "");
  if (!/^application\/json/.test(contentType)) problems.push(`content-type ${JSON.stringify(contentType)}`);
  let body: any;
  try {
    body = JSON.parse(res.body);
  } catch {
    return [...problems, `body is not JSON: ${res.body.slice(0, 200)}`];
  }
  if (status < 400) return problems;
  const table = documentedErrors();
  const rs = body?.ResponseStatus;
  if (typeof body !== "object" || body === null || Object.keys(body).join() !== "ResponseStatus" || typeof rs !== "object" || rs === null) {
    return [...problems, `not the documented error body: ${res.body.slice(0, 300)}`];
  }
  const extra = Object.keys(rs).filter((k) => !["ErrorCode", "Message", "Errors"].includes(k));
  if (extra.length > 0) problems.push(`unexpected ResponseStatus keys ${extra.join(", ")}`);
  const doc = table.get(rs.ErrorCode);
  if (!doc) problems.push(`undocumented ErrorCode ${JSON.stringify(rs.ErrorCode)}`);
  else if (doc.http !== status) problems.push(`ErrorCode ${rs.ErrorCode} is documented as ${doc.http}, sent as ${status}`);
  if (rs.ErrorCode === "InternalError") problems.push("InternalError");
  if (typeof rs.Message !== "string" || rs.Message === "") problems.push("no Message");
  if (rs.Errors !== undefined) {
    if (!Array.isArray(rs.Errors)) problems.push("Errors is not a list");
    else {
      for (const e of rs.Errors) {
        const keys = typeof e === "object" && e !== null ? Object.keys(e).sort().join() : "";
        if (keys !== "ErrorCode,FieldName,Message") problems.push(`bad Errors entry ${JSON.stringify(e)}`);
        else if (!table.has(e.ErrorCode)) problems.push(`undocumented field ErrorCode ${JSON.stringify(e.ErrorCode)}`);
        else if (typeof e.FieldName !== "string" || typeof e.Message !== "string" || e.Message === "") problems.push(`bad Errors entry ${JSON.stringify(e)}`);
      }
    }
  }
  if (status === 401 && !res.headers["www-authenticate"]) problems.push("401 without WWW-Authenticate");
  if (status === 405 && !res.headers["allow"]) problems.push("405 without Allow");
  return problems;
}

/** Connect codes that blame the server (or mean the answer never came: a hang). */
const SERVER_CODES = new Set<Code>([
  Code.Internal,
  Code.Unknown,
  Code.DataLoss,
  Code.Unimplemented,
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.Canceled,
  Code.Aborted,
]);

/**
 * Problems with an RPC error (empty when fine): a ConnectError with a client-side code and a
 * message; when it carries a Switchboard ErrorInfo (domain "switchboard"), the reason is a
 * documented ErrorCode whose documented Connect code is the one sent, and field violations
 * carry documented codes. `switchboard`: the request was well formed, so the error must be one
 * of Switchboard's (with that ErrorInfo).
 */
export function rpcErrorProblems(reason: unknown, opts: { switchboard: boolean }): string[] {
  if (!(reason instanceof ConnectError)) return [`not a ConnectError: ${String(reason)}`];
  const problems: string[] = [];
  const infos = reason.findDetails(ErrorInfoSchema).filter((d) => d.domain === "switchboard");
  // Aborted is also a documented answer (409 AddressNotPending, a review that lost a race); one
  // without a Switchboard ErrorInfo (a reset connection, say) is still a problem.
  const documentedConflict = reason.code === Code.Aborted && infos.length > 0;
  if (SERVER_CODES.has(reason.code) && !documentedConflict) problems.push(`code ${codeToString(reason.code)}: ${reason.rawMessage.slice(0, 200)}`);
  if (reason.rawMessage === "") problems.push("no message");
  const table = documentedErrors();
  if (infos.length > 1) problems.push(`${infos.length} ErrorInfo details`);
  if (infos.length === 0) {
    if (opts.switchboard) problems.push(`no Switchboard ErrorInfo on ${codeToString(reason.code)}: ${reason.rawMessage.slice(0, 200)}`);
  } else {
    const doc = table.get(infos[0].reason);
    if (!doc) problems.push(`undocumented ErrorInfo reason ${JSON.stringify(infos[0].reason)}`);
    else if (doc.connect !== undefined && doc.connect !== codeToString(reason.code)) {
      problems.push(`ErrorCode ${infos[0].reason} is documented as ${doc.connect}, sent as ${codeToString(reason.code)}`);
    }
  }
  for (const v of reason.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations)) {
    if (!table.has(v.reason)) problems.push(`undocumented field violation reason ${JSON.stringify(v.reason)}`);
    if (v.description === "") problems.push(`field violation ${v.field} without description`);
  }
  return problems;
}

/** The Switchboard ErrorCode a ConnectError carries, if any. */
export function switchboardReason(err: ConnectError): string | undefined {
  return err.findDetails(ErrorInfoSchema).find((d) => d.domain === "switchboard")?.reason;
}

// ---------------------------------------------------------------------------------------------
// Database snapshots

const tableLists = new WeakMap<MikroORM, Promise<string[]>>();

/**
 * Every table but the migrators' and `limit_buckets`: the shared limits' counters, which every send
 * request is charged to before anything is checked (docs/limits.md), refused or not, as the
 * in-memory buckets were; they hold no tenant's data.
 */
function tablesOf(orm: MikroORM): Promise<string[]> {
  let tables = tableLists.get(orm);
  if (!tables) {
    tables = orm.em
      .fork()
      .execute<{ table_name: string }[]>(
        `select table_name from information_schema.tables
          where table_schema = current_schema() and table_type = 'BASE TABLE' and table_name not like 'mikro_orm%'
          and table_name <> 'limit_buckets'
          order by table_name`,
      )
      .then((rows) => rows.map((r) => r.table_name));
    tableLists.set(orm, tables);
  }
  return tables;
}

const digestFunctions = new WeakMap<MikroORM, Promise<void>>();

/**
 * A cheap fingerprint of every table: its row count and the sum of a hash of each row's text
 * (order-free, so no sort). Any change to any column of any row changes it (up to hash
 * collisions); dbRows gives the rows themselves. It runs as one PL/pgSQL function created in the
 * (throwaway) test database, whose statements are planned once, not at every call.
 */
export async function dbDigest(orm: MikroORM): Promise<Record<string, string>> {
  let ready = digestFunctions.get(orm);
  if (!ready) {
    ready = tablesOf(orm).then(async (tables) => {
      const body = tables
        .map(
          (t) =>
            `select count(*)::text || ':' || coalesce(sum(hashtext(r::text)::bigint), 0)::text into part from "${t}" as r; out := out || '${t}=' || part || ';';`,
        )
        .join("\n");
      await orm.em.fork().execute(`create or replace function test_table_digest() returns text language plpgsql as $$
declare out text := ''; part text;
begin
${body}
return out;
end $$`);
    });
    digestFunctions.set(orm, ready);
  }
  await ready;
  const [row] = await orm.em.fork().execute<{ d: string }[]>("select test_table_digest() as d");
  return Object.fromEntries(
    row.d
      .split(";")
      .filter((x) => x !== "")
      .map((x) => x.split("=") as [string, string]),
  );
}

/** The tables whose digests differ. */
export function changedTables(before: Record<string, string>, after: Record<string, string>): string[] {
  return [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((t) => before[t] !== after[t]);
}

/** Every row of every table, for exact comparisons with readable diffs. */
export async function dbRows(orm: MikroORM): Promise<Record<string, unknown[]>> {
  const em = orm.em.fork();
  const out: Record<string, unknown[]> = {};
  for (const t of await tablesOf(orm)) out[t] = await em.execute(`select * from "${t}" as r order by r::text`);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Clients and time limits

/** The RPC protocols a client can speak to the one port. */
export type RpcProtocol = "connect-json" | "connect-binary" | "grpc" | "grpc-web";
export const RPC_PROTOCOLS: RpcProtocol[] = ["connect-json", "connect-binary", "grpc", "grpc-web"];

/** One transport per protocol against a listening app, and how to close the gRPC session. */
export function rpcTransports(baseUrl: string): { transports: Record<RpcProtocol, Transport>; close(): void } {
  const sessions = new Http2SessionManager(baseUrl);
  return {
    transports: {
      "connect-json": createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }),
      "connect-binary": createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }),
      grpc: createGrpcTransport({ baseUrl, sessionManager: sessions }),
      "grpc-web": createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }),
    },
    close: () => sessions.abort(),
  };
}

/** The promise's value, or a rejection naming `what` when it takes longer than `ms` (a hang). */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
