/**
 * Every private field and non-public export of Node, httpolyglot and Connect-ES the service
 * relies on, in one module, with the start-up self-check (checkInternals) that stops the service
 * with a message naming what is missing after an upgrade removed or renamed it: without it, most
 * of these would degrade in silence (gRPC through a JavaScript stream wrapper at twice the CPU,
 * every h2 stream through Fastify, no HTTP/1.1 header timeout).
 *
 * Connect-ES: the runtime exports of `@connectrpc/connect/protocol*` the RPC layer builds on are
 * marked "@private Internal code, does not follow semantic versioning" (their types are checked
 * by tsc; only the values can go missing at run time). The rest of the code imports them from here.
 *
 * It sits at the bottom of the layers (it imports nothing of ours) because the error table in
 * common/ uses Connect's code-to-HTTP-status table too.
 */
import type { EventEmitter } from "node:events";
import { IncomingMessage, Server as HttpServer, ServerResponse } from "node:http";
import type { Http2Server, IncomingHttpHeaders, ServerHttp2Stream } from "node:http2";
import { Socket } from "node:net";
import * as connectProtocol from "@connectrpc/connect/protocol";
import * as connectProtocolConnect from "@connectrpc/connect/protocol-connect";
import * as connectProtocolGrpc from "@connectrpc/connect/protocol-grpc";
import * as connectProtocolGrpcWeb from "@connectrpc/connect/protocol-grpc-web";

// Connect-ES's protocol internals, as the RPC layer, the error table and the metrics use them.
export const {
  compressionNegotiate,
  createMethodSerializationLookup,
  encodeEnvelope,
  envelopeCompress,
  invokeUnaryImplementation,
  validateUniversalHandlerOptions,
} = connectProtocol;
export const { codeFromString, codeToHttpStatus, codeToString, errorToJsonBytes } = connectProtocolConnect;
export const {
  contentTypeProto,
  grpcStatusOk,
  headerAcceptEncoding,
  headerContentType,
  headerEncoding,
  headerGrpcStatus,
  headerTimeout,
  parseTimeout,
  setTrailerStatus,
} = connectProtocolGrpc;
export const { trailerFlag, trailerParse, trailerSerialize } = connectProtocolGrpcWeb;

/** The Connect exports above by module, with the type of value each must be. */
const CONNECT_EXPORTS: Record<string, Record<string, "function" | "string" | "number">> = {
  "@connectrpc/connect/protocol": {
    compressionNegotiate: "function",
    createMethodSerializationLookup: "function",
    encodeEnvelope: "function",
    envelopeCompress: "function",
    invokeUnaryImplementation: "function",
    validateUniversalHandlerOptions: "function",
  },
  "@connectrpc/connect/protocol-connect": { codeFromString: "function", codeToHttpStatus: "function", codeToString: "function", errorToJsonBytes: "function" },
  "@connectrpc/connect/protocol-grpc": {
    contentTypeProto: "string",
    grpcStatusOk: "string",
    headerAcceptEncoding: "string",
    headerContentType: "string",
    headerEncoding: "string",
    headerGrpcStatus: "string",
    headerTimeout: "string",
    parseTimeout: "function",
    setTrailerStatus: "function",
  },
  "@connectrpc/connect/protocol-grpc-web": { trailerFlag: "number", trailerParse: "function", trailerSerialize: "function" },
};

const CONNECT_MODULES: Record<string, object> = {
  "@connectrpc/connect/protocol": connectProtocol,
  "@connectrpc/connect/protocol-connect": connectProtocolConnect,
  "@connectrpc/connect/protocol-grpc": connectProtocolGrpc,
  "@connectrpc/connect/protocol-grpc-web": connectProtocolGrpcWeb,
};

/** The listener Node's h2 server adds for its request listener: it turns streams into compatibility request/response objects. */
const NODE_H2_COMPAT_LISTENER = "onServerStream";
/** The "listening" listener of a node:http server that starts the timer enforcing headersTimeout and requestTimeout. */
const NODE_CONNECTIONS_TRACKING = "setupConnectionsTracking";

