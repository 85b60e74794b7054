/**
 * Connect-ES refuses a request no protocol of a method can take with a bare status and no body:
 * 405 for a method other than the protocols allow (and no `Allow` header), 415 for a Content-Type
 * none of them reads, 505 for a bidirectional stream (server reflection) asked over HTTP/1.1.
 * Those refusals are answered here in the documented `{"ResponseStatus": …}` body of the error
 * table, like any other request the HTTP layer refuses; a 5xx would blame the server for a
 * client's choice of protocol, so the HTTP/1.1 stream becomes a 400 saying HTTP/2 is needed.
 */
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import type { ConnectError } from "@connectrpc/connect";
import { apiError } from "../common/errors.js";
import { errorAnswer, JSON_CONTENT_TYPE, unsupportedMediaType } from "../http/http-layer.js";

/** The error a bodiless refusal of Connect stands for, or undefined for any other answer. */
export function refusalError(handler: Pick<UniversalHandler, "allowedMethods" | "requestPath">, method: string, status: number): ConnectError | undefined {
  switch (status) {
    case 405: {
      const allow = handler.allowedMethods.join(", ");
      const err = apiError("MethodNotAllowed", `${method} is not allowed on this resource; allowed: ${allow}.`);
      err.metadata.set("allow", allow);
      return err;
    }
    case 415:
      return unsupportedMediaType();
    case 505:
      return apiError(
        "MalformedRequest",
        `${handler.requestPath} is a bidirectional stream and needs HTTP/2 (h2c, as grpcurl -plaintext and buf curl --http2-prior-knowledge speak it); it cannot be called over HTTP/1.1.`,
      );
    default:
      return undefined;
  }
}

/** A refusal as a universal response: the documented body, its headers (Allow…) and Connect's own (Connection: close). */
function documented(err: ConnectError, given: UniversalServerResponse["header"]): UniversalServerResponse {
  const { httpStatus, body } = errorAnswer(err);
  const bytes = Buffer.from(body);
  const header = new Headers(given);
  err.metadata.forEach((value, name) => header.set(name, value));
  header.set("content-type", JSON_CONTENT_TYPE);
  header.set("content-length", String(bytes.byteLength));
  return {
    status: httpStatus,
    header,
    body: (async function* () {
      yield bytes;
    })(),
  };
}

/**
 * Makes each handler answer Connect's bodiless refusals (405, 415, 505) in the documented body.
 * A wrapper of the router's handler list (src/rpc/handler-wrappers.ts); an answer with a
 * Content-Type (every RPC answer, including Connect's own errors) passes through untouched.
 */
export function documentRpcRefusals(handler: UniversalHandler): UniversalHandler {
  const documenting = async (req: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
    const res = await handler(req);
    // Connect's refusals carry no Content-Type (a wrapper may have given them an empty body); its answers always do.
    if (res.header?.has("content-type")) return res;
    const err = refusalError(handler, req.method, res.status);
    return err ? documented(err, res.header) : res;
  };
  return Object.assign(documenting, handler);
}
