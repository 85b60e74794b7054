/**
 * The bare ceiling: a minimal Fastify route that does one INSERT per request (autocommit, so one
 * commit and WAL flush each) with the pg pool MikroORM itself uses, and answers after it. No auth,
 * no validation, no ORM. Beside it the floor of the stack with group commit: the same route, but
 * the requests waiting together are stored by one multi-row INSERT (one commit), as Switchboard
 * stores its sends; and the two gRPC floors on h2c that store through the same group commit
 * (bench/grpc-floor-servers.ts). Run by bench/run.ts: BARE_DATABASE_URL, BARE_PORT, and
 * BARE_H2_PORT and BARE_CONNECT_PORT for the gRPC floors (started when both are set).
 */
import { randomBytes } from "node:crypto";
import { fastify } from "fastify";
import pg from "pg";
import { startGrpcFloors } from "./grpc-floor-servers.js";

const pool = new pg.Pool({ connectionString: process.env.BARE_DATABASE_URL, max: Number(process.env.BARE_POOL_MAX ?? 10) });
const app = fastify({ logger: false });

app.post("/bare/Messages", async (req) => {
  const body = req.body as { From?: string; To?: string; Text?: string };
  const sid = `MG${randomBytes(15).toString("hex").toUpperCase()}`;
  await pool.query("insert into bench_bare (sid, sender, recipient, text, created_at) values ($1, $2, $3, $4, now())", [
    sid,
    body.From ?? "",
    body.To ?? "",
    body.Text ?? "",
  ]);
  return { MessageSid: sid, From: body.From, To: body.To, Text: body.Text };
});

// Group commit at its simplest: while two INSERTs are in flight, new rows wait and go in the next one.
type Waiting = { values: string[]; done: (err?: unknown) => void };
let waiting: Waiting[] = [];
let inFlight = 0;
function flush(): void {
  if (inFlight >= 2 || waiting.length === 0) return;
  const batch = waiting;
  waiting = [];
  inFlight++;
  const params = batch.flatMap((w) => w.values);
  const rows = batch.map((_, i) => `($${i * 4 + 1}, $${i * 4 + 2}, $${i * 4 + 3}, $${i * 4 + 4}, now())`).join(", ");
  pool
    .query(`insert into bench_bare (sid, sender, recipient, text, created_at) values ${rows}`, params)
    .then(
      () => batch.forEach((w) => w.done()),
      (err) => batch.forEach((w) => w.done(err)),
    )
    .finally(() => {
      inFlight--;
      flush();
    });
}

/** One row (sid, sender, recipient, text) in the next group commit; resolves once it is committed. */
function insertBatched(values: string[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    waiting.push({ values, done: (err) => (err ? reject(err) : resolve()) });
    flush();
  });
}

app.post("/bare/Batched", async (req) => {
  const body = req.body as { From?: string; To?: string; Text?: string };
  const sid = `MG${randomBytes(15).toString("hex").toUpperCase()}`;
  await insertBatched([sid, body.From ?? "", body.To ?? "", body.Text ?? ""]);
  return { MessageSid: sid, From: body.From, To: body.To, Text: body.Text };
});

if (process.env.BARE_H2_PORT && process.env.BARE_CONNECT_PORT) {
  await startGrpcFloors(insertBatched, Number(process.env.BARE_H2_PORT), Number(process.env.BARE_CONNECT_PORT));
}
await app.listen({ port: Number(process.env.BARE_PORT), host: "127.0.0.1" });
process.stdout.write("bare server listening\n");
const stop = () => {
  void app
    .close()
    .then(() => pool.end())
    .finally(() => process.exit(0));
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
