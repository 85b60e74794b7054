/**
 * SIGTERM in the middle of a burst of sends, against the real service process: hundreds of
 * concurrent POST /v2/…/Messages over several HTTP/1.1 keep-alive connections and two h2c
 * sessions. Every answer is recorded. The process must exit 0 within a few seconds; no request
 * may get a 5xx (a refused or reset connection is fine: that request was never accepted); every
 * send answered 200 must be in the database, and exactly those (an accepted request is answered);
 * the dispatcher must have finished its round (no message left claimed); both h2 sessions must
 * get GOAWAY; and after a restart on the same database every 200's message is there.
 */
import { Agent, request as httpRequest, type IncomingMessage } from "node:http";
import { connect as http2Connect, type ClientHttp2Session } from "node:http2";
import { connect as tcpConnect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic } from "../support/harness.js";
import { freePort } from "../support/kannel.js";
import { killService, serviceDatabase, startService, stopService, waitForOutput, type Service, type ServiceDatabase } from "../support/service.js";

const ADMIN = `ops-admin-${"k".repeat(24)}`;
const H1_CONNECTIONS = 6;
const H1_REQUESTS = 360;
const H2_SESSIONS = 2;
const H2_CONCURRENCY = 16;
const H2_REQUESTS_EACH = 120;
/** SIGTERM goes out when this many answers have come back. */
const SIGTERM_AFTER = 150;
/** "Within a few seconds": generous, since six other test runs share two cores. */
const EXIT_WITHIN_MS = 8000;

/** What became of one send. */
interface Outcome {
  text: string;
  via: "h1" | "h2";
  status?: number;
  sid?: string;
  /** A connection-level failure (no HTTP answer). */
  error?: string;
}

let db: ServiceDatabase;
let port: number;
const services: Service[] = [];

beforeAll(async () => {
  db = await serviceDatabase();
  port = await freePort();
}, 180_000);

afterAll(async () => {
  for (const s of services) await killService(s);
  await db?.drop();
});

async function start(logLevel = "info"): Promise<Service> {
  const svc = await startService({
    port,
    env: { DATABASE_URL: db.url, SWITCHBOARD_ADMIN_TOKEN: ADMIN, LOG_LEVEL: logLevel, SEND_RATE_LIMIT: "off" },
    waitReady: false,
  });
  services.push(svc);
  await waitForOutput(svc, /"msg":"Switchboard listening"/);
  return svc;
}

async function operator(path: string, body: object): Promise<any> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  return res.json();
}

/** Records an HTTP answer: status, and the MessageSid of a 200. */
function answered(o: Outcome, status: number, body: string): void {
  o.status = status;
  if (status === 200) o.sid = (JSON.parse(body) as { MessageSid: string }).MessageSid;
}

function errorName(e: unknown): string {
  const err = e as { code?: string; message?: string };
  return err.code ?? err.message ?? String(e);
}

/** Whether a new TCP connection to the port is refused right now. */
function refused(): Promise<boolean> {
  return new Promise((done) => {
    const socket = tcpConnect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      done(false);
    });
    socket.once("error", (e: NodeJS.ErrnoException) => done(e.code === "ECONNREFUSED"));
  });
}

