/**
 * The start-up self-check of the Node, httpolyglot and Connect-ES internals the service relies on
 * (src/common/internals.ts): it passes on the installed versions, and names what is missing when
 * an upgrade took one away.
 */
import * as connectProtocol from "@connectrpc/connect/protocol";
import * as connectProtocolConnect from "@connectrpc/connect/protocol-connect";
import * as connectProtocolGrpc from "@connectrpc/connect/protocol-grpc";
import * as connectProtocolGrpcWeb from "@connectrpc/connect/protocol-grpc-web";
import { createServer } from "@httptoolkit/httpolyglot";
import { describe, expect, it } from "vitest";
import { checkInternals } from "../../src/common/internals.js";
import { DEFAULT_CONNECTION_LIMITS } from "../../src/config.js";
import { createPolyglotServer } from "../../src/http/polyglot-server.js";

const connect = {
  "@connectrpc/connect/protocol": connectProtocol,
  "@connectrpc/connect/protocol-connect": connectProtocolConnect,
  "@connectrpc/connect/protocol-grpc": connectProtocolGrpc,
  "@connectrpc/connect/protocol-grpc-web": connectProtocolGrpcWeb,
};

describe("checkInternals", () => {
  it("passes on the installed Node, httpolyglot and Connect-ES", () => {
    expect(() => checkInternals()).not.toThrow();
    expect(() => checkInternals({ server: createServer({}, () => undefined) })).not.toThrow();
    // And where the service builds its server.
    const server = createPolyglotServer(() => undefined, { limits: DEFAULT_CONNECTION_LIMITS, bodyLimit: 1024 });
    expect(server.serveStreams).toBeTypeOf("function");
  });

  it("names a Connect export that is gone", () => {
    const { errorToJsonBytes: _gone, ...rest } = connectProtocolConnect;
    expect(() => checkInternals({ connect: { ...connect, "@connectrpc/connect/protocol-connect": rest } })).toThrow(
      /@connectrpc\/connect\/protocol-connect export errorToJsonBytes/,
    );
  });

  it("names httpolyglot's inner server that is gone", () => {
    const server = createServer({}, () => undefined) as unknown as Record<string, unknown>;
    expect(() => checkInternals({ server: { _httpServer: server._httpServer } })).toThrow(/httpolyglot Server\._http2Server/);
    expect(() => checkInternals({ server: { _http2Server: server._http2Server } })).toThrow(/httpolyglot Server\._httpServer/);
  });

  it("names Node's listener that is gone", () => {
    const server = createServer({}, () => undefined) as unknown as { _http2Server: NodeJS.EventEmitter };
    server._http2Server.removeAllListeners("stream");
    expect(() => checkInternals({ server })).toThrow(/node:http2 Server's "stream" listener onServerStream/);
  });
});
