import type { EntityManager } from "@mikro-orm/sql";
import type { DeliveryReport } from "../carriers/carrier.js";
import { unixSeconds } from "../common/clock.js";
import { executeBound } from "../db/bound-sql.js";
import { enqueueWebhook } from "../webhooks/outbox.js";

interface FinalRow {
  sid: string;
  account_sid: string;
  property_sid: string;
  sender: string;
  recipient: string;
  delivery_receipt: boolean;
  dr_webhook_uri: string;
  dr_webhook_method: string;
}

/** A final report (Delivered or Failed) and when the service heard it. */
type Report = Omit<DeliveryReport, "status"> & { status: "Delivered" | "Failed"; now: Date };

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
  const first = new Map<string, number>();
  reports.forEach((r, i) => {
    if (!first.has(r.messageSid)) first.set(r.messageSid, i);
  });
  const unique = [...first.values()].map((i) => reports[i]);
  const rows = await executeBound<FinalRow>(
    tx,
    `update messages m
        set status = v.status, delivered_at = v.delivered_at, error_code = v.error_code, carrier_error = v.carrier_error, claimed_until = null
       from unnest(?::text[], ?::text[], ?::timestamptz[], ?::text[], ?::text[]) as v(sid, status, delivered_at, error_code, carrier_error)
      where m.sid = v.sid and m.direction = 'Transmit' and m.status in ('Processing', 'Submitted')
      returning m.sid, m.account_sid, m.property_sid, m.sender, m.recipient, m.delivery_receipt, m.dr_webhook_uri, m.dr_webhook_method`,
    // Not prepared: a plan made once, while the table was small, would keep scanning all of it.
    [unique.map((r) => r.messageSid), unique.map((r) => r.status), unique.map((r) => (r.status === "Delivered" ? r.at : null)), unique.map((r) => r.errorCode), unique.map((r) => r.carrierError ?? "")],
  );
  const changed = new Set<string>();
  for (const m of rows) {
    changed.add(m.sid);
    if (!m.delivery_receipt || m.dr_webhook_uri === "") continue;
    const report = reports[first.get(m.sid)!];
    await enqueueWebhook(tx, {
      accountSid: m.account_sid,
      messageSid: m.sid,
      eventType: "DeliveryReceipt",
      url: m.dr_webhook_uri,
      method: m.dr_webhook_method === "GET" ? "GET" : "POST",
      payload: {
        Type: "DeliveryReceipt",
        MessageSid: m.sid,
        AccountSid: m.account_sid,
        PropertySid: m.property_sid,
        From: m.sender,
        To: m.recipient,
        Status: report.status,
        ErrorCode: report.errorCode,
        Timestamp: unixSeconds(report.at),
      },
      now: report.now,
    });
  }
  return reports.map((r, i) => first.get(r.messageSid) === i && changed.has(r.messageSid));
}

/**
 * Records that the carrier holds a message: from the dispatcher once the carrier accepted it, or
 * from the carrier's own Submitted report (which may come first, or be the only word after a crash
 * lost the dispatcher's answer). Processing becomes Submitted; a message already Delivered or
 * Failed by an earlier report keeps that status but gets its submission time. The claim ends, so
 * the message is never submitted again. Returns whether a row changed.
 */
export async function recordSubmission(em: EntityManager, s: Submission): Promise<boolean> {
  return (await recordSubmissions(em, [s]))[0];
}

/** One submission the carrier holds: the message, when, and the carrier's reference if known. */
export interface Submission {
  messageSid: string;
  at: Date;
  carrierRef: string | null;
}

/**
 * recordSubmission for many messages with one UPDATE (a dispatcher round): returns, per
 * submission, whether it changed its message. Sids are unique within a round.
 */
export async function recordSubmissions(em: EntityManager, subs: Submission[]): Promise<boolean[]> {
  if (subs.length === 0) return [];
  const rows = await executeBound<{ sid: string }>(
    em,
    `update messages m
        set status = case when m.status = 'Processing' then 'Submitted' else m.status end,
            submitted_at = least(v.at, m.delivered_at), carrier_ref = coalesce(v.carrier_ref, m.carrier_ref), claimed_until = null
       from unnest(?::text[], ?::text[], ?::timestamptz[]) as v(sid, carrier_ref, at)
      where m.sid = v.sid and m.direction = 'Transmit'
        and (m.status = 'Processing' or (m.status in ('Delivered', 'Failed') and m.submitted_at is null))
      returning m.sid`,
    // Not prepared, as in applyFinalStates.
    [subs.map((x) => x.messageSid), subs.map((x) => x.carrierRef), subs.map((x) => x.at)],
  );
  const changed = new Set(rows.map((r) => r.sid));
  return subs.map((x) => changed.has(x.messageSid));
}
