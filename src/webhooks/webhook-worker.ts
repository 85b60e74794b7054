import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import { Webhook } from "standardwebhooks";
import type { Clock } from "../common/clock.js";
import { callWebhook, PrivateTargetError, systemResolver, type ResolveHost, type WebhookHttpRequest } from "./webhook-client.js";

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
  batchSize?: number;
  /** How host names are resolved (default: the system resolver). */
  resolve?: ResolveHost;
}

/** Every call has 10 s to answer (docs/api.md#delivery-receipts-and-webhooks). */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** Retries go on for at least 24 hours (docs/api.md#delivery-receipts-and-webhooks). */
export const WEBHOOK_RETRY_FOR_MS = 24 * 3600 * 1000;

/** Delay after failed attempt n (1-based): 5 s doubling to at most 1 hour. */
export function webhookBackoffMs(attempt: number): number {
  return Math.min(3_600_000, 5000 * 2 ** Math.max(0, attempt - 1));
}

interface DueRow {
  id: string;
  message_sid: string;
  event_type: string;
  url: string;
  method: string;
  payload: Record<string, string | number> | string;
  attempts: number;
  created_at: Date | string;
  webhook_secret: string;
}

/** The outbox sender: claims due webhook calls, signs and makes them, records each attempt. */
export interface WebhookWorker {
  /** Makes one round of due calls; returns how many were attempted. */
  tick(): Promise<number>;
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
  const batchSize = opts.batchSize ?? 50;
  const resolve = opts.resolve ?? systemResolver;

  async function attempt(row: DueRow): Promise<void> {
    const em = opts.orm.em.fork();
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
    await em.transactional(async (tx) => {
      await tx.execute(
        "insert into webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) values (?, ?, ?, ?, ?)",
        [row.id, started, statusCode, error, durationMs],
      );
      if (error === "") {
        await tx.execute(
          `update webhook_deliveries set status = 'Delivered', attempts = ?, delivered_at = ?, last_status_code = ?, last_error = '', claimed_until = null where id = ?`,
          [attempts, now, statusCode, row.id],
        );
        return;
      }
      const giveUp = permanent || now.getTime() - new Date(row.created_at).getTime() >= retryForMs;
      await tx.execute(
        `update webhook_deliveries
            set status = ?, attempts = ?, next_attempt_at = ?, last_status_code = ?, last_error = ?, claimed_until = null
          where id = ?`,
        [giveUp ? "Failed" : "Pending", attempts, new Date(now.getTime() + webhookBackoffMs(attempts)), statusCode, error, row.id],
      );
    });
    opts.log?.[error ? "warn" : "debug"](
      { webhookId: row.id, messageSid: row.message_sid, eventType: row.event_type, attempts, statusCode, durationMs, error: error || undefined },
      "webhook attempt",
    );
  }

  return {
    async tick() {
      const now = opts.clock.now();
      const em = opts.orm.em.fork();
      const rows = await em.execute<DueRow[]>(
        `update webhook_deliveries d
            set claimed_until = ?
           from accounts a
          where a.sid = d.account_sid and d.id in (
            select id from webhook_deliveries
             where status = 'Pending' and next_attempt_at <= ? and (claimed_until is null or claimed_until < ?)
             order by next_attempt_at
             limit ?
             for update skip locked)
        returning d.id, d.message_sid, d.event_type, d.url, d.method, d.payload, d.attempts, d.created_at, a.webhook_secret`,
        [new Date(now.getTime() + timeoutMs + 30_000), now, now, batchSize],
      );
      await Promise.all(rows.map((r) => attempt(r)));
      return rows.length;
    },
  };
}
