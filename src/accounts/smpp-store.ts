/**
 * Statements on `smpp_credentials` and `smpp_binds` (issue 44, docs/smpp-server.md): the
 * operator's credentials of an account's SMPP clients, and the binds open on every process.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";

/** An account's SMPP credentials as stored (the password only as its hash). */
export interface SmppCredentialRecord {
  accountSid: string;
  systemId: string;
  passwordHash: string;
  propertySid: string;
  maxBinds: number;
  allowedAddresses: string[];
  deliverReplies: boolean;
  updatedAt: Date;
}

interface CredentialRow {
  account_sid: string;
  system_id: string;
  password_hash: string;
  property_sid: string;
  max_binds: number;
  allowed_addresses: string[];
  deliver_replies: boolean;
  updated_at: Date | string;
}

const CREDENTIAL_COLUMNS = "account_sid, system_id, password_hash, property_sid, max_binds, allowed_addresses, deliver_replies, updated_at";

function toCredential(r: CredentialRow): SmppCredentialRecord {
  return {
    accountSid: r.account_sid,
    systemId: r.system_id,
    passwordHash: r.password_hash,
    propertySid: r.property_sid,
    maxBinds: Number(r.max_binds),
    allowedAddresses: [...r.allowed_addresses],
    deliverReplies: r.deliver_replies,
    updatedAt: new Date(r.updated_at),
  };
}

/**
 * Sets the account's credentials, replacing any it had. A SystemId another account holds breaks
 * the unique key `smpp_credentials_system_id_key` (the caller answers it as SmppSystemIdTaken).
 */
export async function upsertSmppCredentials(em: EntityManager, c: SmppCredentialRecord): Promise<void> {
  await executeBound(
    em,
    `insert into smpp_credentials (${CREDENTIAL_COLUMNS}) values (?, ?, ?, ?, ?, ?::text[], ?, ?)
     on conflict (account_sid) do update set system_id = excluded.system_id, password_hash = excluded.password_hash,
       property_sid = excluded.property_sid, max_binds = excluded.max_binds, allowed_addresses = excluded.allowed_addresses,
       deliver_replies = excluded.deliver_replies, updated_at = excluded.updated_at`,
    [c.accountSid, c.systemId, c.passwordHash, c.propertySid, c.maxBinds, c.allowedAddresses, c.deliverReplies, c.updatedAt],
  );
}

/** The account's credentials, or undefined. */
export async function findSmppCredentials(em: EntityManager, accountSid: string): Promise<SmppCredentialRecord | undefined> {
  const rows = await executeBound<CredentialRow>(em, `select ${CREDENTIAL_COLUMNS} from smpp_credentials where account_sid = ?`, [accountSid]);
  return rows[0] ? toCredential(rows[0]) : undefined;
}

/** The credentials a bind names by its system_id (exact, as SMPP compares it), or undefined. */
export async function findSmppCredentialsBySystemId(em: EntityManager, systemId: string): Promise<SmppCredentialRecord | undefined> {
  const rows = await executeBound<CredentialRow>(em, `select ${CREDENTIAL_COLUMNS} from smpp_credentials where system_id = ?`, [systemId]);
  return rows[0] ? toCredential(rows[0]) : undefined;
}

/** Whether the account has replies delivered to its binds (read in the reply's transaction). */
export async function deliversRepliesBySmpp(em: EntityManager, accountSid: string): Promise<boolean> {
  const rows = await executeBound<{ deliver_replies: boolean }>(em, `select deliver_replies from smpp_credentials where account_sid = ?`, [accountSid]);
  return rows[0]?.deliver_replies === true;
}

/** One open bind as the operator reads it. */
export interface SmppBindRecord {
  bindId: string;
  accountSid: string;
  systemId: string;
  address: string;
  mode: string;
  since: Date;
  inFlight: number;
}

/**
 * Records a new bind if the account holds fewer than its MaxBinds live ones (those whose
 * heartbeat is at or after `liveSince`), across every process. The account's credentials row is
 * locked first, so two binds at the same moment on two processes count one after the other;
 * binds whose process stopped heartbeating are deleted on the way. False: the account is full
 * (or its credentials are gone).
 */
export async function openSmppBind(em: EntityManager, bind: SmppBindRecord, now: Date, liveSince: Date): Promise<boolean> {
  return em.transactional(async (tx) => {
    const creds = await executeBound<{ max_binds: number }>(tx, `select max_binds from smpp_credentials where account_sid = ? for update`, [bind.accountSid]);
    if (!creds[0]) return false;
    await executeBound(tx, `delete from smpp_binds where account_sid = ? and heartbeat_at < ?`, [bind.accountSid, liveSince]);
    const open = await executeBound<{ n: number | string }>(tx, `select count(*) as n from smpp_binds where account_sid = ?`, [bind.accountSid]);
    if (Number(open[0]?.n ?? 0) >= Number(creds[0].max_binds)) return false;
    await executeBound(
      tx,
      `insert into smpp_binds (bind_id, account_sid, system_id, address, mode, since, in_flight, heartbeat_at) values (?, ?, ?, ?, ?, ?, 0, ?)`,
      [bind.bindId, bind.accountSid, bind.systemId, bind.address, bind.mode, bind.since, now],
    );
    return true;
  });
}

/** Renews this process's binds (their heartbeat and in-flight counts) in one statement. */
export async function heartbeatSmppBinds(em: EntityManager, binds: readonly { bindId: string; inFlight: number }[], now: Date): Promise<void> {
  if (binds.length === 0) return;
  await executeBound(
    em,
    `update smpp_binds b set heartbeat_at = ?, in_flight = v.in_flight
       from unnest(?::text[], ?::int[]) as v(bind_id, in_flight) where b.bind_id = v.bind_id`,
    [now, binds.map((b) => b.bindId), binds.map((b) => b.inFlight)],
  );
}

/** Forgets a bind that ended (unbind, closed connection). */
export async function closeSmppBind(em: EntityManager, bindId: string): Promise<void> {
  await executeBound(em, `delete from smpp_binds where bind_id = ?`, [bindId]);
}

/** The live binds of every process (or of one account), oldest first. */
export async function listSmppBinds(em: EntityManager, liveSince: Date, accountSid?: string): Promise<SmppBindRecord[]> {
  const rows = await executeBound<{
    bind_id: string;
    account_sid: string;
    system_id: string;
    address: string;
    mode: string;
    since: Date | string;
    in_flight: number;
  }>(
    em,
    `select bind_id, account_sid, system_id, address, mode, since, in_flight from smpp_binds
      where heartbeat_at >= ? and (?::text is null or account_sid = ?) order by since, bind_id`,
    [liveSince, accountSid ?? null, accountSid ?? null],
  );
  return rows.map((r) => ({
    bindId: r.bind_id,
    accountSid: r.account_sid,
    systemId: r.system_id,
    address: r.address,
    mode: r.mode,
    since: new Date(r.since),
    inFlight: Number(r.in_flight),
  }));
}

/** How often a process renews its binds' heartbeat. */
export const SMPP_BIND_HEARTBEAT_MS = 10_000;
/** A bind whose heartbeat is older than this is gone (its process stopped): it no longer counts or lists. */
export const SMPP_BIND_STALE_MS = 30_000;
