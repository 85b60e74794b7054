import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import type { FastifyInstance } from "fastify";
import { expect } from "vitest";
import { ADMIN_TOKEN } from "../support/harness.js";

const SCRIPT = fileURLToPath(new URL("./esme.pl", import.meta.url));

/** One line the Perl ESME printed: its kind and key=value fields. */
export interface EsmeEvent {
  kind: string;
  f: Record<string, string>;
}

/** A customer's SMPP client: Perl's Net::SMPP in test/smpp-server/esme.pl, driven over stdin/stdout. */
export interface TestEsme {
  events: EsmeEvent[];
  send(command: string): void;
  /** Waits until an event of `kind` matching `pred` arrives (at most timeoutMs), and returns it. */
  next(kind: string, pred?: (e: EsmeEvent) => boolean, timeoutMs?: number): Promise<EsmeEvent>;
  stop(): Promise<void>;
}

/** Connects a new Perl ESME to the SMPP server's port. */
export async function startEsme(port: number): Promise<TestEsme> {
  const proc: ChildProcessWithoutNullStreams = spawn("perl", [SCRIPT, "--port", String(port)]);
  const events: EsmeEvent[] = [];
  let stderr = "";
  proc.stderr.on("data", (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const waiters = new Set<() => void>();
  createInterface({ input: proc.stdout }).on("line", (line) => {
    const [kind, ...rest] = line.split(" ");
    const f: Record<string, string> = {};
    for (const kv of rest) {
      const i = kv.indexOf("=");
      if (i > 0) f[kv.slice(0, i)] = kv.slice(i + 1);
    }
    events.push({ kind: kind!, f });
    for (const w of waiters) w();
  });
  const taken = new Set<EsmeEvent>();
  const esme: TestEsme = {
    events,
    send(command) {
      proc.stdin.write(`${command}\n`);
    },
    next(kind, pred = () => true, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const look = () => {
          const e = events.find((x) => !taken.has(x) && x.kind === kind && pred(x));
          if (!e) return false;
          taken.add(e);
          waiters.delete(look);
          clearTimeout(timer);
          resolve(e);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(look);
          reject(new Error(`timed out waiting for ${kind}; events: ${JSON.stringify(events.slice(-10))}; stderr: ${stderr}`));
        }, timeoutMs);
        if (!look()) waiters.add(look);
      });
    },
    async stop() {
      // Exited already (a code, or a signal such as an earlier stop): "exit" will not come again.
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill("SIGKILL");
      await once(proc, "exit");
    },
  };
  await esme.next("connected");
  return esme;
}

/** Hex of a text in GSM 7 unpacked (basic ASCII letters, digits, space and punctuation are their own codes). */
export function gsmHex(text: string): string {
  return Buffer.from(text, "latin1").toString("hex");
}

/** Hex of a text in UCS-2 (UTF-16BE; an emoji is its surrogate pair). */
export function ucs2Hex(text: string): string {
  const le = Buffer.from(text, "utf16le");
  le.swap16();
  return le.toString("hex");
}

/** Sets an account's SMPP credentials through the operator API (PUT …/Smpp), expecting 200. */
export async function setSmppCredentials(app: FastifyInstance, accountSid: string, payload: Record<string, unknown>): Promise<void> {
  const res = await app.inject({ method: "PUT", url: `/admin/v1/Accounts/${accountSid}/Smpp`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload });
  expect(res.statusCode, res.body).toBe(200);
}
