/**
 * Database outage (issue 7, item 3). The real service process (src/main.ts, simulator carrier)
 * runs on a private PostgreSQL cluster started for this test (test/support/private-postgres.ts;
 * never the shared server on 5432). Under load from REST, Connect and gRPC clients, PostgreSQL is
 * stopped with `pg_ctl stop -m immediate` (a crash: connections cut, no shutdown checkpoint), left
 * down for a while, and started again. Asserted: during the outage every request answers quickly
 * with 503 / ServiceUnavailable (REST) or Unavailable / ServiceUnavailable (RPC), never hangs past
 * a bound, and /readyz says 503; afterwards the same process recovers by itself within seconds;
 * no message that got a 200 is lost, and the delivery engine's loops carried on (every one of them
 * is Delivered). Runs in `npm test`'s PostgreSQL pass (PGlite is embedded in the process: it
 * cannot have an outage of its own); skipped only when the server binaries are missing and this
 * run cannot install them (scripts/system-packages.sh names them).
 */
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { toResponseStatus } from "../../src/common/errors.js";
import { createOrm } from "../../src/db/orm.js";
import { entities } from "../../src/entities.js";
import { isDatabaseUnavailable } from "../../src/common/pg-errors.js";
import { freePort } from "../support/kannel.js";
import { dbKind } from "../support/db.js";
import { type PrivatePostgres, startPrivatePostgres } from "../support/private-postgres.js";
import { type Service, startService } from "../support/service.js";
import { without } from "../support/system-packages.js";

const ADMIN_TOKEN = "outage-test-admin-token-0123456789abcdef";
const OUTAGE_MS = 8000;
/** No request may take longer than this while the database is down (the pool's connect timeout is 5 s). */
const LATENCY_BOUND_MS = 6000;
/** The service must be serving again this soon after PostgreSQL accepts connections. */
const RECOVERY_BOUND_MS = 15_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One request and its answer, on the test's clock (performance.now()). */
interface Call {
  kind: "rest" | "connect" | "grpc" | "readyz";
  start: number;
  end: number;
  /** HTTP status (REST, readyz), or the Connect code name (RPC): "ok" on success; "network" when no answer came. */
  outcome: string;
  /** The documented ErrorCode (REST ResponseStatus.ErrorCode, RPC ErrorInfo reason). */
  errorCode: string;
  sid?: string;
  /** The recipient (unique per send): its simulated handset shows what the carrier delivered. */
  to?: string;
  /** REST: the Retry-After header. */
  retryAfter?: string | null;
}

describe("the database's error classification", () => {
  it("calls refused, dropped and timed-out connections and a server going away ServiceUnavailable, and nothing else", () => {
    const unavailable = [
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }),
      new Error("Connection terminated unexpectedly"),
      new Error("timeout exceeded when trying to connect"),
      Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }),
      Object.assign(new Error("the database system is starting up"), { code: "57P03" }),
      Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" }),
      new Error("wrapped", { cause: Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }) }),
    ];
    for (const e of unavailable) {
      expect(isDatabaseUnavailable(e), e.message).toBe(true);
      const { httpStatus, status } = toResponseStatus(e);
      expect({ httpStatus, errorCode: status.errorCode }).toEqual({ httpStatus: 503, errorCode: "ServiceUnavailable" });
    }
    for (const e of [new Error("boom"), Object.assign(new Error("duplicate key"), { code: "23505" }), Object.assign(new Error("syntax"), { code: "42601" })]) {
      expect(isDatabaseUnavailable(e), e.message).toBe(false);
      expect(toResponseStatus(e)).toMatchObject({ httpStatus: 500, status: { errorCode: "InternalError" } });
    }
  });
});

