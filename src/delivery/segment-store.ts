import type { EntityManager } from "@mikro-orm/sql";
import type { InboundPartSms, SegmentReceipt } from "./carrier.js";
import { applyFinalStates } from "./receipts.js";
import { type InboundOptions, type InboundResult, receiveInbound } from "./inbound.js";
import { executeBound } from "../db/bound-sql.js";

/**
 * The forms an SMSC message id may take in a receipt: `key`, lower case without leading zeros, and
 * `hexValue`, the id read as hexadecimal written in decimal (null when it is not hex). A submit id
 * "1A2B" (hex) is named "6699" in a receipt that writes it in decimal: its hexValue; a submit id
 * "6699" named "1a2b" in hex: the receipt's hexValue is the submit's key.
 */
export function idForms(id: string): { key: string; hexValue: string | null } {
  const t = id.trim().toLowerCase();
  const key = t.replace(/^0+(?=.)/, "");
  const hexValue = /^[0-9a-f]{1,30}$/.test(t) ? BigInt(`0x${t}`).toString() : null;
  return { key, hexValue };
}

/**
 * How long a receipt naming no known submission is kept before it is dropped (30 s). A receipt can
 * outrun its submit_sm_resp (the SMSC sends it before its answer, or the answer's record commits
 * after the receipt's), by seconds: the submission is recorded as soon as the round's answers are
 * in. A receipt kept longer names an id the SMSC has not issued (yet): applied to whatever message
 * later gets that id, it would settle that message by another's fate (issue 41).
 */
export const PENDING_RECEIPT_KEEP_MS = 30_000;

/**
 * How much earlier than its submission began a kept receipt may have been received and still be
 * applied to it: the two times come from our own clocks (the process that heard the receipt, the
 * one that submitted), which may differ by this much across processes.
 */
export const RECEIPT_CLOCK_SKEW_MS = 2_000;

/** A recorded submission with the SMSC's id of each segment, in order. */
export interface SegmentSubmission {
  messageSid: string;
  segmentIds: string[];
  /** When the carrier answered the submission. */
  at: Date;
  /**
   * When the submission to the carrier began (before its first submit_sm was written; default
   * `at`): recorded as the segments' created_at. No receipt received before it can be for these ids.
   */
  startedAt?: Date;
  /** The name of the carrier that issued the ids ("" without a router). */
  carrier?: string;
}

interface SegmentRow {
  message_sid: string;
  seq: number;
  status: string;
}

/**
 * Records each segment's SMSC id (in the caller's transaction, with the submission itself), then
 * applies the receipts that arrived before it. A resubmitted message's new ids replace the old.
 */
export async function recordSegments(tx: EntityManager, subs: SegmentSubmission[], now: Date): Promise<void> {
  const rows = subs.flatMap((s) =>
    s.segmentIds.map((id, i) => ({ sid: s.messageSid, seq: i + 1, id, ...idForms(id), at: s.startedAt ?? s.at, carrier: s.carrier ?? "" })),
  );
  if (rows.length === 0) return;
  // Bound parameters: arrays travel as one parameter each (MikroORM's execute would expand them).
  await executeBound(
    tx,
    `insert into carrier_segments (message_sid, seq, carrier_id, id_key, id_alt, created_at, carrier)
     select * from unnest(?::text[], ?::int[], ?::text[], ?::text[], ?::text[], ?::timestamptz[], ?::text[])
     on conflict (message_sid, seq) do update
        set carrier_id = excluded.carrier_id, id_key = excluded.id_key, id_alt = excluded.id_alt,
            status = 'Submitted', carrier_error = '', created_at = excluded.created_at, carrier = excluded.carrier`,
    [
      rows.map((r) => r.sid),
      rows.map((r) => r.seq),
      rows.map((r) => r.id),
      rows.map((r) => r.key),
      rows.map((r) => r.hexValue),
      rows.map((r) => r.at),
      rows.map((r) => r.carrier),
    ],
  );
  await applyPendingReceipts(
    tx,
    now,
    subs.map((s) => s.messageSid),
  );
}

/**
 * Applies one receipt: to its segment when the id is known (in any of its forms, the exact form
 * first), else keeps it for when the submission is recorded. Only the ids of the receipt's own
 * carrier match (segments recorded before carriers had names, carrier "", match any). Runs in one
 * transaction: the caller answers the SMSC only after it committed.
 */
