/**
 * The REST routes found in the descriptors: each unary method's `google.api.http` bindings, as
 * Fastify routes with the request fields their path templates bind, and which fields the query
 * string may set. Read by the REST plugin, the OpenAPI document, the CLI and the fuzz cases.
 */
import { getOption, type DescField, type DescMethod, type DescMethodUnary, type DescService } from "@bufbuild/protobuf";
import { http } from "../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../gen/google/api/http_pb.js";

/** The HTTP methods a binding can name. */
export type HttpVerb = "GET" | "PUT" | "POST" | "DELETE" | "PATCH";

/** One REST binding found in the descriptors. */
export interface RestRoute {
  /** HTTP method. */
  method: HttpVerb;
  /** Fastify route path, e.g. `/v2/Properties/:property_sid/Messages`. */
  path: string;
  /** The `google.api.http` path template, e.g. `/v2/Properties/{property_sid}/Messages`. */
  template: string;
  /** `""` (no body), `"*"` (the whole request message) or the proto name of the body field. */
  body: string;
  /** `""` (the whole response message) or the proto name of the response field to return. */
  responseBody: string;
  service: DescService;
  /** The RPC method descriptor this route calls. */
  rpc: DescMethodUnary;
  /** Request fields bound by the path, in template order; the Fastify param is `field.name`. */
  pathFields: DescField[];
}

/** The REST routes found in the descriptors (unary methods with a google.api.http option). */
export function restRoutes(services: DescService[]): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const service of services) {
    for (const method of service.methods) {
      if (method.methodKind !== "unary") continue; // streaming methods are not transcoded
      const rpc = method as DescMethodUnary;
      const rule = getOption(rpc, http);
      for (const r of [rule, ...rule.additionalBindings]) {
        const binding = ruleBinding(r);
        if (binding === undefined) continue;
        const { path, pathFields } = parseTemplate(binding.template, rpc);
        if (r.body !== "" && r.body !== "*" && !rpc.input.fields.some((f) => f.name === r.body)) {
          throw new Error(`${rpc.parent.typeName}.${rpc.name}: body field "${r.body}" is not a request field`);
        }
        if (r.responseBody !== "" && !rpc.output.fields.some((f) => f.name === r.responseBody)) {
          throw new Error(`${rpc.parent.typeName}.${rpc.name}: response_body field "${r.responseBody}" is not a response field`);
        }
        routes.push({
          method: binding.method,
          path,
          template: binding.template,
          body: r.body,
          responseBody: r.responseBody,
          service,
          rpc,
          pathFields,
        });
      }
    }
  }
  return routes;
}

/**
 * The request fields a route reads from the query string (by json_name or proto name).
 * google.api.http: with body "*" there are none; otherwise every top-level scalar or enum field,
 * single or repeated, that the path and the body do not bind.
 */
export function queryFields(route: RestRoute): DescField[] {
  if (route.body === "*") return [];
  const bound = new Set(route.pathFields.map((f) => f.name));
  if (route.body !== "") bound.add(route.body);
  return route.rpc.input.fields.filter(
    (f) => !bound.has(f.name) && (f.fieldKind === "scalar" || f.fieldKind === "enum" || (f.fieldKind === "list" && f.listKind !== "message")),
  );
}

// ---------------------------------------------------------------------------------------------
// Path templates

function ruleBinding(rule: HttpRule): { method: HttpVerb; template: string } | undefined {
  switch (rule.pattern.case) {
    case "get":
      return { method: "GET", template: rule.pattern.value };
    case "put":
      return { method: "PUT", template: rule.pattern.value };
    case "post":
      return { method: "POST", template: rule.pattern.value };
    case "delete":
      return { method: "DELETE", template: rule.pattern.value };
    case "patch":
      return { method: "PATCH", template: rule.pattern.value };
    case "custom": {
      const kind = rule.pattern.value.kind.toUpperCase();
      if (kind === "GET" || kind === "PUT" || kind === "POST" || kind === "DELETE" || kind === "PATCH") {
        return { method: kind, template: rule.pattern.value.path };
      }
      return undefined;
    }
    default:
      return undefined;
  }
}

/**
 * Converts `/v2/Properties/{property_sid}/Messages` to `/v2/Properties/:property_sid/Messages`.
 * Supported: literal segments and `{field}` / `{field=*}` naming a top-level scalar request field.
 * Anything else (nested field paths, multi-segment patterns, verbs) fails at start-up.
 */
function parseTemplate(template: string, rpc: DescMethod): { path: string; pathFields: DescField[] } {
  const where = `${rpc.parent.typeName}.${rpc.name} "${template}"`;
  if (!template.startsWith("/")) throw new Error(`${where}: path template must start with "/"`);
  const pathFields: DescField[] = [];
  const out: string[] = [];
  for (const segment of template.slice(1).split("/")) {
    const variable = /^\{([A-Za-z_][A-Za-z0-9_]*)(?:=\*)?\}$/.exec(segment);
    if (variable) {
      const field = rpc.input.fields.find((f) => f.name === variable[1]);
      if (!field || (field.fieldKind !== "scalar" && field.fieldKind !== "enum")) {
        throw new Error(`${where}: {${variable[1]}} is not a scalar field of ${rpc.input.typeName}`);
      }
      pathFields.push(field);
      out.push(`:${field.name}`);
    } else if (/[{}*]/.test(segment)) {
      throw new Error(`${where}: unsupported path segment "${segment}"`);
    } else {
      out.push(segment.replaceAll(":", "::")); // a literal ":" is escaped for Fastify
    }
  }
  return { path: `/${out.join("/")}`, pathFields };
}

/**
 * The API roots to answer 404 under: per first path segment, the literal segments all routes
 * share, but never a whole route path (e.g. `/v2` and `/admin/v1`).
 */
export function apiPrefixes(routes: RestRoute[]): string[] {
  const groups = new Map<string, string[][]>();
  for (const route of routes) {
    const literal: string[] = [];
    for (const s of route.path.slice(1).split("/")) {
      if (s.startsWith(":")) break;
      literal.push(s);
    }
    const all = route.path.slice(1).split("/");
    // A prefix never covers a whole route path: keep at most all but the last segment.
    const capped = literal.slice(0, Math.min(literal.length, all.length - 1));
    if (capped.length === 0) continue;
    const group = groups.get(capped[0]);
    if (group) group.push(capped);
    else groups.set(capped[0], [capped]);
  }
  const prefixes: string[] = [];
  for (const list of groups.values()) {
    let common = list[0];
    for (const other of list) {
      let i = 0;
      while (i < common.length && i < other.length && common[i] === other[i]) i++;
      common = common.slice(0, i);
    }
    prefixes.push(`/${common.join("/")}`);
  }
  return prefixes;
}
