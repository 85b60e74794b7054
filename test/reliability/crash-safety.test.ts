/**
 * Crash safety (issue 7, item 2). The real service process (src/main.ts, CARRIER=kannel) runs
 * against a real Kannel 1.4.5 + fakesmsc (test/support/kannel.ts), on its own PostgreSQL database
 * when DATABASE_URL names a server, else on a PGlite data folder. Concurrent clients send while
 * the service is SIGKILLed at random moments and started again on the same port and database.
 * fakesmsc, outside the killed process, logs every SMS that reached the carrier, so a message sent
 * twice shows up however the service died.
 *
 * At the end: every message that got a 200 exists (GET) and reached the carrier exactly once; every
 * message in the database reached it exactly once and nothing is left half-written (a message
 * without its lease or Idempotency-Key row, or the reverse; a claim never resolved); the dispatcher
 * took up the claims the killed processes left. Exactly-once at the carrier holds here because
 * Kannel's smsbox retries the type 8 report until the restarted service hears it (the template's
 * http-request-retry) and the dispatcher waits KANNEL_CONFIRM_WAIT_SECONDS for that report before
 * submitting a message it cannot prove was sent (see Dispatcher). docs/reliability.md names the windows
 * where that does not hold.
 */
import { randomBytes } from "node:crypto";
import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MikroORM } from "@mikro-orm/sql";
import { describe, expect, it } from "vitest";
import { createOrm } from "../../src/db/orm.js";
import { entities } from "../../src/entities.js";
import { dbKind } from "../support/db.js";
import { freePort, KANNEL_USER, type RunningKannel, startKannel } from "../support/kannel.js";
import { type Service, startService } from "../support/service.js";
import { without } from "../support/system-packages.js";

const KILLS = 5;
const CLIENTS = 6;
// Above Kannel's 10 s sendsms timeout. CRASH_CLAIM_SECONDS shorter than a restart makes every
// crashed claim expire before Kannel's retried report can arrive: the case the wait is for.
const CLAIM_SECONDS = Number(process.env.CRASH_CLAIM_SECONDS ?? 12);
// Well above the gaps between smsbox's retries (1 s apart, up to ~7 s when it is busy).
// CRASH_CONFIRM_WAIT_SECONDS=0 turns the wait off, to see the duplicates it prevents.
const CONFIRM_WAIT_SECONDS = Number(process.env.CRASH_CONFIRM_WAIT_SECONDS ?? 10);
/** CRASH_DIAG_DIR=<dir>: keep Kannel's logs, fakesmsc's lines and the service's log there (LOG_LEVEL from CRASH_LOG_LEVEL). */
const DIAG_DIR = process.env.CRASH_DIAG_DIR;
const ADMIN_TOKEN = "crash-test-admin-token-0123456789abcdef";
const SECRET = "crash-test-kannel-secret-0123456789abcdef";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A small seeded generator, so a failing run can be repeated with CRASH_SEED. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One logical send of a client: a unique token in the text, with or without an Idempotency-Key. */
interface Send {
  token: string;
  keyed: boolean;
  leased: boolean;
  /** The MessageSid of the 200 answer, if one came. */
  sid?: string;
  attempts: number;
  /** What became of an unkeyed send that got no 200 (keyed ones retry until they get one). */
  outcome?: "no-answer" | "error-status";
}

interface Database {
  url: string;
  /** An ORM on the database (the final checks; PostgreSQL also while the service runs). */
  open(): Promise<MikroORM>;
  dispose(): Promise<void>;
}

async function testDatabase(): Promise<Database> {
  if (dbKind() === "postgres") {
    const server = process.env.DATABASE_URL!;
    const name = `sb_crash_${process.pid}_${randomBytes(5).toString("hex")}`;
    const admin = await createOrm({ entities, databaseUrl: server, poolMax: 2 });
    await admin.em.fork().execute(`create database "${name}"`);
    const u = new URL(server);
    u.pathname = `/${name}`;
    return {
      url: u.toString(),
      open: () => createOrm({ entities, databaseUrl: u.toString(), poolMax: 2 }),
      async dispose() {
        await admin.em.fork().execute(`drop database if exists "${name}" with (force)`);
        await admin.close(true);
      },
    };
  }
  const dir = await mkdtemp(join(tmpdir(), "switchboard-crash-"));
  return { url: dir, open: () => createOrm({ entities, databaseUrl: dir }), dispose: () => rm(dir, { recursive: true, force: true }) };
}

