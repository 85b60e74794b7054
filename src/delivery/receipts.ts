import type { EntityManager } from "@mikro-orm/sql";
import type { DeliveryReport } from "./carrier.js";
import { type FinalState, type Submission, updateFinalStates, updatePlainFinalStates, updateSubmissions } from "../messaging/message-store.js";
import { enqueueDeliveryReceipt } from "../webhooks/outbox.js";
import { releaseUnsubmittedLeases } from "../leases/lease-store.js";
import { refundMessages } from "../billing/balance-store.js";

/**
 * A final report (Delivered or Failed) and when the service heard it; with the submission the
 * dispatcher held for it (held-submissions.ts), written with the final state.
 */
type Report = Omit<DeliveryReport, "status"> & { status: "Delivered" | "Failed"; now: Date; held?: Submission };

/**
 * Moves a message to its final state (Delivered or Failed) and, when the client asked for a
 * delivery receipt webhook, queues it in the same transaction. A report for a message already
 * final, or unknown, changes nothing (carriers repeat themselves).
 */
export async function applyFinalState(em: EntityManager, report: Report): Promise<boolean> {
  return em.transactional(async (tx) => (await applyFinalStates(tx, [report]))[0]);
}

/**
 * applyFinalState for many reports in the caller's transaction, with one UPDATE: returns, per
 * report, whether it changed its message. Of several reports for one message, the first counts
 * (the later ones find it final), as if they had come one after the other.
 */
export async function applyFinalStates(tx: EntityManager, reports: Report[]): Promise<boolean[]> {
  return (await applyReports(tx, reports)).map((r) => r.changed);
}

/**
 * applyFinalStates for messages the dispatcher fails before a carrier took them (NoRoute, a
 * refusal at submission, SmsNotEnabled, DestinationNotAllowed, QueueTimeout, the retry window
 * over), in the caller's transaction: the leases of those it changed are released with them
 * (lease-store.ts releaseUnsubmittedLeases, conditional: a lease a message of which was submitted
 * or is still queued stays), and their charges refunded (billing/sql/sb_refund.sql).
 */
export async function failUnsubmitted(tx: EntityManager, reports: Report[]): Promise<boolean[]> {
  const changed = await applyFinalStates(tx, reports);
  const failed = reports.filter((_, i) => changed[i]);
  await releaseUnsubmittedLeases(
    tx,
    failed.map((r) => r.messageSid),
  );
  // No carrier took them: their charges are given back, once (docs/billing.md#the-charge-on-the-send).
  if (failed.length > 0)
    await refundMessages(
      tx,
      failed.map((r) => r.messageSid),
      failed[0].now,
    );
  return changed;
}

/**
 * applyFinalStates, telling per report also whether it queued a delivery receipt webhook (the
 * engine wakes the webhook worker only then: a wake-up with nothing queued still costs the
 * worker's query).
 */
export async function applyReports(tx: EntityManager, reports: Report[]): Promise<{ changed: boolean; webhook: boolean }[]> {
  const first = firstReports(reports);
  const rows = await updateFinalStates(
    tx,
    [...first.values()].map((i) => finalState(reports[i])),
  );
  const changed = new Set<string>();
  const queued = new Set<string>();
  for (const m of rows) {
    changed.add(m.sid);
    const report = reports[first.get(m.sid)!];
    if (await enqueueDeliveryReceipt(tx, m, { status: report.status, errorCode: report.errorCode, at: report.at, now: report.now })) queued.add(m.sid);
  }
  return reports.map((r, i) => {
    const counts = first.get(r.messageSid) === i;
    return { changed: counts && changed.has(r.messageSid), webhook: counts && queued.has(r.messageSid) };
  });
}

/**
 * applyReports without a transaction for the messages that need no delivery receipt webhook (most
 * of them): one statement changes those and names the others, which alone go through applyReports
 * in a transaction (their webhook is queued with their final state). Same answers as applyReports.
 */
export async function applyReportBatch(em: EntityManager, reports: Report[]): Promise<{ changed: boolean; webhook: boolean }[]> {
  const first = firstReports(reports);
  const rows = await updatePlainFinalStates(
    em,
    [...first.values()].map((i) => finalState(reports[i])),
  );
  const changed = new Set<string>();
  const needWebhook: Report[] = [];
  for (const m of rows) {
    if (m.needs_webhook) needWebhook.push(reports[first.get(m.sid)!]);
    else changed.add(m.sid);
  }
  const queued = new Set<string>();
  if (needWebhook.length > 0) {
    // Each report here is the first of its message: a later one of the batch finds it final.
    const outcomes = await em.fork().transactional((tx) => applyReports(tx, needWebhook));
    needWebhook.forEach((r, i) => {
      if (outcomes[i].changed) changed.add(r.messageSid);
      if (outcomes[i].webhook) queued.add(r.messageSid);
    });
  }
  return reports.map((r, i) => {
    const counts = first.get(r.messageSid) === i;
    return { changed: counts && changed.has(r.messageSid), webhook: counts && queued.has(r.messageSid) };
  });
}

/** Of each message's reports, the index of the first (the one that counts). */
function firstReports(reports: Report[]): Map<string, number> {
  const first = new Map<string, number>();
  reports.forEach((r, i) => {
    if (!first.has(r.messageSid)) first.set(r.messageSid, i);
  });
  return first;
}

function finalState(r: Report): FinalState {
  return {
    messageSid: r.messageSid,
    status: r.status,
    deliveredAt: r.status === "Delivered" ? r.at : null,
    errorCode: r.errorCode,
    carrierError: r.carrierError ?? "",
    submittedAt: r.held?.at ?? null,
    carrierRef: r.held?.carrierRef ?? null,
    carrier: r.held?.carrier ?? null,
  };
}

/** One submission the carrier holds: the message, when, and the carrier's reference if known. */
export type { Submission };

/**
 * Records that the carrier holds messages, with one UPDATE for many (a dispatcher round): from the
 * dispatcher once the carrier accepted them, or from the carrier's own Submitted report (which may
 * come first, or be the only word after a crash lost the dispatcher's answer). Processing becomes
 * Submitted; a message already Delivered or Failed by an earlier report keeps that status but gets
 * its submission time. The claim ends, so the message is never submitted again. Returns, per
 * submission, whether it changed its message. Sids are unique within a round.
 */
export async function recordSubmissions(em: EntityManager, subs: Submission[]): Promise<boolean[]> {
  if (subs.length === 0) return [];
  const changed = new Set(await updateSubmissions(em, subs));
  return subs.map((x) => changed.has(x.messageSid));
}
