import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import { Webhook } from "standardwebhooks";
import type { Clock } from "../common/clock.js";
import { claimDueWebhooks, recordWebhookAttempt, type DueWebhook } from "./webhook-store.js";
import { callWebhook, PrivateTargetError, systemResolver, type ResolveHost, type WebhookHttpRequest } from "./webhook-client.js";
import { WEBHOOK_CONCURRENCY, WEBHOOK_CONCURRENCY_PER_ACCOUNT, WEBHOOK_CONCURRENCY_PER_HOST } from "../config.js";

/** Options of the webhook sender. */
export interface WebhookWorkerOptions {
  orm: MikroORM;
  clock: Clock;
  allowPrivate: boolean;
  log?: Logger;
  /** Per-call timeout (10 s: docs/api.md#delivery-receipts-and-webhooks). */
  timeoutMs?: number;
  /** How long a call is retried before it is given up (at least 24 hours: docs/api.md#delivery-receipts-and-webhooks). */
  retryForMs?: number;
  /** Calls in flight at once in this process (WEBHOOK_CONCURRENCY). */
  concurrency?: number;
  /** Calls in flight at once per (account, destination host) in this process (WEBHOOK_CONCURRENCY_PER_HOST). */
  concurrencyPerHost?: number;
  /** Calls in flight at once per account, all its hosts together, in this process (WEBHOOK_CONCURRENCY_PER_ACCOUNT). */
  concurrencyPerAccount?: number;
  /** How host names are resolved (default: the system resolver). */
  resolve?: ResolveHost;
  /** Called each time a call ends and frees its slot (the engine wakes its loop to fill it). */
  onSlotFree?: () => void;
}