/** httpolyglot's two inner servers (private fields of its net.Server). */
export function innerServers(polyglot: object): { http1: HttpServer; http2: Http2Server } {
  const p = polyglot as { _httpServer: HttpServer; _http2Server: Http2Server };
  return { http1: p._httpServer, http2: p._http2Server };
}

type StreamListener = (this: Http2Server, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, ...rest: unknown[]) => void;

/** The 'stream' listener of Node's HTTP/2 compatibility layer on `h2`, found by its function name. */
export function compatStreamListener(h2: EventEmitter): StreamListener | undefined {
  return h2.listeners("stream").find((l) => l.name.includes(NODE_H2_COMPAT_LISTENER)) as StreamListener | undefined;
}

/** Node's own "listening" listener of an HTTP server (the one that starts its connection-tracking timer). */
export function connectionsTrackingListeners(server: HttpServer): (() => void)[] {
  return server.listeners("listening").filter((l) => l.name === NODE_CONNECTIONS_TRACKING) as (() => void)[];
}

/**
 * Undoes httpolyglot's "not stream-base" mark on a plain TCP socket's native handle
 * (src/http/polyglot-server.ts says why); other handles keep it.
 */
export function unmarkStreamBase(socket: unknown): void {
  const handle = (socket as { _handle?: { constructor: { name: string }; isStreamBase?: boolean } | null })._handle;
  if (handle?.constructor.name === "TCP" && Object.hasOwn(handle, "isStreamBase")) delete handle.isStreamBase;
}

/** The response Node is writing (or will write next) on an HTTP/1.1 socket, if any. */
export function responseOn(socket: Socket): ServerResponse | undefined {
  return (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
}

/** What checkInternals looks at; by default the modules this one loaded and fresh Node objects. */
export interface InternalsProbe {
  /** The Connect modules by name. */
  connect?: Record<string, object>;
  /** A polyglot server as createServer made it (with a request listener). */
  server?: object;
  /** A net.Socket that has never connected. */
  socket?: Socket;
}

/**
 * Throws an Error naming every internal listed here that the installed Node, httpolyglot or
 * Connect-ES no longer has. Called once where the server is built (createPolyglotServer); the
 * per-connection ones are checked on a fresh socket and response, which are never used.
 */
export function checkInternals(probe: InternalsProbe = {}): void {
  const missing: string[] = [];
  const modules = probe.connect ?? CONNECT_MODULES;
  for (const [name, exports] of Object.entries(CONNECT_EXPORTS)) {
    const mod = (modules[name] ?? {}) as Record<string, unknown>;
    for (const [key, type] of Object.entries(exports)) {
      if (typeof mod[key] !== type) missing.push(`${name} export ${key} (a ${type})`);
    }
  }
  if (probe.server !== undefined) {
    const { http1, http2 } = innerServers(probe.server);
    if (!(http1 instanceof HttpServer)) missing.push("httpolyglot Server._httpServer (its inner node:http server)");
    else if (connectionsTrackingListeners(http1).length === 0) missing.push(`node:http Server's "listening" listener ${NODE_CONNECTIONS_TRACKING}`);
    const isEmitter = typeof (http2 as { listeners?: unknown } | undefined)?.listeners === "function";
    if (!isEmitter) missing.push("httpolyglot Server._http2Server (its inner node:http2 server)");
    else if (!compatStreamListener(http2)) missing.push(`node:http2 Server's "stream" listener ${NODE_H2_COMPAT_LISTENER}`);
  }
  const socket = probe.socket ?? new Socket();
  if (!("_handle" in socket)) missing.push("net.Socket._handle");
  const res = new ServerResponse(new IncomingMessage(socket));
  res.assignSocket(socket);
  if (responseOn(socket) !== res) missing.push("net.Socket._httpMessage (the response an HTTP/1.1 socket is writing)");
  res.detachSocket(socket);
  if (missing.length > 0) {
    const what = missing.join("; ");
    throw new Error(
      `Internals this service relies on are missing (after an upgrade of Node, httpolyglot or Connect-ES?): ${what}. See src/common/internals.ts.`,
    );
  }
}
