import { createHash, hash, timingSafeEqual } from "node:crypto";
import { type ContextValues, type Interceptor } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import type { EntityManager, MikroORM } from "@mikro-orm/sql";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { apiError, fieldError } from "../common/errors.js";
import { kAdmin, kClientAddress, kEm, kIdempotencyKey } from "../common/context.js";
import { kAccount } from "./account-context.js";
import { isSid } from "../common/sid.js";
import { Account } from "./account.entity.js";
import { readAccountFresh, tokenHashForShare } from "./account-store.js";
import { createBoundedMemo } from "../common/bounded-memo.js";
import type { AuthFailureGuard } from "./auth-failures.js";

/**
 * sha256 hex of a secret: tokens are high-entropy random strings, so a fast hash is enough at rest.
 * One-shot `hash`, not a Hash object: every authenticated call hashes its token.
 */
export function hashToken(token: string): string {
  return hash("sha256", token, "hex");
}

/** Compares two secrets in constant time (by their hashes, so lengths never leak). */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest());
}

function unauthorized(message: string) {
  return apiError("Unauthorized", message);
}

/** The 401 for an unknown AccountSid or a wrong (or since rotated) token. */
export function wrongCredentials() {
  return unauthorized("The AccountSid or token is wrong.");
}

/**
 * Re-checks, inside the caller's transaction, that the account's token is still the one this
 * process authenticated (it may have been rotated by another process within the cache window):
 * every account write calls it first, as sends do in their batch check. `for share` makes a
 * rotation wait for a write that passed the check, so once a rotation has answered, no write made
 * with the old token can still commit. Throws the 401 of a wrong token.
 */
export async function recheckCredentials(tx: EntityManager, account: Pick<Account, "sid" | "tokenHash">): Promise<void> {
  if ((await tokenHashForShare(tx, account.sid)) !== account.tokenHash) throw wrongCredentials();
}

/** How long a verified AccountSid + token pair is trusted without asking the database. */
export const ACCOUNT_CACHE_TTL_MS = 2000;
const ACCOUNT_CACHE_MAX = 10_000;

/**
 * Accounts whose token was verified recently, keyed by AccountSid and sha256 of the token (never
 * the token itself), so that a busy client costs no database lookup per call. Safe because:
 * - this process's own changes (token rotation, SMS enablement) evict the account at once;
 * - a change made by another process shows here within ACCOUNT_CACHE_TTL_MS at most;
 * - sends re-check the token hash and SMS enablement against the database in the transaction
 *   that stores the message (the send pipeline, src/messaging/send-pipeline.ts), and every other write re-checks the
 *   token in its own transaction (recheckCredentials), so nothing is written on a rotated token
 *   and no send goes out on a disabled account; only reads may still answer within the window;
 * - only successes are cached: a wrong token always costs a lookup.
 */
export interface AccountCache {
  get(sid: string, tokenHash: string): Account | undefined;
  set(account: Account): void;
  /** Forgets an account (its token or settings changed). */
  invalidate(sid: string): void;
}

/** Creates an empty account cache (ttlMs 0 turns caching off). */
export function createAccountCache(ttlMs = ACCOUNT_CACHE_TTL_MS, now: () => number = () => performance.now()): AccountCache {
  const entries = createBoundedMemo<string, { account: Account; until: number }>(ACCOUNT_CACHE_MAX);
  return {
    get(sid, tokenHash) {
      const e = entries.get(sid);
      if (!e) return undefined;
      if (e.until <= now() || e.account.tokenHash !== tokenHash) {
        if (e.until <= now()) entries.delete(sid);
        return undefined;
      }
      return e.account;
    },
    set(account) {
      if (ttlMs <= 0) return;
      entries.set(account.sid, { account, until: now() + ttlMs });
    },
    invalidate(sid) {
      entries.delete(sid);
    },
  };
}

/** Decodes `Basic base64(user:pass)`; undefined when the header is absent or malformed. */
export function parseBasic(header: string | null): { user: string; pass: string } | undefined {
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header ?? "");
  if (!m) return undefined;
  const decoded = Buffer.from(m[1], "base64").toString("utf8");
  const i = decoded.indexOf(":");
  if (i < 0) return undefined;
  return { user: decoded.slice(0, i), pass: decoded.slice(i + 1) };
}

/** True for the operator service, which takes the bearer admin token instead of HTTP Basic. */
export function isOperatorService(service: DescService): boolean {
  return service.typeName === AdminService.typeName;
}

/**
 * The console's signed-in operators (src/console/console-sessions.ts): a live session cookie
 * together with that session's CSRF token in a header stands for the admin token. The cookie
 * alone is no credential, so a request another site makes the browser send (with the cookie,
 * without the header) is refused as unauthenticated.
 */
export interface OperatorSessions {
  /** "absent": no live session cookie; "refused": a live one without its CSRF token; "admitted": both. */
  check(header: Headers): "absent" | "refused" | "admitted";
}

/** What the edge needs to authenticate a call. */
export interface EdgeDeps {
  orm: MikroORM;
  adminToken: string | undefined;
  /** Fully-qualified names of services open to anyone (gRPC health and reflection). */
  openServices?: ReadonlySet<string>;
  /** Recently verified accounts; without one every call looks its account up. */
  accounts?: AccountCache;
  /** The limit on failed authentications; without one, guessing is not limited. */
  failures?: AuthFailureGuard;
  /**
   * Lookups of an AccountSid + token pair in progress: concurrent calls with the same pair share
   * one (and count as one attempt), so that a client's burst on a cold cache is not a burst of
   * attempts. Made by authenticateCall when absent.
   */
  inflight?: Map<string, Promise<Account>>;
  /** The console's sessions, accepted instead of the bearer token on the operator service. */
  operatorSessions?: OperatorSessions;
}