/** Every call has 10 s to answer (docs/api.md#delivery-receipts-and-webhooks). */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** Retries go on for at least 24 hours (docs/api.md#delivery-receipts-and-webhooks). */
export const WEBHOOK_RETRY_FOR_MS = 24 * 3600 * 1000;
/** Delay after failed attempt n (1-based): 5 s doubling to at most 1 hour. */
export function webhookBackoffMs(attempt: number): number {
  return Math.min(3_600_000, 5000 * 2 ** Math.max(0, attempt - 1));
}

/**
 * The outbox sender: a pool of slots. Each free slot takes the next due call as soon as it frees
 * (no batch waits for its slowest call); due calls are dealt round-robin across accounts, and
 * one (account, host) holds at most a few slots and one account at most its share of all slots
 * however many hosts it names, so one account's slow endpoints cannot hold up another account's calls.
 */
export interface WebhookWorker {
  /** Claims due calls into the free slots and starts them; returns how many it started, without waiting for them. */
  fill(): Promise<number>;
  /** fill(), then waits for the calls it started; returns how many. For tests and one-off runs. */
  tick(): Promise<number>;
  /** Calls in flight now. */
  inFlight(): number;
  /** Waits until no call is in flight. */
  drain(): Promise<void>;
}

/** The signed request for one call: Standard Webhooks headers; GET carries the fields as the query. */
export function buildWebhookRequest(
  call: { id: string; url: string; method: string; payload: Record<string, string | number> },
  secret: string,
  at: Date,
): WebhookHttpRequest {
  const signer = new Webhook(secret);
  const timestamp = new Date(Math.floor(at.getTime() / 1000) * 1000);
  const headers: Record<string, string> = {
    "webhook-id": call.id,
    "webhook-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
    "user-agent": "Switchboard-Webhooks/1",
  };
  if (call.method === "GET") {
    const query = new URLSearchParams(Object.entries(call.payload).map(([k, v]): [string, string] => [k, String(v)])).toString();
    const url = new URL(call.url);
    url.search = url.search ? `${url.search.slice(1)}&${query}` : query;
    // The signed content is the query string the receiver gets, the URI's own parameters included.
    headers["webhook-signature"] = signer.sign(call.id, timestamp, url.search.slice(1));
    return { url: url.toString(), method: "GET", headers };
  }
  const body = JSON.stringify(call.payload);
  headers["webhook-signature"] = signer.sign(call.id, timestamp, body);
  headers["content-type"] = "application/json";
  return { url: call.url, method: "POST", headers, body };
}

/** Creates the webhook worker. Calls are made at least once; the webhook-id stays the same across retries. */
export function createWebhookWorker(opts: WebhookWorkerOptions): WebhookWorker {
  const timeoutMs = opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const retryForMs = opts.retryForMs ?? WEBHOOK_RETRY_FOR_MS;
  const concurrency = Math.max(1, opts.concurrency ?? WEBHOOK_CONCURRENCY);
  const perHost = Math.max(1, opts.concurrencyPerHost ?? WEBHOOK_CONCURRENCY_PER_HOST);
  const perAccount = Math.max(1, opts.concurrencyPerAccount ?? WEBHOOK_CONCURRENCY_PER_ACCOUNT);
  const resolve = opts.resolve ?? systemResolver;
  /** In flight per (account, host), keyed `account host`. */
  const busy = new Map<string, { accountSid: string; host: string; inFlight: number }>();
  const running = new Set<Promise<void>>();
  // Claims run one at a time: each sees the slots the previous one filled.
  let claiming: Promise<unknown> = Promise.resolve();

  async function attempt(row: DueWebhook): Promise<void> {
    const payload = typeof row.payload === "string" ? JSON.parse(row.payload) : row.payload;
    const started = opts.clock.now();
    const t0 = performance.now();
    let statusCode: number | null = null;
    let error = "";
    let permanent = false;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const req = buildWebhookRequest({ id: row.id, url: row.url, method: row.method, payload }, row.webhook_secret, started);
      statusCode = await callWebhook(req, { resolve, allowPrivate: opts.allowPrivate, signal });
      if (statusCode < 200 || statusCode > 299) error = `HTTP ${statusCode}`;
    } catch (err) {
      permanent = err instanceof PrivateTargetError;
      if (signal.aborted) error = `no answer within ${timeoutMs} ms`;
      else error = err instanceof Error ? err.message : String(err);
    }
    const durationMs = Math.round(performance.now() - t0);
    const now = opts.clock.now();
    const attempts = row.attempts + 1;
    await recordWebhookAttempt(opts.orm.em.fork(), {
      id: row.id,
      startedAt: started,
      now,
      statusCode,
      error,
      durationMs,
      attempts,
      giveUp: permanent || now.getTime() - new Date(row.created_at).getTime() >= retryForMs,
      nextAttemptAt: new Date(now.getTime() + webhookBackoffMs(attempts)),
    });
    opts.log?.[error ? "warn" : "debug"](
      { webhookId: row.id, messageSid: row.message_sid, eventType: row.event_type, attempts, statusCode, durationMs, error: error || undefined },
      "webhook attempt",
    );
  }

  /** Runs a claimed call in its slot; the slot frees when the attempt is recorded (or recording failed: the claim then expires). */
  function start(row: DueWebhook): Promise<void> {
    const key = `${row.account_sid} ${row.target_host}`;
    const target = busy.get(key) ?? { accountSid: row.account_sid, host: row.target_host, inFlight: 0 };
    target.inFlight++;
    busy.set(key, target);
    const run = attempt(row)
      .catch((err: unknown) => opts.log?.error({ err, webhookId: row.id }, "webhook attempt not recorded"))
      .finally(() => {
        running.delete(run);
        if (--target.inFlight === 0) busy.delete(key);
        opts.onSlotFree?.();
      });
    running.add(run);
    return run;
  }

  async function claimAndStart(): Promise<Promise<void>[]> {
    const free = concurrency - running.size;
    if (free <= 0) return [];
    const now = opts.clock.now();
    const rows = await claimDueWebhooks(opts.orm.em.fork(), {
      now,
      claimUntil: new Date(now.getTime() + timeoutMs + 30_000),
      max: free,
      perTarget: perHost,
      perAccount,
      busy: [...busy.values()],
    });
    return rows.map(start);
  }

  function fillOnce(): Promise<Promise<void>[]> {
    const next = claiming.then(claimAndStart);
    claiming = next.catch(() => undefined);
    return next;
  }

  return {
    async fill() {
      return (await fillOnce()).length;
    },
    async tick() {
      const started = await fillOnce();
      await Promise.all(started);
      return started.length;
    },
    inFlight: () => running.size,
    async drain() {
      while (running.size > 0) await Promise.all([...running]);
    },
  };
}
