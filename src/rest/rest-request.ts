/**
 * REST request decoding: one route's body, query string and path parameters into its request
 * message, with every field problem reported together. Compiled once per route; a request is a
 * few Map lookups and one `create`.
 */
import { create, type DescMessage } from "@bufbuild/protobuf";
import type { FastifyRequest } from "fastify";
import { apiError, fieldErrors, type FieldProblem } from "../common/errors.js";
import { type DefaultCharset, jsonBodyText } from "../http/body-charset.js";
import { unsupportedMediaType } from "../http/http-layer.js";
import { isJsonObject, isWellKnown } from "./proto-json.js";
import { assign, fieldReader, INVALID, messageConverter, queryReader, type FieldReader, type MessageConverter } from "./rest-fields.js";
import { queryFields, type RestRoute } from "./rest-routes.js";

/**
 * Builds a route's request message from a Fastify request, and returns it with the parsed JSON
 * body as the client sent it; throws the 400 that names every field problem. `charset` says how
 * a body without a charset parameter is read (the account's choice, known once it is authenticated).
 */
export type RequestDecoder = (request: FastifyRequest, charset: DefaultCharset) => { message: unknown; body: unknown };

/** Compiles the decoder of one route. */
export function requestDecoder(route: RestRoute): RequestDecoder {
  const input: DescMessage = route.rpc.input;
  // How the body fills the request: not at all, the whole message, or one field.
  let bodyKind: "none" | "all" | "field" = "none";
  let bodyField: FieldReader | undefined;
  // Reads the body object: the request message (body "*") or the message-typed body field.
  let bodyConverter: MessageConverter | undefined;
  if (route.body === "*") {
    bodyKind = "all";
    bodyConverter = messageConverter(input);
  } else if (route.body !== "") {
    bodyKind = "field";
    const field = input.fields.find((f) => f.name === route.body)!;
    bodyField = fieldReader(field);
    if (field.fieldKind === "message" && !isWellKnown(field.message)) bodyConverter = messageConverter(field.message);
  }

  // Query parameter name (json_name and proto name) → reader, for fields the path does not bind.
  const query = new Map<string, FieldReader>();
  for (const field of queryFields(route)) {
    const reader = queryReader(field)!;
    query.set(field.jsonName, reader);
    query.set(field.name, reader);
  }
  const path = route.pathFields.map((f) => ({ param: f.name, reader: queryReader(f)! }));

  /** Builds the request message from body, query and path (path wins), collecting all field problems. */
  return (request, charset) => {
    const problems: FieldProblem[] = [];
    let init: Record<string, unknown> = {};
    let json: unknown;

    if (bodyKind !== "none") {
      json = readJsonBody(request, charset);
      if (bodyKind === "all") {
        init = bodyConverter!.read(jsonObject(json === undefined ? {} : json), "", problems);
      } else if (json === undefined || json === null) {
        // No body for a body field: the field is not given.
      } else if (bodyConverter) {
        // The body is one message field: its keys are named as the client wrote them.
        const before = problems.length;
        const value = bodyConverter.read(jsonObject(json), "", problems);
        if (problems.length === before) assign(init, bodyField!.field, value);
      } else {
        const value = bodyField!.read(json, bodyField!.field.jsonName, problems);
        if (value !== INVALID) assign(init, bodyField!.field, value);
      }
    }

    if (query.size > 0) {
      const given = request.query as Record<string, string | string[] | undefined>;
      for (const key of Object.keys(given)) {
        const reader = query.get(key);
        const raw = given[key];
        if (!reader || raw === undefined) continue;
        // Repeated keys: all values for a repeated field, the last one for a scalar.
        const value = reader.field.fieldKind === "list" ? raw : Array.isArray(raw) ? raw[raw.length - 1] : raw;
        const converted = reader.read(value, key, problems);
        if (converted === INVALID) continue;
        // A repeated field given under both its json_name and its proto name gets all values.
        const previous = init[reader.field.localName];
        assign(init, reader.field, Array.isArray(previous) ? [...previous, ...(converted as unknown[])] : converted);
      }
    }

    const params = request.params as Record<string, string>;
    for (const { param, reader } of path) {
      const converted = reader.read(params[param] ?? "", reader.field.jsonName, problems);
      if (converted !== INVALID) assign(init, reader.field, converted);
    }

    if (problems.length > 0) throw fieldErrors(problems);
    return { message: create(input, init), body: json };
  };
}

function jsonObject(json: unknown) {
  if (!isJsonObject(json)) throw apiError("MalformedRequest", "The request body must be a JSON object.");
  return json;
}

/** The parsed JSON body, or undefined when there is none. */
function readJsonBody(request: FastifyRequest, charset: DefaultCharset): unknown {
  const raw = request.body;
  if (!Buffer.isBuffer(raw) || raw.length === 0) return undefined;
  const contentType = request.headers["content-type"];
  if (contentType !== undefined && !isJsonMediaType(contentType)) throw unsupportedMediaType();
  // The named charset (415 for one not supported), else UTF-8 (400 naming the offset for bytes that
  // are not UTF-8, or ISO-8859-1 for a Fone Dynamics compatible account); a BOM is dropped.
  const text = jsonBodyText(raw, contentType, charset);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw apiError("MalformedRequest", "The request body is not valid JSON.");
  }
}

const JSON_MEDIA_TYPE = /^\s*application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;
function isJsonMediaType(contentType: string): boolean {
  return JSON_MEDIA_TYPE.test(contentType);
}
