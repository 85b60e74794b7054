/**
 * Statements on `carriers` (issue 30): the operator API and the dispatcher's routing table read
 * and change carriers only through these. A carrier's Url keeps its password; callers that answer
 * the operator strip it (`publicUrl`). Removal is conditional: only a carrier no route names.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import type { CarrierKind } from "./carrier.entity.js";

/** One carrier as the stores return it. */
export interface CarrierRecord {
  sid: string;
  name: string;
  kind: CarrierKind;
  /** With the password: only the dispatcher reads it. */
  url: string;
  tps: number;
  window: number;
  systemType: string;
  /** The rate card of what the operator pays it per segment (docs/billing.md); null: none. */
  costCard: string | null;
  createdAt: Date;
  updatedAt: Date;
}

interface CarrierDbRow {
  sid: string;
  name: string;
  kind: CarrierKind;
  url: string;
  tps: number | string;
  submit_window: number;
  system_type: string;
  cost_card: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

const COLUMNS = "sid, name, kind, url, tps, submit_window, system_type, cost_card, created_at, updated_at";

function toRecord(r: CarrierDbRow): CarrierRecord {
  return {
    sid: r.sid,
    name: r.name,
    kind: r.kind,
    url: r.url,
    tps: Number(r.tps),
    window: Number(r.submit_window),
    systemType: r.system_type,
    costCard: r.cost_card,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  };
}

/** The Url without its password (the user name stays): what the operator API shows. */
export function publicUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password === "" && !u.searchParams.has("password")) return url;
    u.password = "";
    if (u.searchParams.has("password")) u.searchParams.delete("password");
    return u.toString();
  } catch {
    return "";
  }
}

/** Every carrier, by name. */
export async function listCarriers(em: EntityManager): Promise<CarrierRecord[]> {
  return (await executeBound<CarrierDbRow>(em, `select ${COLUMNS} from carriers order by name`, [])).map(toRecord);
}

/** One carrier by its Sid, or null. */
export async function findCarrier(em: EntityManager, sid: string): Promise<CarrierRecord | null> {
  const rows = await executeBound<CarrierDbRow>(em, `select ${COLUMNS} from carriers where sid = ?`, [sid]);
  return rows[0] ? toRecord(rows[0]) : null;
}

/** Adds a carrier; a name taken already breaks carriers_name_key (409 CarrierExists). */
export async function insertCarrier(em: EntityManager, c: CarrierRecord): Promise<CarrierRecord> {
  const rows = await executeBound<CarrierDbRow>(em, `insert into carriers (${COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning ${COLUMNS}`, [
    c.sid,
    c.name,
    c.kind,
    c.url,
    c.tps,
    c.window,
    c.systemType,
    c.costCard,
    c.createdAt,
    c.updatedAt,
  ]);
  return toRecord(rows[0]!);
}

/**
 * Changes the given fields of a carrier; null when there is no such carrier. `costCard`: undefined
 * leaves it, null clears it.
 */
export async function updateCarrier(
  em: EntityManager,
  sid: string,
  change: Partial<Pick<CarrierRecord, "name" | "kind" | "url" | "tps" | "window" | "systemType" | "costCard">>,
  now: Date,
): Promise<CarrierRecord | null> {
  const rows = await executeBound<CarrierDbRow>(
    em,
    `update carriers set name = coalesce(?, name), kind = coalesce(?, kind), url = coalesce(?, url), tps = coalesce(?::double precision, tps),
            submit_window = coalesce(?::integer, submit_window), system_type = coalesce(?, system_type),
            cost_card = case when ?::boolean then ?::text else cost_card end, updated_at = ?
      where sid = ? returning ${COLUMNS}`,
    [
      change.name ?? null,
      change.kind ?? null,
      change.url ?? null,
      change.tps ?? null,
      change.window ?? null,
      change.systemType ?? null,
      change.costCard !== undefined,
      change.costCard ?? null,
      now,
      sid,
    ],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

/**
 * Removes a carrier no route names, in the caller's transaction: the row is locked first, so a
 * route table replaced at the same moment (which locks the carriers it names, route-store.ts)
 * either commits first and is seen by the check, or finds the carrier gone.
 */
export async function deleteUnroutedCarrier(tx: EntityManager, sid: string): Promise<"deleted" | "missing" | "routed"> {
  const locked = await executeBound<{ sid: string }>(tx, `select sid from carriers where sid = ? for update`, [sid]);
  if (locked.length === 0) return "missing";
  const routed = await executeBound<{ n: number }>(tx, `select 1 as n from routes where ? = any(carriers) limit 1`, [sid]);
  if (routed.length > 0) return "routed";
  await executeBound(tx, `delete from carriers where sid = ?`, [sid]);
  return "deleted";
}

/** Locks the named carriers against removal until the transaction ends; returns the Sids found. */
export async function lockCarriers(tx: EntityManager, sids: string[]): Promise<Set<string>> {
  if (sids.length === 0) return new Set();
  const rows = await executeBound<{ sid: string }>(tx, `select sid from carriers where sid = any(?::text[]) for share`, [sids]);
  return new Set(rows.map((r) => r.sid));
}
