/**
 * Connect JSON (and gRPC/gRPC-Web with +json) read by the same rules as REST bodies: strict UTF-8
 * (400 MalformedRequest naming the byte offset, never U+FFFD), UTF-8 as the only charset (415),
 * and the one integer rule (src/rest/json-integers.ts).
 *
 * Connect-ES decodes every JSON request message with its `jsonOptions.textDecoder`, after any
 * decompression and per message (unary and enveloped alike), so each method gets a decoder that
 * knows its request type. The charset is decided before Connect looks at the Content-Type,
 * which it would refuse with a bare 415.
 */
import type { DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createMethodImplSpec, type ConnectRouter, type MethodImplSpec, type ServiceImpl } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { errorToJsonBytes } from "../common/internals.js";
import { fieldErrors, type FieldProblem } from "../common/errors.js";
import { decodeBody, rpcJsonCharset } from "../http/body-charset.js";
import { integerCheck } from "../rest/json-integers.js";

/** The JSON options Connect takes (Connect's own type is not exported under a stable name). */
type JsonOptions = NonNullable<Parameters<ConnectRouter["rpc"]>[2]>["jsonOptions"];

/** The text of one JSON request message of `desc`: strict UTF-8, then the integer rule. */
export function jsonRequestDecoder(desc: DescMessage): { decode(input?: Uint8Array): string } {
  const check = integerCheck(desc);
  return {
    decode(input = new Uint8Array(0)) {
      const text = decodeBody(input);
      if (check) {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          return text; // not JSON: protobuf-es says so, in its words
        }
        const problems: FieldProblem[] = [];
        check(json, problems);
        if (problems.length > 0) throw fieldErrors(problems);
      }
      return text;
    },
  };
}

/**
 * Registers a service as router.service does, one method at a time so that each has its own
 * JSON decoder. A method the implementation lacks answers `unimplemented`, as with router.service.
 * Returns the registered methods' specs (the functions the router's handlers call).
 */
export function serviceWithJsonRules(router: ConnectRouter, service: DescService, impl: ServiceImpl<DescService>, jsonOptions: JsonOptions): MethodImplSpec[] {
  const specs: MethodImplSpec[] = [];
  for (const method of service.methods) {
    const fn = (impl as Record<string, unknown>)[method.localName];
    const bound =
      typeof fn === "function"
        ? (fn as (...args: unknown[]) => unknown).bind(impl)
        : () => {
            throw new ConnectError(`${service.typeName}.${method.name} is not implemented`, Code.Unimplemented);
          };
    // Connect's JSON serialization reads `textDecoder` from these options (createJsonSerialization),
    // though the handler options' type does not list it.
    const options = { ...jsonOptions, textDecoder: jsonRequestDecoder(method.input) } as JsonOptions;
    router.rpc(method as DescMethod, bound as never, { jsonOptions: options });
    specs.push(createMethodImplSpec(method as DescMethod, bound as never));
  }
  return specs;
}

/** A media type with one charset parameter naming UTF-8 in any spelling Connect's own pattern misses. */
const UTF8_SPELLING = /^\s*([^;\s]+)\s*;\s*charset\s*=\s*("?)utf-?8\2\s*$/i;
const JSON_RPC_CONTENT_TYPE = /^\s*application\/(?:json|connect\+json|grpc\+json|grpc-web\+json|grpc-web-text\+json)\s*;/i;

/**
 * Makes each handler answer a JSON request whose Content-Type names a charset other than UTF-8
 * with 415 and a message saying UTF-8 is expected (Connect answers a bare 415), and lets any
 * spelling of UTF-8 (`charset="UTF-8"`, `charset=utf8`) through as Connect's own. A wrapper of
 * the router's handler list (src/rpc/handler-wrappers.ts).
 */
export function decideRpcCharset(handler: UniversalHandler): UniversalHandler {
  const gated = async (req: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
    const contentType = req.header.get("content-type");
    if (contentType === null || !JSON_RPC_CONTENT_TYPE.test(contentType)) return handler(req);
    try {
      rpcJsonCharset(contentType);
    } catch (err) {
      return unsupportedCharset(err as ConnectError);
    }
    const utf8 = UTF8_SPELLING.exec(contentType);
    if (!utf8) return handler(req);
    const header = new Headers(req.header);
    header.set("content-type", `${utf8[1]}; charset=utf-8`);
    return handler({ ...req, header });
  };
  return Object.assign(gated, handler);
}

/** 415 with a Connect error body (code invalid_argument and the UnsupportedMediaType ErrorInfo). */
function unsupportedCharset(err: ConnectError): UniversalServerResponse {
  const body = errorToJsonBytes(err, {});
  return {
    status: 415,
    header: new Headers({ "content-type": "application/json", "content-length": String(body.byteLength) }),
    body: (async function* () {
      yield body;
    })(),
  };
}
