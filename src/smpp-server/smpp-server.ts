/**
 * The SMPP server (issue 44, docs/smpp-server.md): customers' SMPP clients bind to it as ESMEs.
 * Plain TCP on SMPP_SERVER_PORT, TLS on SMPP_SERVER_TLS_PORT. Built with Node's net and tls
 * servers and the `smpp` package's PDU encoder rather than the package's createServer: its
 * session stops reading for good after a PDU it cannot parse and reads without bound; here each
 * connection is an SmppSession (smpp-session.ts). The binds of every process are rows of
 * `smpp_binds`, renewed by a heartbeat: MaxBinds counts them all, and the operator lists them.
 */
import { createServer as createTcpServer, type AddressInfo, type Server, type Socket } from "node:net";
import { createServer as createTlsServer } from "node:tls";
import { readFileSync } from "node:fs";
import type { ServiceImpl } from "@connectrpc/connect";
import type { MikroORM } from "@mikro-orm/sql";
import type { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import type { AuthFailureGuard } from "../accounts/auth-failures.js";
import { closeSmppBind, heartbeatSmppBinds, openSmppBind, SMPP_BIND_HEARTBEAT_MS, SMPP_BIND_STALE_MS } from "../accounts/smpp-store.js";
import type { Clock } from "../common/clock.js";
import type { SmppServerConfig } from "../config.js";
import { SmppSession } from "./smpp-session.js";
import { DEFAULT_WINDOW, type SmppLog } from "./smpp-session-settings.js";
import { createSmppForwarder } from "./smpp-forwarder.js";

/** Connections one server port takes at once (bound or not); more are refused by the kernel's backlog. */
export const MAX_CONNECTIONS = 1000;

export interface SmppServerDeps {
  orm: MikroORM;
  clock: Clock;
  /** The served MessagingService: submit_sm is its SendMessage, query_sm its GetMessage, cancel_sm its CancelMessage. */
  messaging: ServiceImpl<typeof MessagingService>;
  /** The API's failed-guess limits (the same guard): failed binds count against them. */
  failures?: AuthFailureGuard;
  config: SmppServerConfig;
  /** Listen address (HOST). */
  host?: string;
  log: SmppLog;
  /** Requests in flight per bind; default DEFAULT_WINDOW. */
  window?: number;
}

export interface SmppServer {
  /** Opens the configured ports; resolves with the ports bound (port 0 in the config picks a free one). */
  listen(): Promise<{ port?: number; tlsPort?: number }>;
  /** The sessions open now. */
  sessions(): readonly SmppSession[];
  /** Binds open by account and mode, and submit_sm answered by account and outcome, for /metrics (ops/metrics.ts SmppServerStats). */
  stats(): {
    binds: { account: string; mode: string; count: number }[];
    submits: { account: string; outcome: "accepted" | "refused"; count: number }[];
  };
  /** Stops accepting, ends every bind cleanly (in-flight answered, unbind sent), closes the ports. */
  close(waitMs?: number): Promise<void>;
}

export function createSmppServer(deps: SmppServerDeps): SmppServer {
  const sessions = new Set<SmppSession>();
  const servers: Server[] = [];
  let heartbeat: NodeJS.Timeout | undefined;
  let stopped = false;
  const forwarder = createSmppForwarder({ orm: deps.orm, clock: deps.clock, log: deps.log, sessions: () => [...sessions] });

  /** submit_sm answered since the start, by account: [accepted, refused]. */
  const submits = new Map<string, [number, number]>();
  const sessionDeps = {
    onSubmitAnswered(accountSid: string, accepted: boolean) {
      const c = submits.get(accountSid) ?? [0, 0];
      c[accepted ? 0 : 1]++;
      submits.set(accountSid, c);
    },
    orm: deps.orm,
    clock: deps.clock,
    messaging: deps.messaging,
    failures: deps.failures,
    log: deps.log,
    window: deps.window ?? DEFAULT_WINDOW,
    async openBind(session: SmppSession) {
      const b = session.bound!;
      const now = deps.clock.now();
      return openSmppBind(
        deps.orm.em.fork(),
        { bindId: b.bindId, accountSid: b.accountSid, systemId: b.systemId, address: session.address, mode: b.mode, since: b.since, inFlight: 0 },
        now,
        new Date(now.getTime() - SMPP_BIND_STALE_MS),
      ).then((ok) => {
        // What waited for the account's binds goes now, not at the next poll.
        if (ok && b.mode !== "Transmitter") setImmediate(() => forwarder.wake());
        return ok;
      });
    },
    closeBind(session: SmppSession) {
      const id = session.bound?.bindId;
      if (!id) return;
      closeSmppBind(deps.orm.em.fork(), id).catch((err: unknown) => deps.log.warn({ err, bindId: id }, "SMPP bind row not deleted (it expires)"));
    },
  };

  const accept = (socket: Socket) => {
    if (stopped) return void socket.destroy();
    const session = new SmppSession(socket, sessionDeps);
    sessions.add(session);
    socket.on("close", () => sessions.delete(session));
  };

  async function beat(): Promise<void> {
    const live = [...sessions].filter((s) => s.bound).map((s) => ({ bindId: s.bound!.bindId, inFlight: s.inFlight }));
    await heartbeatSmppBinds(deps.orm.em.fork(), live, deps.clock.now());
  }

  function open(server: Server, port: number): Promise<number> {
    server.maxConnections = MAX_CONNECTIONS;
    servers.push(server);
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, deps.host ?? "0.0.0.0", () => {
        server.off("error", reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  }

  return {
    async listen() {
      const out: { port?: number; tlsPort?: number } = {};
      if (deps.config.port !== undefined) out.port = await open(createTcpServer(accept), deps.config.port);
      if (deps.config.tlsPort !== undefined) {
        const tls = createTlsServer({ cert: readFileSync(deps.config.tlsCertFile!), key: readFileSync(deps.config.tlsKeyFile!) }, accept);
        out.tlsPort = await open(tls, deps.config.tlsPort);
      }
      heartbeat = setInterval(() => {
        beat().catch((err: unknown) => deps.log.warn({ err }, "SMPP bind heartbeat failed"));
      }, SMPP_BIND_HEARTBEAT_MS);
      heartbeat.unref();
      forwarder.start();
      deps.log.info(out, "SMPP server listening");
      return out;
    },
    sessions: () => [...sessions],
    stats() {
      const binds = new Map<string, { account: string; mode: string; count: number }>();
      for (const s of sessions) {
        if (!s.bound) continue;
        const key = `${s.bound.accountSid}|${s.bound.mode}`;
        const b = binds.get(key) ?? { account: s.bound.accountSid, mode: s.bound.mode, count: 0 };
        b.count++;
        binds.set(key, b);
      }
      return {
        binds: [...binds.values()],
        submits: [...submits].flatMap(([account, [ok, refused]]) => [
          { account, outcome: "accepted" as const, count: ok },
          { account, outcome: "refused" as const, count: refused },
        ]),
      };
    },
    async close(waitMs = 5000) {
      stopped = true;
      if (heartbeat) clearInterval(heartbeat);
      await forwarder.stop();
      const closed = Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      await Promise.all([...sessions].map((s) => s.stop(waitMs)));
      for (const s of sessions) s.socket.destroy();
      await closed;
    },
  };
}