/** What one incoming call looks like to the edge, whatever the transport. */
export interface EdgeCall {
  service: DescService;
  header: Headers;
  values: ContextValues;
  /** The client's address (the socket's remote address), for the limit on failed authentications. */
  address?: string;
}

/**
 * The one edge every transport runs before a method: forks the request's EntityManager,
 * authenticates (operator bearer token for AdminService, none for the open services, HTTP
 * Basic otherwise) and records the result and the Idempotency-Key in context values.
 */
export async function authenticateCall(deps: EdgeDeps, call: EdgeCall): Promise<void> {
  let em: ReturnType<MikroORM["em"]["fork"]> | undefined;
  const requestEm = () => (em ??= deps.orm.em.fork());
  call.values.set(kEm, requestEm);
  // Probes and tools call these with no credentials; they reveal no tenant data.
  if (deps.openServices?.has(call.service.typeName)) return;
  await authenticate(deps, call, requestEm);
  // Only after the credentials: a caller who is not authenticated learns nothing else first.
  const idem = call.header.get("idempotency-key");
  if (idem !== null) {
    if (idem.length === 0 || idem.length > 255) {
      throw fieldError("Idempotency-Key", "InvalidParameter", "The Idempotency-Key header must be 1 to 255 characters long.");
    }
    call.values.set(kIdempotencyKey, idem);
  }
}

/** Checks the call's credentials and records who made it (kAdmin or kAccount). */
async function authenticate(deps: EdgeDeps, call: EdgeCall, requestEm: () => ReturnType<MikroORM["em"]["fork"]>): Promise<void> {
  const authorization = call.header.get("authorization");
  const guard = deps.failures;
  const address = call.address ?? "unknown";
  if (isOperatorService(call.service)) {
    guard?.admit(address);
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (!m && deps.adminToken) {
      // A console session: its id is 256 random bits, so a wrong one is no guess worth counting.
      const session = deps.operatorSessions?.check(call.header) ?? "absent";
      if (session === "admitted") {
        call.values.set(kAdmin, true);
        return;
      }
      if (session === "refused") throw operatorUnauthorized(CSRF_REFUSAL);
    }
    // No bearer token at all is not a guess: not counted.
    if (!deps.adminToken || !m) throw operatorUnauthorized();
    const attempt = await guard?.attempt(address);
    if (!secretsEqual(m[1], deps.adminToken)) throw operatorUnauthorized();
    attempt?.succeeded();
    call.values.set(kAdmin, true);
    return;
  }
  const basic = parseBasic(authorization);
  guard?.admit(address, basic?.user);
  if (!basic) throw unauthorized("Authentication required: use HTTP Basic with your AccountSid as user and your token as password.");
  const presented = hashToken(basic.pass);
  const cached = deps.accounts?.get(basic.user, presented);
  if (cached) {
    guard?.trust(address, cached.sid);
    call.values.set(kAccount, cached);
    return;
  }
  const inflight = (deps.inflight ??= new Map());
  const key = `${basic.user}:${presented}`;
  let lookup = inflight.get(key);
  if (!lookup) {
    lookup = verifyAccount(deps, basic.user, presented, address, requestEm).finally(() => inflight.delete(key));
    inflight.set(key, lookup);
  }
  const account = await lookup;
  guard?.trust(address, account.sid);
  call.values.set(kAccount, account);
}

/** The message of a console session's call without its CSRF token. */
export const CSRF_REFUSAL = "A console session's calls need its X-CSRF-Token header (the page sends it; another site's request cannot).";

/** The 401 of an operator call without the admin token (or a console session's call without its CSRF token). */
export function operatorUnauthorized(message = "Operator calls need `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`.") {
  return apiError("Unauthorized", message, [], {
    "www-authenticate": 'Bearer realm="switchboard-admin"',
  });
}

/** One attempt at an AccountSid + token pair, counted by the guard before the database is asked. */
async function verifyAccount(
  deps: EdgeDeps,
  user: string,
  presented: string,
  address: string,
  requestEm: () => ReturnType<MikroORM["em"]["fork"]>,
): Promise<Account> {
  const sid = isSid(user, "AC") ? user : undefined;
  const attempt = await deps.failures?.attempt(address, sid);
  let account: Account | null;
  try {
    account = sid ? await readAccountFresh(requestEm(), sid) : null;
  } catch (e) {
    // The credential was not checked (the database is down, say): not a failed guess, so the
    // client gets that error (503) and not, after a few, 429 for failures it never made.
    attempt?.succeeded();
    throw e;
  }
  // Compare even when the account is unknown so that timing does not reveal which Sids exist.
  const ok = secretsEqual(presented, account?.tokenHash ?? "0".repeat(64));
  if (!account || !ok) throw wrongCredentials();
  attempt?.succeeded();
  deps.accounts?.set(account);
  return account;
}

/** The authentication interceptor: authenticateCall before the method, on every wire. */
export function authentication(deps: EdgeDeps): Interceptor {
  return (next) => async (req) => {
    await authenticateCall(deps, { service: req.service, header: req.header, values: req.contextValues, address: req.contextValues.get(kClientAddress) });
    return next(req);
  };
}
