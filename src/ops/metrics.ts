import type { LimitCounters } from "../limits/account-limits.js";
import type { SendCounters } from "../messaging/send-counters.js";
import type { MikroORM } from "@mikro-orm/sql";
import type { FastifyBaseLogger } from "fastify";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Carrier } from "../delivery/carrier.js";
import type { RetentionPurge } from "../delivery/retention.js";
import type { LinkInfo } from "../delivery/carrier-router.js";
import type { Clock } from "../common/clock.js";
import { readGaugeRows } from "./metrics-store.js";
import { MESSAGE_STATUSES } from "../messaging/message.entity.js";

/** Labels of one finished HTTP request (REST or RPC). */
export interface RequestLabels {
  method: string;
  /** The route template (`/v2/Messages/:message_sid`, `/switchboard.v2.MessagingService/SendMessage`), never the raw URL. */
  route: string;
  status: number;
  protocol: string;
}

/** One app's metrics: its own registry, never prom-client's global one. */
export interface Metrics {
  registry: Registry;
  /** Counts a finished request and observes its duration. */
  observeRequest(labels: RequestLabels, seconds: number): void;
  /** Reads the database gauges (one query) and renders the registry in the Prometheus text format. */
  render(): Promise<string>;
}

/** Options of createMetrics. */
export interface MetricsOptions {
  orm: MikroORM;
  clock: Clock;
  /** Process and Node.js runtime metrics (prom-client's default set); default true. */
  processMetrics?: boolean;
  /** Where a failed database scrape is reported. */
  log?: FastifyBaseLogger;
  /** Longest the scrape query may take, ms (default 2000). */
  queryTimeoutMs?: number;
  /** The process's carrier: its link state and queue are read at scrape time. */
  carrier?: Carrier;
  /** The process's retention purge: its totals are read at scrape time. */
  retention?: Pick<RetentionPurge, "totals">;
  /** The router's links (one per configured carrier, by name): when given, the carrier metrics are these. */
  carriers?: () => LinkInfo[];
  /** What the limits refused and paced per account in this process. */
  limitCounters?: LimitCounters;
  /** What the send pipeline counted in this process. */
  sendCounters?: SendCounters;
  /** The SMPP server's binds and submit_sm counts in this process (src/smpp-server/), read at scrape time. */
  smppServer?: () => SmppServerStats | undefined;
}

/**
 * What the SMPP server reports (docs/smpp-server.md): declared here so that the metrics read it
 * without importing the server; smpp-server.ts's stats() returns this shape.
 */
export interface SmppServerStats {
  /** Binds open on this process, by account and mode (Transmitter, Receiver, Transceiver). */
  binds: { account: string; mode: string; count: number }[];
  /** submit_sm this process answered since it started, by account and outcome (accepted or refused). */
  submits: { account: string; outcome: "accepted" | "refused"; count: number }[];
}