describe("SIGTERM with requests in flight", () => {
  it(
    "an HTTP/1.1 and an h2 request whose bodies are still arriving get their 200; meanwhile new connections are refused and the h2 session gets GOAWAY",
    { timeout: 300_000 },
    async () => {
      const svc = await start("debug");
      const acc = await operator("/admin/v1/Accounts", { Name: "In flight" });
      const prop = await operator(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "In flight" });
      const auth = basic(acc.AccountSid, acc.Token);
      const path = `/v2/Properties/${prop.PropertySid}/Messages`;
      const payload = (text: string) => JSON.stringify({ From: "Acme", To: "+447911200001", Text: text });
      const received = (id: string) => waitForOutput(svc, new RegExp(`"requestId":"${id}".*"msg":"request received"`));

      // HTTP/1.1 on a keep-alive connection: headers and half the body now, the rest after SIGTERM.
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const h1Body = payload("in flight over HTTP/1.1");
      const h1Req = httpRequest({
        agent,
        host: "127.0.0.1",
        port,
        method: "POST",
        path,
        headers: { authorization: auth, "content-type": "application/json", "content-length": Buffer.byteLength(h1Body), "x-request-id": "slow-h1" },
      });
      const h1Res = new Promise<{ res: IncomingMessage; body: string }>((done, fail) => {
        h1Req.on("response", (res) => {
          let body = "";
          res.setEncoding("utf8").on("data", (d: string) => (body += d));
          res.on("end", () => done({ res, body }));
          res.on("error", fail);
        });
        h1Req.on("error", fail);
      });
      h1Req.write(h1Body.slice(0, 20));

      // h2c: the same over a stream of an HTTP/2 session.
      const session = http2Connect(`http://127.0.0.1:${port}`);
      const goaway = new Promise<number>((done) => session.once("goaway", (code: number) => done(code)));
      const h2Body = payload("in flight over h2");
      const stream = session.request({ ":method": "POST", ":path": path, authorization: auth, "content-type": "application/json", "x-request-id": "slow-h2" });
      const h2Res = new Promise<{ status: number; body: string }>((done, fail) => {
        let status = 0;
        let body = "";
        stream.on("response", (h) => (status = Number(h[":status"])));
        stream.setEncoding("utf8").on("data", (d: string) => (body += d));
        stream.on("end", () => done({ status, body }));
        stream.on("error", fail);
      });
      stream.write(h2Body.slice(0, 20));

      await Promise.all([received("slow-h1"), received("slow-h2")]);
      const stopped = stopService(svc);
      await waitForOutput(svc, /"msg":"shutting down"/, 10_000);
      expect(await goaway, "GOAWAY error code").toBe(0);
      let refusedNow = false;
      for (let i = 0; i < 50 && !refusedNow; i++) {
        refusedNow = await refused();
        if (!refusedNow) await new Promise((r) => setTimeout(r, 20));
      }
      expect(refusedNow, "a new connection is refused while requests are in flight").toBe(true);

      h1Req.end(h1Body.slice(20));
      stream.end(h2Body.slice(20));
      const [one, two] = await Promise.all([h1Res, h2Res]);
      expect(one.res.statusCode, one.body).toBe(200);
      expect(one.res.headers.connection).toBe("close");
      expect(one.res.headers["x-request-id"]).toBe("slow-h1");
      expect(two.status, two.body).toBe(200);
      const sids = [JSON.parse(one.body).MessageSid, JSON.parse(two.body).MessageSid];
      agent.destroy();
      session.destroy();

      const end = await stopped;
      console.log("in-flight shutdown:", JSON.stringify({ exit: end, db: db.kind }));
      expect(end.code, svc.stderr()).toBe(0);
      expect(end.ms).toBeLessThan(EXIT_WITHIN_MS);
      const orm = await db.open();
      try {
        const rows = await orm.em.fork().execute<{ sid: string }[]>("select sid from messages where property_sid = ? order by sid", [prop.PropertySid]);
        expect(rows.map((r) => r.sid)).toEqual([...sids].sort());
      } finally {
        await orm.close(true);
      }
    },
  );
});

