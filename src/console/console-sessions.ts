/**
 * The console's sessions: an operator who signed in with the admin token holds a random session
 * id in an HttpOnly, SameSite=Strict cookie, and the page holds the session's CSRF token, which it
 * sends as X-CSRF-Token on every call. The operator service accepts the two together instead of
 * the bearer token (accounts/auth.ts, OperatorSessions).
 *
 * In this process's memory: a restart signs every operator out, and behind a balancer a session
 * is known only to the process that opened it (pin the console to one process, or sign in again).
 * Sessions end after SESSION_TTL_MS, at sign-out, or when more than MAX_SESSIONS are open (the
 * oldest goes). Ids are kept as sha256 hashes, so memory holds no usable cookie.
 */
import { createHash, randomBytes } from "node:crypto";
import type { OperatorSessions } from "../accounts/auth.js";
import { secretsEqual } from "../accounts/auth.js";
import type { Clock } from "../common/clock.js";

/** The session cookie's name. */
export const SESSION_COOKIE = "sb_console";
/** The header carrying the session's CSRF token. */
export const CSRF_HEADER = "x-csrf-token";
/** How long a session lasts from sign-in: a working day. */
export const SESSION_TTL_MS = 12 * 3600 * 1000;
/** Most sessions open at once; the oldest is ended to make room. */
export const MAX_SESSIONS = 1000;

/** A session as sign-in opens it: the id goes in the cookie, the CSRF token to the page. */
export interface OpenedSession {
  id: string;
  csrf: string;
  expires: Date;
  /** The cookie's Max-Age: the session's lifetime. */
  maxAgeSeconds: number;
}

/** The console's sessions: opened at sign-in, checked on every operator call, closed at sign-out. */
export interface ConsoleSessions extends OperatorSessions {
  open(): OpenedSession;
  /** The live session whose id the request's cookie carries. */
  find(header: Headers): { csrf: string; expires: Date } | undefined;
  /** Ends the session whose id the request's cookie carries. */
  close(header: Headers): void;
}

const hash = (id: string) => createHash("sha256").update(id).digest("base64url");

/** The value of one cookie in a Cookie header, or undefined. */
export function cookieValue(header: string | null, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const i = part.indexOf("=");
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

/** Creates an empty session store, timed by `clock`. */
export function createConsoleSessions(opts: { clock: Clock; ttlMs?: number; max?: number }): ConsoleSessions {
  const ttlMs = opts.ttlMs ?? SESSION_TTL_MS;
  const max = opts.max ?? MAX_SESSIONS;
  // Insertion order is opening order: the first entry is the oldest.
  const sessions = new Map<string, { csrf: string; expires: Date }>();

  const find = (header: Headers) => {
    const id = cookieValue(header.get("cookie"), SESSION_COOKIE);
    if (!id) return undefined;
    const key = hash(id);
    const s = sessions.get(key);
    if (!s) return undefined;
    if (s.expires.getTime() <= opts.clock.now().getTime()) {
      sessions.delete(key);
      return undefined;
    }
    return s;
  };

  return {
    open() {
      const now = opts.clock.now().getTime();
      for (const [key, s] of sessions) if (s.expires.getTime() <= now) sessions.delete(key);
      while (sessions.size >= max) sessions.delete(sessions.keys().next().value!);
      const session = {
        id: randomBytes(32).toString("base64url"),
        csrf: randomBytes(32).toString("base64url"),
        expires: new Date(now + ttlMs),
        maxAgeSeconds: Math.floor(ttlMs / 1000),
      };
      sessions.set(hash(session.id), { csrf: session.csrf, expires: session.expires });
      return session;
    },
    find,
    close(header) {
      const id = cookieValue(header.get("cookie"), SESSION_COOKIE);
      if (id) sessions.delete(hash(id));
    },
    check(header) {
      const s = find(header);
      if (!s) return "absent";
      const presented = header.get(CSRF_HEADER);
      return presented !== null && secretsEqual(presented, s.csrf) ? "admitted" : "refused";
    },
  };
}
