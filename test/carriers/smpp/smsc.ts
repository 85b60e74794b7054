import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const SCRIPT = fileURLToPath(new URL("./smsc.pl", import.meta.url));

/** One line the scripted SMSC printed: its kind and key=value fields. */
export interface SmscEvent {
  kind: string;
  f: Record<string, string>;
  /** When this process read the line (performance.now(), ms). */
  at: number;
}

/** The Perl Net::SMPP SMSC of test/carriers/smpp/smsc.pl, driven over stdin/stdout. */
export interface TestSmsc {
  port: number;
  events: SmscEvent[];
  send(command: string): void;
  waitFor(what: string, pred: (e: SmscEvent[]) => boolean, timeoutMs?: number): Promise<void>;
  /** SIGKILL, as a crash. */
  kill(): Promise<void>;
  /** A new SMSC process on the same port (events carry on in the same list). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the scripted SMSC (port 0: any free port; multi: any number of ESMEs at once, answering at once). */
export async function startSmsc(opts: { port?: number; systemId?: string; password?: string; multi?: boolean } = {}): Promise<TestSmsc> {
  const events: SmscEvent[] = [];
  let proc: ChildProcessWithoutNullStreams;
  let port = opts.port ?? 0;
  let stderr = "";

  async function launch(): Promise<void> {
    proc = spawn("perl", [
      SCRIPT,
      "--port",
      String(port),
      "--system-id",
      opts.systemId ?? "switchboard",
      "--password",
      opts.password ?? "secret",
      ...(opts.multi ? ["--multi"] : []),
    ]);
    proc.stderr.on("data", (c: Buffer) => (stderr += c.toString()).slice(-4000));
    const lines = createInterface({ input: proc.stdout });
    const listening = new Promise<number>((resolve, reject) => {
      proc.once("exit", (code) => reject(new Error(`smsc.pl exited (${code}): ${stderr}`)));
      lines.on("line", (line) => {
        const [kind, ...rest] = line.split(" ");
        const f: Record<string, string> = {};
        for (const kv of rest) {
          const i = kv.indexOf("=");
          if (i > 0) f[kv.slice(0, i)] = kv.slice(i + 1);
        }
        if (kind === "listening") resolve(Number(rest[0]));
        else events.push({ kind: kind!, f, at: performance.now() });
      });
    });
    port = await listening;
  }

  await launch();
  return {
    get port() {
      return port;
    },
    events,
    send(command) {
      proc.stdin.write(`${command}\n`);
    },
    async waitFor(what, pred, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (!pred(events)) {
        if (Date.now() > deadline)
          throw new Error(
            `timed out waiting for the SMSC: ${what}\nevents: ${events
              .slice(-20)
              .map((e) => `${e.kind} ${JSON.stringify(e.f)}`)
              .join("\n")}\nstderr: ${stderr.slice(-2000)}`,
          );
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async kill() {
      const exited = once(proc, "exit");
      proc.kill("SIGKILL");
      await exited;
    },
    async restart() {
      await launch();
    },
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = once(proc, "exit");
      proc.stdin.end();
      proc.kill("SIGTERM");
      await exited;
    },
  } as TestSmsc;
}

/** The submit events the SMSC answered with a message id. */
export function acceptedSubmits(events: SmscEvent[]): SmscEvent[] {
  return events.filter((e) => e.kind === "submit" && e.f.id !== "-");
}
