import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";

/** A request a receiver got. */
export interface Received {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  /** performance.now() when the request's body had arrived. */
  at: number;
  /** The TLS server name (SNI) the client asked for; undefined over plain HTTP or without SNI. */
  servername?: string;
}

/** What a receiver answers: a status code, "hang" (never), or a status after a delay. */
export type Answer = number | "hang" | { status: number; afterMs: number };

/** A webhook receiver on 127.0.0.1; `answer` decides each response. */
export interface Receiver {
  port: number;
  url(path: string, host?: string): string;
  requests: Received[];
  answer: (n: number, req: Received) => Answer;
  /** Answers every delayed response now. */
  releaseHeld(): void;
  close(): Promise<void>;
}

/** Starts an HTTP receiver, or an HTTPS one with `tls` (key and certificate, PEM). */
export async function startReceiver(opts: { tls?: { key: string; cert: string } } = {}): Promise<Receiver> {
  const requests: Received[] = [];
  const held = new Map<NodeJS.Timeout, () => void>();
  const receiver: Partial<Receiver> = { requests, answer: () => 200 };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const received: Received = {
        method: req.method!,
        url: req.url!,
        headers: req.headers as Record<string, string>,
        body: Buffer.concat(chunks).toString("utf8"),
        at: performance.now(),
        servername: (req.socket as Partial<TLSSocket>).servername || undefined,
      };
      requests.push(received);
      const a = receiver.answer!(requests.length, received);
      if (a === "hang") return; // accepted, never answered
      const reply = (status: number) => res.writeHead(status, { "content-type": "text/plain" }).end(status >= 200 && status < 300 ? "ok" : "nope");
      if (typeof a === "number") return reply(a);
      const answerNow = () => {
        clearTimeout(timer);
        held.delete(timer);
        if (!res.destroyed) reply(a.status);
      };
      const timer = setTimeout(answerNow, a.afterMs);
      held.set(timer, answerNow);
    });
  };
  const server = opts.tls ? createTlsServer({ key: opts.tls.key, cert: opts.tls.cert }, handler) : createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  const scheme = opts.tls ? "https" : "http";
  return Object.assign(receiver, {
    port,
    url: (path: string, host = "127.0.0.1") => `${scheme}://${host}:${port}${path}`,
    releaseHeld() {
      for (const answerNow of [...held.values()]) answerNow();
    },
    async close() {
      for (const t of held.keys()) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  }) as Receiver;
}