describe("SIGTERM with a client that never finishes its request", () => {
  it("does not hold the shutdown: after the 5 s drain its connections are cut and the process exits 0", { timeout: 300_000 }, async () => {
    const svc = await start("debug");
    const acc = await operator("/admin/v1/Accounts", { Name: "Stuck" });
    const prop = await operator(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Stuck" });
    const auth = basic(acc.AccountSid, acc.Token);
    const path = `/v2/Properties/${prop.PropertySid}/Messages`;

    const h1Req = httpRequest({
      host: "127.0.0.1",
      port,
      method: "POST",
      path,
      headers: { authorization: auth, "content-type": "application/json", "content-length": 1000, "x-request-id": "stuck-h1" },
    });
    const h1Failed = new Promise<string>((done) => {
      h1Req.on("error", (e) => done(errorName(e)));
      h1Req.on("response", (res) => done(`answered ${res.statusCode}`));
    });
    h1Req.write("{");
    const session = http2Connect(`http://127.0.0.1:${port}`);
    session.on("error", () => undefined);
    const stream = session.request({ ":method": "POST", ":path": path, authorization: auth, "content-type": "application/json", "x-request-id": "stuck-h2" });
    const h2Failed = new Promise<string>((done) => {
      stream.on("error", (e) => done(errorName(e)));
      stream.on("close", () => done(`closed, rst code ${stream.rstCode}`));
    });
    stream.write("{");
    await waitForOutput(svc, /"requestId":"stuck-h1".*"msg":"request received"/);
    await waitForOutput(svc, /"requestId":"stuck-h2".*"msg":"request received"/);

    const end = await stopService(svc);
    console.log("stuck-client shutdown:", JSON.stringify({ exit: end, h1: await h1Failed, h2: await h2Failed }));
    expect(end.code, svc.stderr()).toBe(0);
    expect(end.ms).toBeGreaterThanOrEqual(4500); // the drain waited for them...
    expect(end.ms).toBeLessThan(EXIT_WITHIN_MS); // ...and no longer than it should
    expect(await h1Failed).not.toMatch(/^answered/);
    session.destroy();
    // Both show up in the log as requests cut off before their answer.
    for (const id of ["stuck-h1", "stuck-h2"]) {
      expect(svc.stdout()).toMatch(new RegExp(`"requestId":"${id}".*"status":499.*"aborted":true.*"msg":"request completed"`));
    }
  });
});

describe("SIGTERM during a burst of sends", () => {
  it("answers what it accepted, refuses the rest, loses nothing, exits 0 within a few seconds", { timeout: 400_000 }, async () => {
    let svc = await start();
    const acc = await operator("/admin/v1/Accounts", { Name: "Burst" });
    const prop = await operator(`/admin/v1/Accounts/${acc.AccountSid}/Properties`, { Name: "Burst" });
    const auth = basic(acc.AccountSid, acc.Token);
    const path = `/v2/Properties/${prop.PropertySid}/Messages`;
    const body = (text: string, i: number) => JSON.stringify({ From: "Acme", To: `+447911${String(100000 + i)}`, Text: text });

    const outcomes: Outcome[] = [];
    let answers = 0;
    let sigtermAt = 0;
    let stopped: Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> | undefined;
    const onAnswer = () => {
      answers++;
      if (answers === SIGTERM_AFTER) {
        sigtermAt = outcomes.filter((o) => o.status !== undefined || o.error !== undefined).length;
        stopped = stopService(svc);
      }
    };

    // HTTP/1.1: one keep-alive agent with six sockets; every request is queued at once.
    const agent = new Agent({ keepAlive: true, maxSockets: H1_CONNECTIONS });
    const h1 = Array.from({ length: H1_REQUESTS }, (_, i) => {
      const o: Outcome = { text: `h1 burst ${i}`, via: "h1" };
      outcomes.push(o);
      return new Promise<void>((done) => {
        const payload = body(o.text, i);
        const req = httpRequest(
          {
            agent,
            host: "127.0.0.1",
            port,
            method: "POST",
            path,
            headers: { authorization: auth, "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
          },
          (res) => {
            let text = "";
            res.setEncoding("utf8").on("data", (d: string) => (text += d));
            res.on("end", () => {
              answered(o, res.statusCode!, text);
              onAnswer();
              done();
            });
            res.on("error", (e) => {
              o.error = errorName(e);
              done();
            });
          },
        );
        req.on("error", (e) => {
          o.error = errorName(e);
          done();
        });
        req.end(payload);
      });
    });

    // h2c: two sessions, each with 16 requests in flight at a time.
    const goaways: number[] = [];
    const sessions: ClientHttp2Session[] = [];
    const h2 = Array.from({ length: H2_SESSIONS }, (_, s) => {
      const session = http2Connect(`http://127.0.0.1:${port}`);
      session.on("error", () => undefined); // each stream records its own failure
      session.on("goaway", () => goaways.push(s));
      sessions.push(session);
      const queue = Array.from({ length: H2_REQUESTS_EACH }, (_, k) => {
        const o: Outcome = { text: `h2 burst ${s}-${k}`, via: "h2" };
        outcomes.push(o);
        return { o, i: H1_REQUESTS + s * H2_REQUESTS_EACH + k };
      });
      const one = ({ o, i }: { o: Outcome; i: number }) =>
        new Promise<void>((done) => {
          try {
            const stream = session.request({ ":method": "POST", ":path": path, authorization: auth, "content-type": "application/json" });
            let status = 0;
            let text = "";
            stream.on("response", (h) => (status = Number(h[":status"])));
            stream.setEncoding("utf8").on("data", (d: string) => (text += d));
            stream.on("end", () => {
              if (status) {
                answered(o, status, text);
                onAnswer();
              } else o.error = "stream ended without a response";
              done();
            });
            stream.on("error", (e) => {
              o.error = errorName(e);
              done();
            });
            stream.end(body(o.text, i));
          } catch (e) {
            o.error = errorName(e); // e.g. ERR_HTTP2_GOAWAY_SESSION: the session no longer takes streams
            done();
          }
        });
      const worker = async () => {
        for (let next = queue.shift(); next; next = queue.shift()) await one(next);
      };
      return Promise.all(Array.from({ length: H2_CONCURRENCY }, worker));
    });

    await Promise.all([...h1, ...h2]);
    agent.destroy();
    for (const s of sessions) s.destroy();
    expect(stopped, "SIGTERM was sent").toBeDefined();
    const end = await stopped!;

    const ok = outcomes.filter((o) => o.status === 200);
    const failedWithStatus = outcomes.filter((o) => o.status !== undefined && o.status !== 200);
    const errors = new Map<string, number>();
    for (const o of outcomes) if (o.error) errors.set(`${o.via} ${o.error}`, (errors.get(`${o.via} ${o.error}`) ?? 0) + 1);
    const summary = {
      requests: outcomes.length,
      ok: ok.length,
      okAfterSigterm: ok.length - SIGTERM_AFTER,
      otherStatuses: failedWithStatus.map((o) => o.status),
      connectionErrors: Object.fromEntries(errors),
      settledBeforeSigterm: sigtermAt,
      exit: end,
      goaways,
      db: db.kind,
    };
    console.log("graceful shutdown:", JSON.stringify(summary));

    expect(end.code, svc.stderr()).toBe(0);
    expect(end.signal).toBeNull();
    expect(end.ms, "SIGTERM to exit, ms").toBeLessThan(EXIT_WITHIN_MS);
    // No 5xx, and in fact no answer but 200: nothing else could go wrong with these sends.
    expect(failedWithStatus.map((o) => o.status)).toEqual([]);
    // Every request either was answered or never got in.
    for (const o of outcomes) expect(o.status !== undefined || o.error !== undefined, o.text).toBe(true);
    expect(ok.length).toBeGreaterThanOrEqual(SIGTERM_AFTER);
    expect(ok.length, "some sends were refused (SIGTERM came in the middle)").toBeLessThan(outcomes.length);
    for (const key of errors.keys()) {
      expect(key, "only connection-level refusals").toMatch(
        /ECONNREFUSED|ECONNRESET|EPIPE|socket hang up|ERR_HTTP2_GOAWAY_SESSION|ERR_HTTP2_STREAM_ERROR|ERR_HTTP2_STREAM_CANCEL|ERR_HTTP2_INVALID_SESSION|ERR_HTTP2_ERROR|stream ended without a response/,
      );
    }
    expect(
      [...errors.keys()].some((k) => k.includes("ECONNREFUSED")),
      "new connections are refused",
    ).toBe(true);
    expect([...new Set(goaways)].sort(), "every h2 session got GOAWAY").toEqual([0, 1]);
    expect(svc.stdout()).toMatch(/"msg":"stopped"/);
    // The service's side: every request it took got its answer written (none cut off: aborted), and
    // it answered 200 exactly as often as the clients saw a 200.
    const completions = svc
      .stdout()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { msg?: string; route?: string; status?: number; aborted?: boolean })
      .filter((l) => l.msg === "request completed" && l.route === "/v2/Properties/:property_sid/Messages");
    expect(
      completions.filter((l) => l.aborted),
      "requests taken but not answered",
    ).toEqual([]);
    expect(completions.filter((l) => l.status === 200)).toHaveLength(ok.length);

    // The database holds exactly the answered sends, and the dispatcher left nothing claimed.
    const orm = await db.open();
    try {
      const rows = await orm.em
        .fork()
        .execute<{ sid: string; text: string; status: string; claimed_until: unknown }[]>(
          "select sid, text, status, claimed_until from messages where property_sid = ?",
          [prop.PropertySid],
        );
      expect(rows.map((r) => r.text).sort()).toEqual(ok.map((o) => o.text).sort());
      const stillClaimed = rows.filter((r) => r.claimed_until !== null && r.status === "Processing");
      expect(
        stillClaimed.map((r) => r.sid),
        "messages claimed but never handed to the carrier",
      ).toEqual([]);
    } finally {
      await orm.close(true);
    }

    // Restart on the same database: every 200 is there, as it was sent.
    svc = await start();
    const sids = ok.map((o) => o);
    const check = async () => {
      for (let o = sids.shift(); o; o = sids.shift()) {
        const res = await fetch(`http://127.0.0.1:${port}/v2/Messages/${o.sid}`, { headers: { authorization: auth } });
        expect(res.status, o.text).toBe(200);
        expect(await res.json()).toMatchObject({ MessageSid: o.sid, Text: o.text, PropertySid: prop.PropertySid });
      }
    };
    await Promise.all(Array.from({ length: 8 }, check));
    const second = await stopService(svc);
    expect(second.code, svc.stderr()).toBe(0);
    expect(second.ms).toBeLessThan(EXIT_WITHIN_MS);
  });
});
