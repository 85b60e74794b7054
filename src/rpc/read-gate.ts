import { getOption, type DescMethod, type DescService } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { MikroORM } from "@mikro-orm/sql";
import { http } from "../../gen/google/api/annotations_pb.js";
import { kAdmin, kEm } from "../common/context.js";
import { kAccount } from "../accounts/account-context.js";
import { apiError } from "../common/errors.js";
import { ormKind, withStatementTimeout } from "../db/orm.js";
import { isStatementTimeout } from "../common/pg-errors.js";
import type { ReadLimits } from "../config.js";

/** Holds per-account and process-wide read slots; `acquire` waits for both, or throws RateLimited. */
export interface ReadGate {
  /** Waits for a slot of `key` and one of the process; the returned function frees both (once). */
  acquire(key: string, signal?: AbortSignal): Promise<() => void>;
  /** Reads in flight now, for `key` or in all. */
  inFlight(key?: string): number;
  /** Reads waiting now, for `key` or in all. */
  waiting(key?: string): number;
}

interface Lane {
  active: number;
  queue: (() => void)[];
}

/**
 * Two levels of counting semaphores, FIFO: an account's reads beyond `perAccount` wait in its own
 * short queue (beyond `queuePerAccount` they are refused at once, so a flood costs no memory),
 * and a read holding its account slot then waits for one of the `global` process slots.
 */
export function createReadGate(limits: Pick<ReadLimits, "perAccount" | "queuePerAccount" | "global">): ReadGate {
  const lanes = new Map<string, Lane>();
  const all: Lane = { active: 0, queue: [] };

  function take(lane: Lane, max: number, signal: AbortSignal | undefined): Promise<void> {
    if (lane.active < max) {
      lane.active++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const go = () => {
        signal?.removeEventListener("abort", abort);
        lane.active++;
        resolve();
      };
      const abort = () => {
        const i = lane.queue.indexOf(go);
        if (i >= 0) lane.queue.splice(i, 1);
        reject(signal!.reason);
      };
      lane.queue.push(go);
      signal?.addEventListener("abort", abort, { once: true });
    });
  }

  function give(lane: Lane): void {
    lane.active--;
    lane.queue.shift()?.();
  }

  return {
    async acquire(key, signal) {
      let lane = lanes.get(key);
      if (!lane) lanes.set(key, (lane = { active: 0, queue: [] }));
      if (lane.active >= limits.perAccount && lane.queue.length >= limits.queuePerAccount) {
        throw apiError(
          "RateLimited",
          `Too many reads at once: an account may have ${limits.perAccount} running and ${limits.queuePerAccount} waiting. Retry after 1 second.`,
          [],
          { "retry-after": "1" },
        );
      }
      const mine = lane;
      const leave = () => {
        give(mine);
        if (mine.active === 0 && mine.queue.length === 0) lanes.delete(key);
      };
      await take(mine, limits.perAccount, signal).catch((err: unknown) => {
        if (mine.active === 0 && mine.queue.length === 0) lanes.delete(key);
        throw err;
      });
      try {
        await take(all, limits.global, signal);
      } catch (err) {
        leave();
        throw err;
      }
      let done = false;
      return () => {
        if (done) return;
        done = true;
        give(all);
        leave();
      };
    },
    inFlight: (key) => (key === undefined ? all.active : (lanes.get(key)?.active ?? 0)),
    waiting: (key) =>
      key === undefined ? [...lanes.values()].reduce((n, l) => n + l.queue.length, 0) + all.queue.length : (lanes.get(key)?.queue.length ?? 0),
  };
}

const kinds = new WeakMap<DescMethod, boolean>();

/** A read is a method whose REST route is a GET (every Get and List method of every service). */
export function isReadMethod(method: DescMethod): boolean {
  let read = kinds.get(method);
  if (read === undefined) {
    read = method.methodKind === "unary" && getOption(method, http).pattern.case === "get";
    kinds.set(method, read);
  }
  return read;
}

/**
 * Wraps the read methods of a service implementation (every Get and List) so that each runs under
 * the gate and, on PostgreSQL, in a transaction with `SET LOCAL statement_timeout`: no account's
 * reads take the connections sends need, and no read runs for long. A wrapper of the methods, not
 * an interceptor, so that a write never passes it; every wire calls the same implementation, after
 * the interceptors (authentication), so the account (or the operator) is the key; an
 * unauthenticated call passes on to be refused by the method.
 */
export function gateReads<S extends DescService>(service: S, impl: ServiceImpl<S>, orm: MikroORM, gate: ReadGate, statementTimeoutMs: number): ServiceImpl<S> {
  const timed = ormKind(orm) === "postgres";
  const gated: Record<string, unknown> = { ...impl };
  for (const method of service.methods) {
    const fn = (impl as Record<string, unknown>)[method.localName];
    if (!isReadMethod(method) || typeof fn !== "function") continue;
    const read = (fn as (req: unknown, ctx: HandlerContext) => Promise<unknown>).bind(impl);
    gated[method.localName] = async (req: unknown, ctx: HandlerContext) => {
      const key = ctx.values.get(kAccount)?.sid ?? (ctx.values.get(kAdmin) ? "operator" : undefined);
      if (key === undefined) return read(req, ctx);
      const release = await gate.acquire(key, ctx.signal);
      try {
        if (!timed) return await read(req, ctx);
        return await withStatementTimeout(orm.em.fork(), statementTimeoutMs, (tx) => {
          ctx.values.set(kEm, () => tx);
          return read(req, ctx);
        });
      } catch (err) {
        if (!isStatementTimeout(err)) throw err;
        throw apiError(
          "ServiceUnavailable",
          `The read took longer than ${statementTimeoutMs} ms and was stopped. Narrow it (a Status, a date range, a smaller Results_Count) or retry later.`,
          [],
          { "retry-after": "2" },
        );
      } finally {
        release();
      }
    };
  }
  return gated as ServiceImpl<S>;
}
