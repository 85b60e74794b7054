/**
 * The gRPC floors, served by the bare server's process beside its Fastify routes: the least a
 * gRPC Send SMS can cost on this stack, so that the gap between gRPC and REST can be split into
 * what HTTP/2 costs, what Connect costs and what is Switchboard's own.
 *
 * - h2 floor: a plain `node:http2` h2c server whose 'stream' listener reads the length-prefixed
 *   request, decodes it with the generated schema (`fromBinary`), stores it through the same group
 *   commit as the Fastify floor, and answers a framed `toBinary` Message with `grpc-status: 0`
 *   in the trailers. No Connect, no Node compatibility layer.
 * - Connect floor: the same work as a Connect method, served by `connectNodeAdapter` (the stock
 *   Connect-on-Node path: Node's HTTP/2 compatibility layer, connect-node's adapter, Connect's
 *   gRPC handler) on an h2c server; a router with SendMessage only, no interceptors, no validation.
 */
import { randomBytes } from "node:crypto";
import { createServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { type Message, MessageSchema, MessagingService, type SendMessageRequest, SendMessageRequestSchema } from "../gen/switchboard/v2/messaging_pb.js";

/** Stores one send (sid, from, to, text) through the floor's group commit; resolves once committed. */
export type InsertBatched = (values: string[]) => Promise<void>;

const SEND_PATH = `/${MessagingService.typeName}/${MessagingService.method.sendMessage.name}`;

/** The floor's whole send: a Sid, the row in the next group commit, the answer (as the Fastify floor's). */
async function send(req: SendMessageRequest, insert: InsertBatched): Promise<Message> {
  const sid = `MG${randomBytes(15).toString("hex").toUpperCase()}`;
  await insert([sid, req.from, req.to, req.text]);
  return create(MessageSchema, { messageSid: sid, from: req.from, to: req.to, text: req.text });
}

function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

function fail(stream: ServerHttp2Stream, status: number, message: string): void {
  if (stream.closed) return;
  stream.respond(
    { ":status": 200, "content-type": "application/grpc+proto", "grpc-status": String(status), "grpc-message": encodeURIComponent(message) },
    { endStream: true },
  );
}

/** One unary gRPC call on a native stream: read the envelope, decode, store, answer. */
function h2Call(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, insert: InsertBatched): void {
  stream.on("error", () => undefined); // a reset stream: its 'close' ends it
  if (headers[":method"] !== "POST" || headers[":path"] !== SEND_PATH) {
    stream.respond({ ":status": 404 }, { endStream: true });
    return;
  }
  const chunks: Buffer[] = [];
  stream.on("data", (c: Buffer) => chunks.push(c));
  stream.on("end", () => {
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    if (body.length < 5 || body[0] !== 0 || body.readUInt32BE(1) !== body.length - 5) return fail(stream, 3, "one uncompressed envelope expected");
    let req: SendMessageRequest;
    try {
      req = fromBinary(SendMessageRequestSchema, body.subarray(5));
    } catch {
      return fail(stream, 3, "unparsable request");
    }
    send(req, insert).then(
      (answer) => {
        if (stream.closed) return;
        stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(frame(toBinary(MessageSchema, answer)));
      },
      () => fail(stream, 13, "insert failed"),
    );
  });
}

function listen(server: Http2Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
}

/** Starts both floors on h2c (`h2Port`, `connectPort`); they live as long as the process. */
export async function startGrpcFloors(insert: InsertBatched, h2Port: number, connectPort: number): Promise<void> {
  const h2 = createServer();
  h2.on("stream", (stream, headers) => h2Call(stream, headers, insert));
  const routes = (router: ConnectRouter) => router.rpc(MessagingService.method.sendMessage, (req) => send(req, insert));
  const connect = createServer(connectNodeAdapter({ routes }));
  await listen(h2, h2Port);
  await listen(connect, connectPort);
}