export async function applySegmentReceipt(em: EntityManager, r: SegmentReceipt, now: Date): Promise<"applied" | "kept"> {
  return em.transactional(async (tx) => {
    const { key, hexValue } = idForms(r.carrierId);
    const carrier = r.carrier ?? "";
    const found = await executeBound<SegmentRow>(
      tx,
      `select message_sid, seq, status from carrier_segments
        where (id_key = ? or id_alt = ? or id_key = ?) and carrier in (?, '')
        order by (id_key = ?) desc, (carrier = ?) desc, created_at desc limit 1 for update`,
      [key, key, hexValue ?? key, carrier, key, carrier],
    );
    if (found.length === 0) {
      await executeBound(
        tx,
        `insert into carrier_pending_receipts (carrier_id, id_key, id_hex_value, status, carrier_error, received_at, carrier) values (?, ?, ?, ?, ?, ?, ?)`,
        [r.carrierId, key, hexValue, r.status, r.carrierError, r.at, carrier],
      );
      return "kept";
    }
    await applyToSegment(tx, found[0]!, r.status, r.carrierError, r.at, now);
    return "applied";
  });
}

/**
 * applySegmentReceipt for many receipts in the caller's transaction, set-based: one statement finds
 * (and locks) each receipt's segment, one keeps the receipts naming none, one settles the segments,
 * then the messages' final states go through applyFinalStates together. Answers per receipt, in
 * order. Of several receipts for one segment, the first counts (the later ones find it settled), as
 * if they had come one after the other; a receipt for a settled segment changes nothing.
 */
export async function applySegmentReceipts(tx: EntityManager, receipts: SegmentReceipt[], now: Date): Promise<("applied" | "kept")[]> {
  if (receipts.length === 0) return [];
  const forms = receipts.map((r) => idForms(r.carrierId));
  const found = await executeBound<SegmentRow & { n: number | string }>(
    tx,
    `select i.n, s.message_sid, s.seq, s.status
       from unnest(?::text[], ?::text[], ?::text[]) with ordinality as i(key, alt, carrier, n)
       cross join lateral (
         select message_sid, seq, status from carrier_segments
          where (id_key = i.key or id_alt = i.key or id_key = i.alt) and carrier in (i.carrier, '')
          order by (id_key = i.key) desc, (carrier = i.carrier) desc, created_at desc limit 1 for update) s`,
    [forms.map((f) => f.key), forms.map((f) => f.hexValue ?? f.key), receipts.map((r) => r.carrier ?? "")],
  );
  const segmentOf = new Map<number, SegmentRow>();
  for (const row of found) segmentOf.set(Number(row.n) - 1, row);
  const kept = receipts.flatMap((r, i) => (segmentOf.has(i) ? [] : [{ r, ...forms[i]! }]));
  if (kept.length > 0) {
    await executeBound(
      tx,
      `insert into carrier_pending_receipts (carrier_id, id_key, id_hex_value, status, carrier_error, received_at, carrier)
       select * from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::timestamptz[], ?::text[])`,
      [
        kept.map((k) => k.r.carrierId),
        kept.map((k) => k.key),
        kept.map((k) => k.hexValue),
        kept.map((k) => k.r.status),
        kept.map((k) => k.r.carrierError),
        kept.map((k) => k.r.at),
        kept.map((k) => k.r.carrier ?? ""),
      ],
    );
  }
  // The first receipt of each segment still Submitted settles it.
  const settled = new Map<string, { seg: SegmentRow; r: SegmentReceipt }>();
  receipts.forEach((r, i) => {
    const seg = segmentOf.get(i);
    const k = seg && `${seg.message_sid}:${seg.seq}`;
    if (seg && seg.status === "Submitted" && !settled.has(k!)) settled.set(k!, { seg, r });
  });
  if (settled.size > 0) {
    const all = [...settled.values()];
    await executeBound(
      tx,
      `update carrier_segments s set status = u.status, carrier_error = u.carrier_error
         from unnest(?::text[], ?::int[], ?::text[], ?::text[]) as u(message_sid, seq, status, carrier_error)
        where s.message_sid = u.message_sid and s.seq = u.seq`,
      [all.map((x) => x.seg.message_sid), all.map((x) => x.seg.seq), all.map((x) => x.r.status), all.map((x) => x.r.carrierError)],
    );
    // A message fails as soon as one segment failed; it is Delivered once every segment is.
    const failed = new Map<string, SegmentReceipt>();
    const delivered = new Map<string, SegmentReceipt>();
    for (const { seg, r } of all) {
      if (r.status === "Failed") {
        if (!failed.has(seg.message_sid)) failed.set(seg.message_sid, r);
      } else if (!delivered.has(seg.message_sid) || delivered.get(seg.message_sid)!.at < r.at) delivered.set(seg.message_sid, r);
    }
    for (const sid of failed.keys()) delivered.delete(sid);
    const complete = delivered.size
      ? await executeBound<{ message_sid: string }>(
          tx,
          `select message_sid from carrier_segments where message_sid = any(?::text[]) group by message_sid having bool_and(status = 'Delivered')`,
          [[...delivered.keys()]],
        )
      : [];
    const reports = [
      ...[...failed].map(([messageSid, r]) => ({
        messageSid,
        status: "Failed" as const,
        errorCode: "CarrierFailed",
        carrierError: r.carrierError,
        at: r.at,
        now,
      })),
      ...complete.map(({ message_sid }) => ({ messageSid: message_sid, status: "Delivered" as const, errorCode: "", at: delivered.get(message_sid)!.at, now })),
    ];
    if (reports.length > 0) await applyFinalStates(tx, reports);
  }
  return receipts.map((_, i) => (segmentOf.has(i) ? "applied" : "kept"));
}

