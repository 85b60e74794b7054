/**
 * The console's session store (src/console/console-sessions.ts) on its own: the cookie and the
 * CSRF header together admit, either alone does not; expiry at exactly the TTL; the oldest
 * session ends when the cap is reached; sign-out forgets the session.
 */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/common/clock.js";
import { cookieValue, createConsoleSessions, SESSION_COOKIE } from "../../src/console/console-sessions.js";

const headers = (id: string | undefined, csrf?: string) => {
  const h = new Headers();
  if (id !== undefined) h.set("cookie", `a=b; ${SESSION_COOKIE}=${id}; c=d`);
  if (csrf !== undefined) h.set("x-csrf-token", csrf);
  return h;
};

describe("console sessions", () => {
  it("admits the cookie with its CSRF token only", () => {
    const sessions = createConsoleSessions({ clock: new ManualClock(new Date("2026-11-22T12:00:00Z")) });
    const s = sessions.open();
    expect(s.id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(s.csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(s.id).not.toBe(s.csrf);
    expect(s.maxAgeSeconds).toBe(43200);
    expect(s.expires).toStrictEqual(new Date("2026-11-23T00:00:00Z"));
    expect(sessions.check(headers(s.id, s.csrf))).toBe("admitted");
    expect(sessions.check(headers(s.id))).toBe("refused");
    expect(sessions.check(headers(s.id, `${s.csrf}x`))).toBe("refused");
    expect(sessions.check(headers(undefined, s.csrf))).toBe("absent");
    expect(sessions.check(headers(s.csrf, s.csrf))).toBe("absent");
    // Another session's CSRF token is not this one's.
    const other = sessions.open();
    expect(sessions.check(headers(s.id, other.csrf))).toBe("refused");
  });

  it("ends a session at exactly its TTL", () => {
    const clock = new ManualClock(new Date("2026-11-22T12:00:00Z"));
    const sessions = createConsoleSessions({ clock, ttlMs: 1000 });
    const s = sessions.open();
    clock.advance(999);
    expect(sessions.check(headers(s.id, s.csrf))).toBe("admitted");
    clock.advance(1);
    expect(sessions.check(headers(s.id, s.csrf))).toBe("absent");
    expect(sessions.find(headers(s.id))).toBeUndefined();
  });

  it("ends the oldest session when the cap is reached, and forgets a closed one", () => {
    const sessions = createConsoleSessions({ clock: new ManualClock(new Date("2026-11-22T12:00:00Z")), max: 2 });
    const [a, b] = [sessions.open(), sessions.open()];
    const c = sessions.open();
    expect([a, b, c].map((s) => sessions.check(headers(s.id, s.csrf)))).toStrictEqual(["absent", "admitted", "admitted"]);
    sessions.close(headers(b.id));
    expect(sessions.check(headers(b.id, b.csrf))).toBe("absent");
    expect(sessions.check(headers(c.id, c.csrf))).toBe("admitted");
  });

  it("reads one cookie out of a Cookie header", () => {
    expect(cookieValue("a=1; sb_console=xyz; b=2", "sb_console")).toBe("xyz");
    expect(cookieValue("xsb_console=1", "sb_console")).toBeUndefined();
    expect(cookieValue(null, "sb_console")).toBeUndefined();
    expect(cookieValue("sb_console=", "sb_console")).toBe("");
  });
});
