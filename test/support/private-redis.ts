/**
 * A private Redis for one test file: redis-server on a free port, no persistence, so a test can
 * stop it (an outage) and start it again without touching a shared one. Needs redis-server
 * (Debian's `redis-server`; scripts/system-packages.sh installs it).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createConnection } from "node:net";
import { freePort } from "./kannel.js";

/** A running private Redis. */
export interface PrivateRedis {
  port: number;
  url: string;
  /** Kills the server (an outage); start() brings it back, empty, on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

/** Answers once the server on `port` answers PING, or throws after `timeoutMs`. */
async function waitPing(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = createConnection({ host: "127.0.0.1", port }, () => s.write("PING\r\n"));
      s.setTimeout(500, () => (s.destroy(), resolve(false)));
      s.on("data", (d) => (s.destroy(), resolve(d.toString().startsWith("+PONG"))));
      s.on("error", () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer PING`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts a private redis-server on a free port; call stop() in afterAll. */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
    await waitPing(port);
  };
  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    start,
    async stop() {
      const c = child;
      child = undefined;
      if (!c || c.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        c.once("exit", () => resolve());
        c.kill("SIGKILL");
      });
    },
  };
}
