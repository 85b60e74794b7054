/** The rule of the limit on failed authentications (src/accounts/auth-failures.ts), on a manual clock. */
import { ConnectError, Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createAuthFailureGuard, type AuthFailureGuard } from "../../src/accounts/auth-failures.js";
import { ManualClock } from "../../src/common/clock.js";
import { DEFAULT_AUTH_FAILURE_LIMITS, loadConfig } from "../../src/config.js";

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const ACCOUNT = "AC0123456789ABCDEFGHIJKLMNOPQRST";

function refusal(fn: () => unknown): ConnectError {
  try {
    fn();
  } catch (e) {
    return e as ConnectError;
  }
  throw new Error("not refused");
}

async function refusalOf(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (e) {
    return e as ConnectError;
  }
  throw new Error("not refused");
}

function guard(perAddress: number, perAccount: number, clock: ManualClock): AuthFailureGuard {
  const g = createAuthFailureGuard({ perAddress, perAccount, windowMs: 60_000 }, clock);
  if (!g) throw new Error("no guard");
  return g;
}

describe("the limit on failed authentications", () => {
  it("is off when both limits are 0", () => {
    expect(createAuthFailureGuard({ perAddress: 0, perAccount: 0, windowMs: 60_000 }, new ManualClock(T0))).toBeUndefined();
  });

  it("admits N failed attempts per address in a clock-aligned window, refuses the next with Retry-After to the window's end, and admits again in the next window", async () => {
    const clock = new ManualClock(T0 + 10_000);
    const g = guard(3, 0, clock);
    for (let i = 0; i < 3; i++) await g.attempt("192.0.2.1");
    const err = refusal(() => g.admit("192.0.2.1"));
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.rawMessage).toBe("Too many failed authentications from your address. Retry after 50 seconds.");
    expect(err.metadata.get("retry-after")).toBe("50");
    expect((await refusalOf(g.attempt("192.0.2.1"))).metadata.get("retry-after")).toBe("50");
    // Another address is not concerned.
    await g.attempt("192.0.2.2");
    clock.advance(49_999);
    expect(refusal(() => g.admit("192.0.2.1")).metadata.get("retry-after")).toBe("1");
    clock.advance(1);
    g.admit("192.0.2.1");
    await g.attempt("192.0.2.1");
  });

  it("takes back the count of an attempt that succeeded", async () => {
    const g = guard(2, 0, new ManualClock(T0));
    for (let i = 0; i < 10; i++) (await g.attempt("192.0.2.1")).succeeded();
    await g.attempt("192.0.2.1");
    // The second attempt uses up the window; it succeeds: the address is not blocked.
    (await g.attempt("192.0.2.1")).succeeded();
    g.admit("192.0.2.1");
    await g.attempt("192.0.2.1");
    expect(() => g.admit("192.0.2.1")).toThrow(ConnectError);
  });

  it("counts concurrent attempts before their check: of 8 at once with a limit of 5, 3 are refused", async () => {
    const g = guard(5, 0, new ManualClock(T0));
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => g.attempt("192.0.2.1")));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(5);
    expect(results.filter((r) => r.status === "rejected")).toHaveLength(3);
  });

  it("limits an account from every address except those it authenticated from", async () => {
    const g = guard(100, 2, new ManualClock(T0));
    g.trust("198.51.100.7", ACCOUNT);
    await g.attempt("192.0.2.1", ACCOUNT);
    await g.attempt("192.0.2.2", ACCOUNT);
    const err = refusal(() => g.admit("192.0.2.3", ACCOUNT));
    expect(err.rawMessage).toBe(`Too many failed authentications for account ${ACCOUNT}. Retry after 60 seconds.`);
    // A known-good address is still checked, and its failures do not count against the account.
    g.admit("198.51.100.7", ACCOUNT);
    await g.attempt("198.51.100.7", ACCOUNT);
    // Other accounts, and calls naming none, are not concerned.
    g.admit("192.0.2.3", "AC0000000000000000000000000000000");
    g.admit("192.0.2.3");
  });

  it("does not count a refused account attempt against its address", async () => {
    const g = guard(2, 1, new ManualClock(T0));
    await g.attempt("192.0.2.1", ACCOUNT);
    // The account is used up: refused, and the address's count is given back.
    await expect(g.attempt("192.0.2.2", ACCOUNT)).rejects.toThrow(/for account/);
    await g.attempt("192.0.2.2");
    g.admit("192.0.2.2");
    await g.attempt("192.0.2.2");
    expect(() => g.admit("192.0.2.2")).toThrow(/from your address/);
  });

  it("the limits on failed authentications: documented defaults, 0 turns one off", () => {
    expect(loadConfig({}).authFailures).toEqual(DEFAULT_AUTH_FAILURE_LIMITS);
    expect(DEFAULT_AUTH_FAILURE_LIMITS).toEqual({ perAddress: 20, perAccount: 10, windowMs: 60_000 });
    expect(loadConfig({ AUTH_FAILURES_PER_ADDRESS: "0", AUTH_FAILURES_PER_ACCOUNT: "5", AUTH_FAILURE_WINDOW_SECONDS: "300" }).authFailures).toEqual({
      perAddress: 0,
      perAccount: 5,
      windowMs: 300_000,
    });
    expect(() => loadConfig({ AUTH_FAILURE_WINDOW_SECONDS: "0" })).toThrow(/AUTH_FAILURE_WINDOW_SECONDS/);
    expect(() => loadConfig({ AUTH_FAILURES_PER_ADDRESS: "-1" })).toThrow(/AUTH_FAILURES_PER_ADDRESS/);
  });
});