describe.skipIf(without("kannel"))("crash safety: SIGKILL under load, CARRIER=kannel", () => {
  it(`survives ${KILLS} kills: every 200 is stored and reaches the carrier exactly once, nothing half-written`, { timeout: 300_000 }, async () => {
    const seed = Number(process.env.CRASH_SEED ?? Date.now() % 1_000_000);
    const random = mulberry32(seed);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const db = await testDatabase();
    let kannel: RunningKannel | undefined;
    let service: Service | undefined;
    let liveOrm: MikroORM | undefined;
    let heldAfterCrash = 0;
    let resubmittedAfterWait = 0;
    const serviceErrors: string[] = [];
    const serviceLog: string[] = [];
    try {
      kannel = await startKannel({ callbackBaseUrl: base, secret: SECRET });
      const env = {
        DATABASE_URL: db.url,
        SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN,
        CARRIER: "kannel",
        KANNEL_SENDSMS_URL: kannel.sendsmsUrl,
        KANNEL_USERNAME: KANNEL_USER.username,
        KANNEL_PASSWORD: KANNEL_USER.password,
        KANNEL_CALLBACK_URL: base,
        KANNEL_CALLBACK_SECRET: SECRET,
        DISPATCH_CLAIM_SECONDS: String(CLAIM_SECONDS),
        KANNEL_CONFIRM_WAIT_SECONDS: String(CONFIRM_WAIT_SECONDS),
        LOG_LEVEL: process.env.CRASH_LOG_LEVEL ?? "warn",
        // Six clients for minutes would reach the per-account limit; the limit has its own tests.
        SEND_RATE_LIMIT: "off",
      };
      const onLine = (line: string) => {
        if (DIAG_DIR) serviceLog.push(line);
        if (!line.startsWith("{")) return;
        try {
          const entry = JSON.parse(line) as { level: number; msg: string; count?: number };
          if (entry.msg.startsWith("claims expired without the carrier's answer")) heldAfterCrash += entry.count ?? 0;
          if (entry.msg.startsWith("no carrier report confirmed")) resubmittedAfterWait += entry.count ?? 0;
          if (entry.level >= 50) serviceErrors.push(line.slice(0, 500));
        } catch {
          /* not a log line */
        }
      };
      const start = async () => {
        const t0 = performance.now();
        service = await startService({ port, env, onLine });
        return performance.now() - t0;
      };
      const startupMs: number[] = [await start()];
      if (dbKind() === "postgres") liveOrm = await db.open();

      // A tenant with an owned number, and two pool numbers for leased senders.
      const adminCall = async (path: string, body: object) => {
        const res = await fetch(`${base}/admin/v1/${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        expect(res.status, await res.clone().text()).toBe(200);
        return (await res.json()) as Record<string, string>;
      };
      const account = await adminCall("Accounts", { Name: "Crash", SmsEnabled: true });
      const property = await adminCall(`Accounts/${account.AccountSid}/Properties`, { Name: "Site", SmsEnabled: true });
      const owned = "+447700900777";
      await adminCall("Numbers", { Number: owned, AccountSid: account.AccountSid });
      for (const n of ["+12025550190", "+12025550191"]) await adminCall("Numbers", { Number: n });
      const auth = `Basic ${Buffer.from(`${account.AccountSid}:${account.Token}`).toString("base64")}`;

      // Clients: each logical send carries a unique token. Keyed sends are retried with the same
      // Idempotency-Key until they get a 200 (what a careful client does across a crash); unkeyed
      // ones are tried once. A third of the sends use a leased sender (a lease row per message).
      const sends: Send[] = [];
      let requests = 0;
      let refused = 0; // connection refused/reset or timed out: the service was down
      let unavailable = 0; // 503 answers
      const unexpected: string[] = [];
      let loading = true;
      let recipientSeq = 100_000;
      const client = async (c: number) => {
        for (let n = 0; loading; n++) {
          const kind = (c + n) % 3;
          const s: Send = { token: `t${c}-${n}`, keyed: kind !== 1, leased: kind === 2, attempts: 0 };
          sends.push(s);
          const body = JSON.stringify({ ...(s.leased ? {} : { From: owned }), To: `+447911${++recipientSeq}`, Text: `crash ${s.token}` });
          for (;;) {
            s.attempts++;
            requests++;
            let status = 0;
            let text = "";
            try {
              const res = await fetch(`${base}/v2/Properties/${property.PropertySid}/Messages`, {
                method: "POST",
                headers: { authorization: auth, "content-type": "application/json", ...(s.keyed ? { "idempotency-key": `key-${s.token}` } : {}) },
                body,
                signal: AbortSignal.timeout(20_000),
              });
              status = res.status;
              text = await res.text();
            } catch {
              refused++;
            }
            if (status === 200) {
              s.sid = (JSON.parse(text) as { MessageSid: string }).MessageSid;
              break;
            }
            if (status === 503) unavailable++;
            else if (status !== 0) unexpected.push(`${status} ${text.slice(0, 300)}`);
            if (!s.keyed) {
              s.outcome = status === 0 ? "no-answer" : "error-status";
              break;
            }
            await sleep(200);
          }
        }
      };
      const clients = Array.from({ length: CLIENTS }, (_, c) => client(c));

      // Kill at random moments, restart each time.
      const inDoubtAtKill: number[] = [];
      for (let k = 0; k < KILLS; k++) {
        await sleep(1500 + random() * 3500);
        await service!.kill("SIGKILL");
        if (liveOrm) {
          const rows = await liveOrm.em
            .fork()
            .execute<{ n: string | number }[]>("select count(*) as n from messages where status = 'Processing' and claimed_until is not null");
          inDoubtAtKill.push(Number(rows[0].n));
        }
        startupMs.push(await start());
      }
      await sleep(2000);
      loading = false;
      await Promise.all(clients);
      const lastReady = performance.now();

      // Settle: every 200'd message Submitted or Delivered, every crashed claim past its claim and
      // the wait for the carrier's report, and fakesmsc quiet for two seconds.
      const answered = sends.filter((s) => s.sid !== undefined);
      const pending = new Set(answered.map((s) => s.sid!));
      const settleBy = performance.now() + 120_000;
      let lastCount = -1;
      let quietSince = performance.now();
      for (;;) {
        for (const sid of [...pending]) {
          const res = await fetch(`${base}/v2/Messages/${sid}`, { headers: { authorization: auth } });
          if (res.status === 200 && ["Submitted", "Delivered"].includes(((await res.json()) as { Status: string }).Status)) pending.delete(sid);
        }
        const count = kannel.fakesmsc.received().length;
        if (count !== lastCount) {
          lastCount = count;
          quietSince = performance.now();
        }
        const pastClaims = performance.now() > lastReady + (CLAIM_SECONDS + CONFIRM_WAIT_SECONDS + 3) * 1000;
        if (pending.size === 0 && pastClaims && performance.now() - quietSince > 2000) break;
        if (performance.now() > settleBy) break;
        await sleep(500);
      }
      expect([...pending], "200'd messages not Submitted or Delivered in time").toEqual([]);

      // Every 200: GET shows it, with its text.
      for (const s of answered) {
        const res = await fetch(`${base}/v2/Messages/${s.sid}`, { headers: { authorization: auth } });
        expect(res.status).toBe(200);
        expect(((await res.json()) as { Text: string }).Text).toBe(`crash ${s.token}`);
      }
      await service!.kill("SIGTERM");
      await liveOrm?.close(true);
      liveOrm = undefined;

      // The database after the last (clean) stop.
      const orm = await db.open();
      try {
        const em = orm.em.fork();
        const messages = await em.execute<
          {
            sid: string;
            status: string;
            text: string;
            sender_kind: string;
            lease_sid: string | null;
            submitted_at: unknown;
            carrier_ref: string | null;
            claimed_until: unknown;
            delivered_at: unknown;
          }[]
        >(
          "select sid, status, text, sender_kind, lease_sid, submitted_at, carrier_ref, claimed_until, delivered_at from messages where direction = 'Transmit'",
        );
        const tokenOf = (text: string) => /^crash (t\d+-\d+)$/.exec(text)?.[1];
        const messagesByToken = new Map<string, string[]>();
        for (const m of messages) {
          const token = tokenOf(m.text);
          if (token) messagesByToken.set(token, [...(messagesByToken.get(token) ?? []), m.sid]);
        }
        // At the carrier: how often each token arrived (a message is one SMS part here).
        const atCarrier = new Map<string, number>();
        for (const m of kannel.fakesmsc.messages()) {
          const token = tokenOf(m.text);
          if (token) atCarrier.set(token, (atCarrier.get(token) ?? 0) + 1);
        }
        const duplicates = [...atCarrier].filter(([, n]) => n > 1);
        const notAtCarrier = messages.filter((m) => (atCarrier.get(tokenOf(m.text) ?? "") ?? 0) === 0).map((m) => m.sid);
        const phantom = [...atCarrier.keys()].filter((t) => !messagesByToken.has(t));

        // Each logical send made at most one message; each 200 is that message.
        const multiple = [...messagesByToken].filter(([, sids]) => sids.length > 1);
        for (const s of answered) expect(messagesByToken.get(s.token), s.token).toEqual([s.sid]);
        const committedWithout200 = sends.filter((s) => s.sid === undefined && messagesByToken.has(s.token)).length;

        // Schema invariants: a claim never left behind; leases and messages point at each other;
        // an Idempotency-Key row exists for exactly the keyed messages and names its message.
        const unresolved = messages.filter(
          (m) =>
            !["Submitted", "Delivered"].includes(m.status) ||
            m.submitted_at === null ||
            m.carrier_ref === null ||
            m.claimed_until !== null ||
            (m.status === "Delivered" && m.delivered_at === null),
        );
        const badLeases = await em.execute(
          `select m.sid from messages m left join leases l on l.sid = m.lease_sid
            where m.direction = 'Transmit' and ((m.sender_kind = 'Leased') <> (m.lease_sid is not null)
               or (m.lease_sid is not null and (l.sid is null or l.message_sid <> m.sid or l.pool_number <> m.sender or l.recipient <> m.recipient)))
           union all
           select l.sid from leases l left join messages m on m.sid = l.message_sid where m.sid is null or m.lease_sid is distinct from l.sid`,
        );
        const keys = await em.execute<{ key: string; message_sid: string }[]>(
          "select k.key, k.message_sid from idempotency_keys k join messages m on m.sid = k.message_sid and m.account_sid = k.account_sid",
        );
        const keyRows = await em.execute<{ n: string | number }[]>("select count(*) as n from idempotency_keys");
        const keyBySid = new Map(keys.map((k) => [k.message_sid, k.key]));
        const keyedBySend = new Map(sends.map((s) => [s.token, s.keyed]));
        const badKeys = messages.filter((m) => {
          const token = tokenOf(m.text) ?? "";
          return keyedBySend.get(token) ? keyBySid.get(m.sid) !== `key-${token}` : keyBySid.has(m.sid);
        });

        const figures = {
          database: dbKind(),
          seed,
          claimSeconds: CLAIM_SECONDS,
          confirmWaitSeconds: CONFIRM_WAIT_SECONDS,
          kills: KILLS,
          startupMs: startupMs.map((ms) => Math.round(ms)),
          logicalSends: sends.length,
          requests,
          answered200: answered.length,
          refusedWhileDown: refused,
          unavailable503: unavailable,
          unkeyedWithoutAnswer: sends.filter((s) => s.outcome).length,
          committedWithout200,
          messagesChecked: messages.length,
          smsAtCarrier: kannel.fakesmsc.received().length,
          duplicatesAtCarrier: duplicates.length,
          inDoubtAtKill: inDoubtAtKill.length > 0 ? inDoubtAtKill : "n/a (PGlite)",
          heldAfterCrash,
          resubmittedAfterWait,
        };
        console.log(`[crash-safety] ${JSON.stringify(figures)}`);
        if (DIAG_DIR) {
          await mkdir(DIAG_DIR, { recursive: true });
          await writeFile(
            join(DIAG_DIR, "duplicates.json"),
            JSON.stringify(duplicates.map(([t, n]) => ({ token: t, times: n, sids: messagesByToken.get(t) }))),
          );
        }

        expect(unexpected, "answers other than 200 and 503").toEqual([]);
        expect(serviceErrors, "errors the service logged").toEqual([]);
        expect(multiple, "logical sends stored more than once").toEqual([]);
        expect(
          unresolved.map((m) => `${m.sid} ${m.status}`),
          "messages left unresolved",
        ).toEqual([]);
        expect(badLeases, "messages and leases that do not match").toEqual([]);
        expect(
          badKeys.map((m) => m.sid),
          "messages without their Idempotency-Key row, or with a stray one",
        ).toEqual([]);
        expect(Number(keyRows[0].n), "Idempotency-Key rows without their message").toBe(keys.length);
        expect(notAtCarrier, "stored messages that never reached the carrier").toEqual([]);
        expect(phantom, "SMS at the carrier without a stored message").toEqual([]);
        expect(duplicates, "messages that reached the carrier more than once").toEqual([]);
        expect(messages.length).toBeGreaterThanOrEqual(answered.length);
        expect(answered.length).toBeGreaterThan(50);
      } finally {
        await orm.close(true);
      }
    } catch (e) {
      const diag = [`service output:\n${service?.output().slice(-4000) ?? ""}`, kannel ? await kannel.diagnostics() : ""].join("\n");
      throw new Error(`${(e as Error).message}\n${diag}`, { cause: e });
    } finally {
      await service?.kill("SIGKILL");
      await liveOrm?.close(true);
      if (DIAG_DIR && kannel) {
        await cp(kannel.dir, DIAG_DIR, { recursive: true }).catch(() => undefined);
        await writeFile(join(DIAG_DIR, "fakesmsc.txt"), kannel.fakesmsc.received().join("\n")).catch(() => undefined);
        await writeFile(join(DIAG_DIR, "service.log"), serviceLog.join("\n")).catch(() => undefined);
      }
      await kannel?.stop();
      await db.dispose();
    }
  });
});