describe.skipIf(dbKind() !== "postgres" || without("postgresServer"))("database outage: PostgreSQL stopped under load (private cluster)", () => {
  it("answers 503 ServiceUnavailable fast while PostgreSQL is down, recovers by itself, loses no 200", { timeout: 240_000 }, async () => {
    let pg: PrivatePostgres | undefined;
    let service: Service | undefined;
    let grpcSessions: Http2SessionManager | undefined;
    let recordRetries = 0;
    let workerTickFailures = 0;
    try {
      pg = await startPrivatePostgres();
      const admin = await createOrm({ entities, databaseUrl: pg.url(), poolMax: 2 });
      await admin.em.fork().execute(`create database switchboard`);
      await admin.close(true);
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      service = await startService({
        port,
        env: {
          DATABASE_URL: pg.url("switchboard"),
          SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN,
          CARRIER: "simulator",
          SIMULATOR_REPORT_DELAY_MS: "50",
          LOG_LEVEL: "warn",
          // Five clients retrying fast 503s would drain the per-account bucket (50/s, burst 500)
          // and turn the documented 503 into a 429: this test is about the outage, not the limit.
          SEND_RATE_LIMIT: "off",
        },
        onLine: (line) => {
          if (line.includes('"could not record a submission the carrier accepted; retrying"')) recordRetries++;
          if (line.includes('"worker tick failed"')) workerTickFailures++;
        },
      });
      const pid = service.pid;

      const adminCall = async (path: string, body: object) => {
        const res = await fetch(`${base}/admin/v1/${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        expect(res.status).toBe(200);
        return (await res.json()) as Record<string, string>;
      };
      const account = await adminCall("Accounts", { Name: "Outage", SmsEnabled: true });
      const property = await adminCall(`Accounts/${account.AccountSid}/Properties`, { Name: "Site", SmsEnabled: true });
      const owned = "+447700900555";
      await adminCall("Numbers", { Number: owned, AccountSid: account.AccountSid });
      const auth = `Basic ${Buffer.from(`${account.AccountSid}:${account.Token}`).toString("base64")}`;
      const withAuth: Interceptor = (next) => (req) => {
        req.header.set("authorization", auth);
        return next(req);
      };
      grpcSessions = new Http2SessionManager(base);
      const rpc: Record<"connect" | "grpc", Client<typeof MessagingService>> = {
        connect: createClient(MessagingService, createConnectTransport({ baseUrl: base, httpVersion: "1.1", interceptors: [withAuth] })),
        grpc: createClient(MessagingService, createGrpcTransport({ baseUrl: base, sessionManager: grpcSessions, interceptors: [withAuth] })),
      };

      const calls: Call[] = [];
      let seq = 0;
      const to = () => `+447911${String(200_000 + ++seq)}`;
      const restSend = async (): Promise<Call> => {
        const start = performance.now();
        const To = to();
        try {
          const res = await fetch(`${base}/v2/Properties/${property.PropertySid}/Messages`, {
            method: "POST",
            headers: { authorization: auth, "content-type": "application/json" },
            body: JSON.stringify({ From: owned, To, Text: "outage" }),
            signal: AbortSignal.timeout(30_000),
          });
          const json = (await res.json()) as { MessageSid?: string; ResponseStatus?: { ErrorCode: string } };
          return {
            kind: "rest",
            start,
            end: performance.now(),
            outcome: String(res.status),
            errorCode: json.ResponseStatus?.ErrorCode ?? "",
            sid: json.MessageSid,
            to: To,
            retryAfter: res.headers.get("retry-after"),
          };
        } catch {
          return { kind: "rest", start, end: performance.now(), outcome: "network", errorCode: "" };
        }
      };
      const rpcSend = async (kind: "connect" | "grpc"): Promise<Call> => {
        const start = performance.now();
        const To = to();
        try {
          const m = await rpc[kind].sendMessage({ propertySid: property.PropertySid, from: owned, to: To, text: "outage" }, { timeoutMs: 30_000 });
          return { kind, start, end: performance.now(), outcome: "ok", errorCode: "", sid: m.messageSid, to: To };
        } catch (e) {
          const err = ConnectError.from(e);
          const reason = err.findDetails(ErrorInfoSchema)[0]?.reason ?? "";
          return { kind, start, end: performance.now(), outcome: Code[err.code], errorCode: reason };
        }
      };
      const readyz = async (): Promise<Call> => {
        const start = performance.now();
        const status = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(30_000) }).then(
          (r) => String(r.status),
          () => "network",
        );
        return { kind: "readyz", start, end: performance.now(), outcome: status, errorCode: "" };
      };

      let loading = true;
      const loop = async (fn: () => Promise<Call>, pauseMs: number) => {
        while (loading) {
          calls.push(await fn());
          await sleep(pauseMs);
        }
      };
      const loops = [
        loop(restSend, 20),
        loop(restSend, 20),
        loop(restSend, 20),
        loop(() => rpcSend("connect"), 20),
        loop(() => rpcSend("grpc"), 20),
        loop(readyz, 100),
      ];

      await sleep(3000);
      const stopping = performance.now();
      await pg.stop("immediate");
      const down = performance.now();
      await sleep(OUTAGE_MS);
      const healthz = await fetch(`${base}/healthz`).then((r) => r.status);
      const restarting = performance.now();
      await pg.start();
      const up = performance.now();
      // Serving again: the first send started after PostgreSQL came back that got a 200, and /readyz.
      const recovered = async (kind: Call["kind"]) => {
        for (;;) {
          const c = calls.find((x) => x.kind === kind && x.start >= up && (x.outcome === "200" || x.outcome === "ok"));
          if (c) return c.end - up;
          if (performance.now() - up > RECOVERY_BOUND_MS + 5000) return Infinity;
          await sleep(50);
        }
      };
      const [restRecovery, readyRecovery, connectRecovery, grpcRecovery] = await Promise.all([
        recovered("rest"),
        recovered("readyz"),
        recovered("connect"),
        recovered("grpc"),
      ]);
      await sleep(3000);
      loading = false;
      await Promise.all(loops);

      // Every 200 is stored and, the dispatcher having carried on, Delivered.
      const answered = calls.filter((c) => c.sid !== undefined);
      const pending = new Set(answered.map((c) => c.sid!));
      const lost: string[] = [];
      const lastStatus = new Map<string, string>();
      const deadline = performance.now() + 60_000;
      while (pending.size > 0 && performance.now() < deadline) {
        for (const sid of [...pending]) {
          const res = await fetch(`${base}/v2/Messages/${sid}`, { headers: { authorization: auth } });
          if (res.status === 404) {
            lost.push(sid);
            pending.delete(sid);
          } else if (res.status === 200) {
            const status = ((await res.json()) as { Status: string }).Status;
            lastStatus.set(sid, status);
            if (status === "Delivered") pending.delete(sid);
          }
        }
        if (pending.size > 0) await sleep(500);
      }

      // The simulated network got each 200'd message exactly once: a submission whose recording
      // failed while PostgreSQL was down was recorded once it came back, not submitted again.
      const handsetCounts: number[] = [];
      for (const c of answered) {
        const res = await fetch(`${base}/admin/v1/Simulator/Handsets/${c.to!.slice(1)}/Messages`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
        const json = (await res.json()) as { Messages: { MessageSid: string }[] };
        handsetCounts.push(json.Messages.filter((m) => m.MessageSid === c.sid).length);
      }

      // While down: requests that started after the stop completed and ended before the restart began.
      const during = calls.filter((c) => c.start >= down && c.end <= restarting);
      const sends = during.filter((c) => c.kind !== "readyz");
      const worst = (cs: Call[]) => Math.round(Math.max(0, ...cs.map((c) => c.end - c.start)));
      const tally = (cs: Call[]) =>
        cs.reduce<Record<string, number>>(
          (acc, c) => ((acc[`${c.kind} ${c.outcome} ${c.errorCode}`.trim()] = (acc[`${c.kind} ${c.outcome} ${c.errorCode}`.trim()] ?? 0) + 1), acc),
          {},
        );
      const figures = {
        requests: calls.length,
        answered200: answered.length,
        outageMs: Math.round(restarting - down),
        stopMs: Math.round(down - stopping),
        pgStartMs: Math.round(up - restarting),
        duringOutage: tally(during),
        worstLatencyDuringOutageMs: { sends: worst(sends), readyz: worst(during.filter((c) => c.kind === "readyz")) },
        recoveryAfterPostgresUpMs: {
          rest: Math.round(restRecovery),
          connect: Math.round(connectRecovery),
          grpc: Math.round(grpcRecovery),
          readyz: Math.round(readyRecovery),
        },
        answersAfterRestart: tally(calls.filter((c) => c.start >= up)),
        messagesChecked: answered.length,
        lost: lost.length,
        handsetDuplicates: handsetCounts.filter((n) => n > 1).length,
        submissionRecordRetries: recordRetries,
        workerTickFailuresLogged: workerTickFailures,
        notDelivered: [...pending].map((sid) => lastStatus.get(sid)),
      };
      console.log(`[db-outage] ${JSON.stringify(figures)}`);

      expect(
        calls.filter((c) => c.end < stopping).every((c) => c.outcome === "200" || c.outcome === "ok"),
        "before the outage everything succeeds",
      ).toBe(true);
      expect(sends.length).toBeGreaterThan(20);
      // The documented answer, and only it, on every transport.
      for (const c of sends) {
        if (c.kind === "rest")
          expect({ outcome: c.outcome, errorCode: c.errorCode, retryAfter: c.retryAfter }).toEqual({
            outcome: "503",
            errorCode: "ServiceUnavailable",
            retryAfter: "2",
          });
        else expect({ outcome: c.outcome, errorCode: c.errorCode }).toEqual({ outcome: "Unavailable", errorCode: "ServiceUnavailable" });
      }
      expect(during.filter((c) => c.kind === "readyz").length).toBeGreaterThan(5);
      expect(during.filter((c) => c.kind === "readyz").every((c) => c.outcome === "503")).toBe(true);
      expect(healthz, "the process itself stays alive").toBe(200);
      expect(worst(during)).toBeLessThan(LATENCY_BOUND_MS);
      for (const ms of [restRecovery, readyRecovery, connectRecovery, grpcRecovery]) expect(ms).toBeLessThan(RECOVERY_BOUND_MS);
      // Around the stop and the restart a request may succeed or get the same 503; nothing else.
      expect(calls.filter((c) => !["200", "ok", "503", "Unavailable"].includes(c.outcome)).map((c) => `${c.kind} ${c.outcome}`)).toEqual([]);
      expect(lost, "200'd messages missing").toEqual([]);
      expect([...pending], "200'd messages not Delivered").toEqual([]);
      expect(handsetCounts.filter((n) => n !== 1).length, "200'd messages the simulated handset did not get exactly once").toBe(0);
      expect(service.pid).toBe(pid);
      expect(await Promise.race([service.exited.then(() => "exited"), sleep(10).then(() => "running")])).toBe("running");
    } catch (e) {
      const diag = `service output:\n${service?.output().slice(-4000) ?? ""}\npostgres log:\n${((await pg?.log()) ?? "").slice(-3000)}`;
      throw new Error(`${(e as Error).message}\n${diag}`, { cause: e });
    } finally {
      grpcSessions?.abort();
      await service?.kill("SIGKILL");
      await pg?.dispose();
    }
  });
});