/**
 * A segment's final state, then the message's: Failed as soon as one segment failed, Delivered
 * once every segment is. A repeated receipt for a settled segment changes nothing.
 */
async function applyToSegment(tx: EntityManager, seg: SegmentRow, status: "Delivered" | "Failed", carrierError: string, at: Date, now: Date): Promise<void> {
  if (seg.status !== "Submitted") return;
  await executeBound(tx, `update carrier_segments set status = ?, carrier_error = ? where message_sid = ? and seq = ?`, [
    status,
    carrierError,
    seg.message_sid,
    seg.seq,
  ]);
  if (status === "Failed") {
    await applyFinalStates(tx, [{ messageSid: seg.message_sid, status: "Failed", errorCode: "CarrierFailed", carrierError, at, now }]);
    return;
  }
  const open = await executeBound<{ n: number | string }>(tx, `select count(*) as n from carrier_segments where message_sid = ? and status <> 'Delivered'`, [
    seg.message_sid,
  ]);
  if (Number(open[0]?.n ?? 0) === 0) await applyFinalStates(tx, [{ messageSid: seg.message_sid, status: "Delivered", errorCode: "", at, now }]);
}

/** Kept receipts one sweep looks at, at most (applyPendingReceipts without messageSids). */
export const PENDING_SWEEP_BATCH = 2000;

/** Where the last sweep stopped (kept receipts by id), per process: the next one goes on from there. */
let sweepAfter = "0";

/**
 * Applies kept receipts whose segment is now known (only those of `messageSids` when given) and,
 * without `messageSids` (the housekeeping), drops the ones kept longer than PENDING_RECEIPT_KEEP_MS.
 * A kept receipt is applied only to a segment whose submission began before it was received (less
 * RECEIPT_CLOCK_SKEW_MS), and only while it is younger than PENDING_RECEIPT_KEEP_MS: an older one
 * named an id the SMSC had not issued then, and a later message given that id is not its message.
 * SKIP LOCKED: two processes never apply the same kept receipt. Only the kept receipts that match
 * are locked: after a flood of receipts for unknown ids (issue 41) tens of thousands may be kept,
 * and every submission record and sweep locking them all held PGlite's one connection for seconds.
 * With messageSids the search starts from those messages' segments; a sweep looks at
 * PENDING_SWEEP_BATCH kept receipts, the next sweep at the following ones, round and round.
 */
export async function applyPendingReceipts(tx: EntityManager, now: Date, messageSids?: string[]): Promise<number> {
  const keptSince = new Date(now.getTime() - PENDING_RECEIPT_KEEP_MS);
  const match = `(s.id_key = p.id_key or s.id_alt = p.id_key or s.id_key = p.id_hex_value) and (s.carrier = p.carrier or s.carrier = '' or p.carrier = '')
    and p.received_at >= s.created_at - make_interval(secs => ${RECEIPT_CLOCK_SKEW_MS / 1000})`;
  let ids: string[];
  if (messageSids) {
    const locked = await executeBound<{ id: string }>(
      tx,
      `select p.id from carrier_segments s join carrier_pending_receipts p on ${match}
        where s.message_sid = any(?::text[]) and p.received_at >= ? for update of p skip locked`,
      [messageSids, keptSince],
    );
    ids = [...new Set(locked.map((r) => String(r.id)))];
  } else {
    const window = await executeBound<{ last: string | null }>(
      tx,
      `select max(id)::text as last from (select id from carrier_pending_receipts where id > ?::bigint order by id limit ${PENDING_SWEEP_BATCH}) w`,
      [sweepAfter],
    );
    const last = window[0]?.last ?? null;
    const from = sweepAfter;
    sweepAfter = last ?? "0";
    const locked = last
      ? await executeBound<{ id: string }>(
          tx,
          `select p.id from carrier_pending_receipts p
            where p.id > ?::bigint and p.id <= ?::bigint and p.received_at >= ? and exists (select 1 from carrier_segments s where ${match})
            for update of p skip locked`,
          [from, last, keptSince],
        )
      : [];
    ids = locked.map((r) => String(r.id));
  }
  const rows =
    ids.length === 0
      ? []
      : await executeBound<SegmentRow & { id: string; p_status: "Delivered" | "Failed"; carrier_error: string; received_at: Date | string }>(
          tx,
          `select distinct on (p.id) p.id, p.status as p_status, p.carrier_error, p.received_at, s.message_sid, s.seq, s.status
             from carrier_pending_receipts p
             join carrier_segments s on ${match}
            where p.id = any(?::bigint[]) ${messageSids ? "and s.message_sid = any(?::text[])" : ""}
            order by p.id, (s.id_key = p.id_key) desc, s.created_at desc`,
          messageSids ? [ids, messageSids] : [ids],
        );
  for (const r of rows) {
    await executeBound(tx, `delete from carrier_pending_receipts where id = ?`, [r.id]);
    // Re-read the segment: an earlier kept receipt of this round may have settled it.
    const seg = await executeBound<SegmentRow>(tx, `select message_sid, seq, status from carrier_segments where message_sid = ? and seq = ?`, [
      r.message_sid,
      r.seq,
    ]);
    if (seg[0]) await applyToSegment(tx, seg[0], r.p_status, r.carrier_error, new Date(r.received_at), now);
  }
  if (!messageSids) await executeBound(tx, `delete from carrier_pending_receipts where received_at < ?`, [keptSince]);
  return rows.length;
}