/** Creates the registry with the HTTP, queue and process metrics (docs/operations.md#metrics). */
export function createMetrics(opts: MetricsOptions): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const labelNames = ["method", "route", "status", "protocol"] as const;
  const requests = new Counter({
    name: "switchboard_http_requests_total",
    help: "HTTP requests (REST and RPC) by route template, method, status and protocol.",
    labelNames,
    registers,
  });
  const duration = new Histogram({
    name: "switchboard_http_request_duration_seconds",
    help: "Time from request to response, by route template, method, status and protocol.",
    labelNames,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const messages = new Gauge({
    name: "switchboard_messages",
    help: "Messages in the database by status (read at scrape time).",
    labelNames: ["status"] as const,
    registers,
  });
  const lag = new Gauge({
    name: "switchboard_dispatcher_lag_seconds",
    help: "Seconds since the oldest due, unclaimed outgoing message became due; 0 when none waits.",
    registers,
  });
  const webhookBacklog = new Gauge({
    name: "switchboard_webhook_backlog",
    help: "Webhook calls not yet made successfully or given up (status Pending).",
    registers,
  });
  const mailBacklog = new Gauge({ name: "switchboard_mail_backlog", help: "Forwarded e-mails not yet sent or given up (status Pending).", registers });
  const databaseUp = new Gauge({
    name: "switchboard_database_up",
    help: "1 when the scrape's database query succeeded, else 0 (the gauges above then keep their last values).",
    registers,
  });
  const carrierLink = new Gauge({
    name: "switchboard_carrier_link",
    help: "1 for the state the carrier's link is in (SMPP bind: Bound, Connecting, Down), 0 for the others; absent for carriers without a link.",
    labelNames: ["carrier", "state"] as const,
    registers,
  });
  const carrierInFlight = new Gauge({
    name: "switchboard_carrier_in_flight",
    help: "Submissions sent to the carrier and not yet answered (this process).",
    labelNames: ["carrier"] as const,
    registers,
  });
  const carrierQueued = new Gauge({
    name: "switchboard_carrier_queued",
    help: "Submissions waiting in this process for the carrier's window or rate.",
    labelNames: ["carrier"] as const,
    registers,
  });
  const purged = new Counter({
    name: "switchboard_retention_purged_messages_total",
    help: "Messages this process deleted past their retention (MESSAGE_RETENTION_DAYS, RetentionDays), with what hangs off them.",
    registers,
  });
  const redacted = new Counter({
    name: "switchboard_retention_redacted_messages_total",
    help: "Messages whose text this process emptied past their account's RedactAfterDays.",
    registers,
  });
  const oldest = new Gauge({
    name: "switchboard_oldest_message_age_seconds",
    help: "Age of the oldest message kept (by Created), read at scrape time; 0 when there is none.",
    registers,
  });
  // The purge counts in its own totals; the counters follow them by the difference since the last scrape.
  const seen = { purged: 0, redacted: 0 };
  function readRetention(): void {
    const t = opts.retention?.totals();
    if (!t) return;
    purged.inc(t.purged - seen.purged);
    redacted.inc(t.redacted - seen.redacted);
    seen.purged = t.purged;
    seen.redacted = t.redacted;
  }
  const carrierSubmitted = new Gauge({
    name: "switchboard_carrier_submitted",
    help: "Messages the carrier accepted since this process started (per configured carrier).",
    labelNames: ["carrier"] as const,
    registers,
  });
  const carrierFailed = new Gauge({
    name: "switchboard_carrier_failed",
    help: "Submissions the carrier refused (temporarily or for good) or lost since this process started (per configured carrier).",
    labelNames: ["carrier"] as const,
    registers,
  });
  const accountQueued = new Gauge({
    name: "switchboard_account_queued",
    help: "Messages of the account waiting in the queue (Scheduled or Processing; read at scrape time).",
    labelNames: ["account"] as const,
    registers,
  });
  const accountRefused = new Gauge({
    name: "switchboard_account_refused",
    help: "Sends of the account this process refused for its request rate (RateLimited) or daily quota (QuotaExceeded) since it started.",
    labelNames: ["account", "reason"] as const,
    registers,
  });
  const accountThrottled = new Gauge({
    name: "switchboard_account_throttled",
    help: "Messages of the account this process's dispatcher gave back to the queue for its MessagesPerSecond since it started.",
    labelNames: ["account"] as const,
    registers,
  });
  const accountQueueTimeouts = new Gauge({
    name: "switchboard_account_queue_timeouts",
    help: "Messages of the account this process's dispatcher failed QueueTimeout (queued past their ValidityPeriod) since it started.",
    labelNames: ["account"] as const,
    registers,
  });
  const unregisteredSenderIds = new Counter({
    name: "switchboard_unregistered_sender_ids_total",
    help: "Sends this process stored with an alphanumeric sender not Registered for the recipient's country, where SENDER_ID_REGISTRATION labels them (label).",
    labelNames: ["country"] as const,
    registers,
  });
  // The pipeline counts in its own totals; the counter follows them by the difference since the last scrape.
  const seenUnregistered = new Map<string, number>();
  function readSendCounters(): void {
    for (const [country, n] of opts.sendCounters?.unregisteredSenderIds() ?? []) {
      unregisteredSenderIds.inc({ country }, n - (seenUnregistered.get(country) ?? 0));
      seenUnregistered.set(country, n);
    }
  }
  const smppBinds = new Gauge({
    name: "switchboard_smpp_binds",
    help: "SMPP binds open on this process, by account and mode (read at scrape time).",
    labelNames: ["account", "mode"] as const,
    registers,
  });
  const smppSubmits = new Gauge({
    name: "switchboard_smpp_submits",
    help: "submit_sm this process's SMPP server answered since it started, by account and outcome (accepted, refused); its rate is the account's submit_sm rate.",
    labelNames: ["account", "outcome"] as const,
    registers,
  });
  if (opts.processMetrics !== false) collectDefaultMetrics({ register: registry });

  function readSmpp(): void {
    const stats = opts.smppServer?.();
    if (!stats) return;
    // Binds come and go: only the open ones are shown.
    smppBinds.reset();
    for (const b of stats.binds) smppBinds.set({ account: b.account, mode: b.mode }, b.count);
    for (const s of stats.submits) smppSubmits.set({ account: s.account, outcome: s.outcome }, s.count);
  }

  function readLimits(): void {
    if (!opts.limitCounters) return;
    for (const [account, c] of opts.limitCounters.totals()) {
      accountRefused.set({ account, reason: "RateLimited" }, c.rateLimited);
      accountRefused.set({ account, reason: "QuotaExceeded" }, c.quotaExceeded);
      accountThrottled.set({ account }, c.throttled);
      accountQueueTimeouts.set({ account }, c.queueTimeouts);
    }
  }

  function readCarrier(): void {
    if (opts.carriers) {
      // Carriers come and go: only the current ones are shown.
      for (const g of [carrierLink, carrierInFlight, carrierQueued, carrierSubmitted, carrierFailed]) g.reset();
      for (const l of opts.carriers()) {
        const carrier = l.name;
        if (l.link !== "") for (const state of ["Bound", "Connecting", "Down"]) carrierLink.set({ carrier, state }, l.link === state ? 1 : 0);
        carrierInFlight.set({ carrier }, l.inFlight);
        carrierQueued.set({ carrier }, l.queued);
        carrierSubmitted.set({ carrier }, l.submitted);
        carrierFailed.set({ carrier }, l.failed);
      }
      return;
    }
    const s = opts.carrier?.status?.();
    if (!opts.carrier || !s) return;
    const carrier = opts.carrier.name;
    if (s.link !== "") for (const state of ["Bound", "Connecting", "Down"]) carrierLink.set({ carrier, state }, s.link === state ? 1 : 0);
    carrierInFlight.set({ carrier }, s.inFlight);
    carrierQueued.set({ carrier }, s.queued);
  }

  async function readGauges(): Promise<void> {
    const now = opts.clock.now();
    try {
      const rows = await readGaugeRows(opts.orm.em.fork(), now, opts.queryTimeoutMs ?? 2000);
      messages.reset();
      accountQueued.reset();
      // Every status, so that a status with no rows reads 0, not absent.
      for (const s of MESSAGE_STATUSES) messages.set({ status: s }, 0);
      for (const r of rows) {
        const value = Number(r.value ?? 0);
        if (r.metric === "messages") messages.set({ status: r.label }, value);
        else if (r.metric === "webhook_backlog") webhookBacklog.set(value);
        else if (r.metric === "mail_backlog") mailBacklog.set(value);
        else if (r.metric === "oldest_message") oldest.set(Math.max(0, value));
        else if (r.metric === "account_queued") accountQueued.set({ account: r.label }, value);
        else lag.set(Math.max(0, value));
      }
      databaseUp.set(1);
    } catch (err) {
      databaseUp.set(0);
      opts.log?.warn({ err }, "metrics: the database gauges could not be read");
    }
  }

  return {
    registry,
    observeRequest(labels, seconds) {
      const l = { ...labels, status: String(labels.status) };
      requests.inc(l);
      duration.observe(l, seconds);
    },
    async render() {
      readCarrier();
      readRetention();
      readLimits();
      readSmpp();
      readSendCounters();
      await readGauges();
      return registry.metrics();
    },
  };
}
