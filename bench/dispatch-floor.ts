/**
 * The dispatcher's floor (issue 32: is 30,000 messages/s reachable on this machine with three
 * writes per message at all?): the same kind of due rows the dispatcher's drain inserts
 * (dispatchRun), drained by Node loops doing only what the dispatcher must do in PostgreSQL per
 * message, with the same driver (`pg`) and the same statements the service uses, each prepared
 * once per connection as executeBound prepares them, their arrays written by the same wireValue:
 * the claim in due order (sb_claim_due, message-store.ts claimInOrder), the submission record
 * (sb_record_submissions, updateSubmissions) and the final state Delivered (sb_apply_plain_final_states,
 * updatePlainFinalStates: the delivery report's path). No carrier, no pacing, no hand-off, no
 * group commit: each loop claims a round of 500, records it submitted, records it delivered, and
 * claims again, until a claim comes back empty.
 *
 * The service must not compete for the rows or the cores: bench/run.ts stops it before this runs.
 * Hiding the rows from it instead (another account or property) would not work: the claim in due
 * order takes every account's due messages, and a live service would still share the two cores.
 * The rows go into the same database the service's drain left behind, vacuumed first; like
 * dispatchRun, no checkpoint first.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { wireValue } from "../src/db/bound-sql.js";
import { type BenchTarget, cpuBetween, cpuByPid, dbPids, f0, insertDue, queuedCount } from "./service-runs.js";

/** One drain of the floor. */
export interface FloorRun {
  loops: number;
  count: number;
  seconds: number;
  rate: number;
  complete: boolean;
  /** CPU of this (the bench's) Node process per message, µs. */
  nodeCpuUs: number;
  /** CPU of the PostgreSQL backends of the bench database per message, µs. */
  dbCpuUs: number;
}

/** The service's round: 500 messages (dispatcher.ts batchSize). */
const ROUND = 500;
/** The service's claim time (DISPATCH_CLAIM_SECONDS default). */
const CLAIM_MS = 60_000;

// The service's statements (message-store.ts), numbered as executeBound numbers them.
const CLAIM = { name: "sb_claim_due", text: "select * from sb_claim_due($1::timestamptz, $2::timestamptz, $3::int, $4::boolean)" };
const SUBMITTED = {
  name: "sb_record_submissions",
  text: "select sid from sb_record_submissions($1::text[], $2::text[], $3::timestamptz[], $4::text[])",
};
const FINAL = {
  name: "sb_apply_plain_final_states",
  text: "select * from sb_apply_plain_final_states($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::text[])",
};

/** The loop counts to run, from BENCH_FLOOR_LOOPS (a comma-separated list; default 4, the fastest of 2 and 4). */
export function floorLoops(): number[] {
  const list = (process.env.BENCH_FLOOR_LOOPS ?? "4")
    .split(",")
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
  return list.length > 0 ? list : [4];
}

/**
 * The floor's writes per message: 2 (default), the claim, then the final state with the submission,
 * as the service writes a message whose report comes within SUBMISSION_HOLD_MS; 3
 * (BENCH_FLOOR_WRITES=3), the submission recorded between them, as with SUBMISSION_HOLD_MS=0.
 */
export function floorWrites(): 2 | 3 {
  return process.env.BENCH_FLOOR_WRITES === "3" ? 3 : 2;
}