/**
 * Stores one part of a concatenated inbound SMS; when this completes the set, the parts are taken
 * (a DELETE, so only one process delivers them) and delivered as one inbound SMS in the same
 * transaction. Returns what became of the whole SMS when this part completed it (its sends, for
 * sendAfterCommit once this transaction has committed), else undefined.
 */
export async function storeInboundPart(em: EntityManager, p: InboundPartSms, now: Date, opts: InboundOptions): Promise<InboundResult | undefined> {
  return em.transactional(async (tx) => {
    await executeBound(
      tx,
      `insert into inbound_parts (sender, recipient, ref, total, part, text, received_at) values (?, ?, ?, ?, ?, ?, ?)
       on conflict (sender, recipient, ref, total, part) do nothing`,
      [p.from, p.to, p.ref, p.total, p.part, p.text, p.at],
    );
    const have = await executeBound<{ n: number | string }>(
      tx,
      `select count(*) as n from inbound_parts where sender = ? and recipient = ? and ref = ? and total = ?`,
      [p.from, p.to, p.ref, p.total],
    );
    if (Number(have[0]?.n ?? 0) < p.total) return undefined;
    return deliverParts(tx, { sender: p.from, recipient: p.to, ref: p.ref, total: p.total }, now, opts);
  });
}

interface PartGroup {
  sender: string;
  recipient: string;
  ref: number;
  total: number;
}

async function deliverParts(tx: EntityManager, g: PartGroup, now: Date, opts: InboundOptions): Promise<InboundResult | undefined> {
  const parts = await executeBound<{ part: number; text: string; received_at: Date | string }>(
    tx,
    `delete from inbound_parts where sender = ? and recipient = ? and ref = ? and total = ? returning part, text, received_at`,
    [g.sender, g.recipient, g.ref, g.total],
  );
  if (parts.length === 0) return undefined;
  parts.sort((a, b) => a.part - b.part);
  const first = Math.min(...parts.map((x) => new Date(x.received_at).getTime()));
  return receiveInbound(tx, { from: g.sender, to: g.recipient, text: parts.map((x) => x.text).join(""), at: new Date(first) }, now, opts);
}

/**
 * Delivers, in part order, the parts of every incomplete inbound SMS whose first part came before
 * `before`, each in its own transaction; returns what became of each (for sendAfterCommit).
 */
export async function flushInboundParts(em: EntityManager, before: Date, now: Date, opts: InboundOptions): Promise<InboundResult[]> {
  const groups = await executeBound<PartGroup>(
    em,
    `select sender, recipient, ref, total from inbound_parts group by sender, recipient, ref, total having min(received_at) < ?`,
    [before],
  );
  const delivered: InboundResult[] = [];
  for (const g of groups) {
    const result = await em.transactional((tx) => deliverParts(tx, g, now, opts));
    if (result) delivered.push(result);
  }
  return delivered;
}

/** Deletes the carrier segments of these messages (retention). */
export async function deleteSegmentsOfMessages(tx: EntityManager, messageSids: string[]): Promise<void> {
  await executeBound(tx, `delete from carrier_segments where message_sid = any(?::text[])`, [messageSids]);
}