/** Inserts `count` due rows as dispatchRun does and drains them with `loops` loops of the three statements. */
export async function dispatchFloor(t: BenchTarget, dbUrl: string, count: number, loops: number, sidTag: string): Promise<FloorRun> {
  const writes = floorWrites();
  const clients = Array.from({ length: loops }, () => new pg.Client({ connectionString: dbUrl }));
  await Promise.all(clients.map((c) => c.connect()));
  try {
    // Each connection prepares its statements before the clock starts, as the service's pool has.
    const now = new Date();
    for (const c of clients) {
      await c.query({ ...CLAIM, values: [wireValue(now), wireValue(now), 0, false] });
      await c.query({ ...SUBMITTED, values: [[], [], [], []].map(wireValue) });
      await c.query({ ...FINAL, values: [[], [], [], [], [], [], [], []].map(wireValue) });
    }
    // The service's drain found a table without dead rows (or only the REST runs'); this one finds
    // the drains' before it, whose stale queue-index entries every claim would walk past.
    await t.db.query("vacuum messages");
    await insertDue(t, count, sidTag);
    t.log(`dispatcher floor: ${count} due messages inserted; draining with ${loops} loop(s) of claim, ${writes === 3 ? "submission, " : ""}final state`);
    const pidsDb0 = await dbPids(t);
    const cpu0 = cpuByPid([process.pid]);
    const db0 = cpuByPid(pidsDb0);
    const t0 = performance.now();
    let done = 0;
    await Promise.all(
      clients.map(async (c) => {
        for (;;) {
          const now = new Date();
          const claimed = (await c.query({ ...CLAIM, values: [wireValue(new Date(now.getTime() + CLAIM_MS)), wireValue(now), ROUND, false] })).rows;
          if (claimed.length === 0) return;
          const sids = claimed.map((r) => r.sid as string);
          const at = new Date();
          if (writes === 3)
            await c.query({ ...SUBMITTED, values: [sids, sids.map(() => randomUUID()), sids.map(() => at), sids.map(() => null)].map(wireValue) });
          const delivered = new Date();
          await c.query({
            ...FINAL,
            // Two writes: the submission goes with the final state, as the service's held submissions do.
            values: [
              sids,
              sids.map(() => "Delivered"),
              sids.map(() => delivered),
              sids.map(() => ""),
              sids.map(() => ""),
              sids.map(() => (writes === 2 ? randomUUID() : null)),
              sids.map(() => (writes === 2 ? at : null)),
              sids.map(() => null),
            ].map(wireValue),
          });
          done += claimed.length;
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const per = (s: number) => (s * 1e6) / Math.max(1, done);
    const nodeCpuUs = per(cpuBetween(cpu0, cpuByPid([process.pid])));
    const dbCpuUs = per(cpuBetween(db0, cpuByPid([...new Set([...pidsDb0, ...(await dbPids(t))])])));
    const complete = (await queuedCount(t)) === 0;
    const run: FloorRun = { loops, count: done, seconds, rate: done / seconds, complete, nodeCpuUs, dbCpuUs };
    t.log(
      `  dispatcher floor, ${loops} loop(s): ${done} messages in ${seconds.toFixed(2)} s = ${run.rate.toFixed(0)} msg/s, Node ${nodeCpuUs.toFixed(0)} µs/msg, PostgreSQL ${dbCpuUs.toFixed(0)} µs/msg`,
    );
    return run;
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  }
}

/** Stops the service (it would claim the floor's rows) and runs the floor once per loop count of BENCH_FLOOR_LOOPS. */
export async function dispatchFloors(t: BenchTarget, dbUrl: string, count: number, stopService: () => Promise<void>): Promise<FloorRun[]> {
  await stopService();
  const runs: FloorRun[] = [];
  for (const [i, loops] of floorLoops().entries()) runs.push(await dispatchFloor(t, dbUrl, count, loops, `FLR${String(i).padStart(2, "0")}`));
  return runs;
}

/** The floor's rows of the results table, beside the dispatcher's (bench/run.ts renderReport). */
export function floorRows(runs: FloorRun[], dispatcherRate: number | undefined): string[] {
  return runs.map(
    (r) =>
      `| Dispatcher floor: ${floorWrites() === 3 ? "claim, submission, final state (BENCH_FLOOR_WRITES=3)" : "claim, then the final state with the submission"}, no carrier (${r.loops} loops) | ${f0(r.rate)} msg/s | | | ${r.complete ? 0 : "not drained"} | | ${f0(r.nodeCpuUs)} µs/msg | ${f0(r.dbCpuUs)} µs/msg | ${r.seconds.toFixed(2)} s to drain ${f0(r.count)}, the service stopped${dispatcherRate ? `; the dispatcher ${(dispatcherRate / r.rate).toFixed(2)} × this` : ""} |`,
  );
}
